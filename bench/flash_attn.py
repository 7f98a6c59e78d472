"""Flash attention on against off, side by side in one process (bench/README.md, "Flash attention").

Two engines on the same model file, one with llama.cpp's flash attention kernels and one without,
are timed interleaved (the order alternates every repetition) on the bench tickets:

* single tails of 8, 28 and 96 tokens after the ticket's real prefix (what serial/truncate decodes
  per tail), dropped again after each;
* a warm fanout ticket with the default pack (stable block resident, the ticket new);
* the exactness checks of tests/test_engine.py: serial equals split bit for bit, fanout within the
  tolerance of serial; and how far the two kernels' probabilities are apart.

    .venv/bin/python bench/flash_attn.py --model qwen2.5-coder-0.5b --threads 1 --json bench/results/flash_attn.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from triage.domain.pack import load_pack  # noqa: E402
from triage.lab import score as lab  # noqa: E402
from triage.lab.options import LabOptions  # noqa: E402
from triage.lab.split import Split  # noqa: E402
from triage.model.native import Seq  # noqa: E402
from triage.model.resolve import resolve_model  # noqa: E402
from triage.scoring.engine import Engine, ScoreOptions  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROBE_SEQ = 62
FANOUT_TOL = 0.05  # tests/test_engine.py


def probs(result) -> np.ndarray:
    return np.array([o.probability for c in result.criteria for o in c.options])


def tail_ms(eng: Engine, pack, text: str, size: int) -> float:
    """One tail of ``size`` tokens after the ticket's prefix (stable block resident)."""
    n = eng.native
    prompts = eng.builder(pack).build(text, [[tuple(range(len(c.options)))] for c in pack.criteria], n_ctx=eng.n_ctx)
    filler = tuple(t for s in prompts.prompts for t in prompts.tail(s))
    while len(filler) < size:
        filler += filler
    eng.hold_stable(pack)
    p, s = len(prompts.prefix), len(prompts.stable)
    n.seq_cp(0, PROBE_SEQ, -1, -1)
    n.decode([Seq("rest", PROBE_SEQ, s, prompts.prefix[s:])])
    t0 = time.perf_counter()
    n.decode([Seq("t", PROBE_SEQ, p, filler[:size])])
    ms = (time.perf_counter() - t0) * 1000
    n.seq_rm(PROBE_SEQ, -1, -1)
    return ms


def ticket_ms(eng: Engine, pack, text: str) -> tuple[float, np.ndarray]:
    eng.hold_stable(pack)
    t0 = time.perf_counter()
    r = eng.score_ticket(text, pack, ScoreOptions())
    return (time.perf_counter() - t0) * 1000, probs(r)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--limit", type=int, default=12, help="bench tickets to use (of assets/bench-tickets.jsonl)")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    ref = resolve_model(args.model)
    pack = load_pack(ROOT / "assets" / "support.toml")
    tickets = [json.loads(line) for line in (ROOT / "assets" / "bench-tickets.jsonl").open()][: args.limit]
    engines = {on: Engine.from_ref(ref, n_ctx=args.n_ctx, threads=args.threads, flash_attn=on) for on in (True, False)}
    load = os.getloadavg()
    sizes = (8, 28, 96)
    tails: dict[tuple[bool, int], list[float]] = {}
    ticket: dict[tuple[bool, str], list[float]] = {}
    ratios_tail: dict[int, list[float]] = {z: [] for z in sizes}
    ratios_ticket: dict[str, list[float]] = {}
    exact: dict[str, dict[str, float]] = {}
    for rep in range(args.reps):
        for t in tickets:
            order = (True, False) if (rep + len(t["text"])) % 2 == 0 else (False, True)
            for z in sizes:
                got = {on: tail_ms(engines[on], pack, t["text"], z) for on in order}
                for on in order:
                    tails.setdefault((on, z), []).append(got[on])
                ratios_tail[z].append(got[True] / got[False])
            got_t = {on: ticket_ms(engines[on], pack, t["text"]) for on in order}
            for on in order:
                ticket.setdefault((on, t["kind"]), []).append(got_t[on][0])
            ratios_ticket.setdefault(t["kind"], []).append(got_t[True][0] / got_t[False][0])
            if rep == 0:
                e = {}
                for on in (True, False):
                    eng = engines[on]
                    split = probs(lab.score_ticket(eng, t["text"], pack, LabOptions(mode="split"), schedule=Split()))
                    serial = probs(lab.score_ticket(eng, t["text"], pack, LabOptions(mode="serial")))
                    e["on" if on else "off"] = {
                        "serial_vs_split_max": float(np.max(np.abs(serial - split))),
                        "fanout_vs_serial_max": float(np.max(np.abs(got_t[on][1] - serial))),
                    }
                e["on_vs_off_fanout_max"] = float(np.max(np.abs(got_t[True][1] - got_t[False][1])))
                exact[t["id"]] = e
        print(f"rep {rep + 1}/{args.reps} done", file=sys.stderr)
    out = {
        "model": ref.name,
        "threads": args.threads,
        "n_ctx": args.n_ctx,
        "reps": args.reps,
        "tickets": len(tickets),
        "load_start": load,
        "load_end": os.getloadavg(),
        "tail_ms_median": {f"{'on' if on else 'off'}:{z}": statistics.median(v) for (on, z), v in tails.items()},
        "tail_on_over_off_median": {str(z): statistics.median(v) for z, v in ratios_tail.items()},
        "ticket_ms_median": {f"{'on' if on else 'off'}:{k}": statistics.median(v) for (on, k), v in ticket.items()},
        "ticket_on_over_off_median": {k: statistics.median(v) for k, v in ratios_ticket.items()},
        "exactness": exact,
        "serial_vs_split_max": {w: max(e[w]["serial_vs_split_max"] for e in exact.values()) for w in ("on", "off")},
        "fanout_vs_serial_max": {w: max(e[w]["fanout_vs_serial_max"] for e in exact.values()) for w in ("on", "off")},
        "on_vs_off_fanout_max": max(e["on_vs_off_fanout_max"] for e in exact.values()),
    }
    for e in engines.values():
        e.close()
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
