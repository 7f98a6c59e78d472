"""The shared read position against today's fanout, every criterion learned (bench/README.md, "Shared read position").

One engine, the default pack (assets/support.toml), the bench tickets (assets/bench-tickets.jsonl), each ticket
warm (the stable block resident, the ticket new), interleaved ticket by ticket in alternating order:

* ``fanout``: today's default, a learned head (random weights of the real shape) on every criterion, read at
  each criterion's own tail, all tails in one decode;
* ``shared:CUE``: the same, with a head fitted on the shared read position: one cue after the ticket.

Reports per length (short, medium, long) the median warm ticket, the per-ticket ratio shared / fanout
(median), tokens evaluated, and the ticket block's own tokens.

    .venv/bin/python bench/shared_read.py --threads 1 --json bench/results/shared_read.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from triage.bench.heads import random_head  # noqa: E402
from triage.domain.pack import load_pack  # noqa: E402
from triage.model.resolve import resolve_model  # noqa: E402
from triage.scoring.cue import TAIL  # noqa: E402
from triage.scoring.engine import Engine, ScoreOptions  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cues", default="answer,end", help="shared cues to time beside fanout")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    ref = resolve_model(args.model)
    pack = load_pack(ROOT / "assets" / "support.toml")
    tickets = [json.loads(line) for line in (ROOT / "assets" / "bench-tickets.jsonl").open()]
    eng = Engine.from_ref(ref, n_ctx=args.n_ctx, threads=args.threads)
    modes = {"fanout": random_head(eng, pack, TAIL)}
    modes |= {f"shared:{c}": random_head(eng, pack, f"shared:{c}") for c in args.cues.split(",")}
    load = os.getloadavg()
    for head in modes.values():  # untimed warm-up
        eng.hold_stable(pack)
        eng.score_ticket(tickets[0]["text"], pack, ScoreOptions(), head=head)
    ms: dict[tuple[str, str], list[float]] = {}
    tokens: dict[tuple[str, str], int] = {}
    block: dict[str, int] = {}
    ratios: dict[tuple[str, str], list[float]] = {}
    names = list(modes)
    for rep in range(args.reps):
        for i, t in enumerate(tickets):
            order = names[(rep + i) % len(names) :] + names[: (rep + i) % len(names)]
            got = {}
            for name in order:
                eng.hold_stable(pack)
                t0 = time.perf_counter()
                r = eng.score_ticket(t["text"], pack, ScoreOptions(), head=modes[name])
                got[name] = (time.perf_counter() - t0) * 1000
                assert all(c.source == "learned" for c in r.criteria)
                ms.setdefault((name, t["id"]), []).append(got[name])
                tokens[(name, t["id"])] = r.tokens.evaluated
            block[t["id"]] = len(eng.tokenizer.encode(eng.builder(pack).ticket_block_text(t["text"])))
            for name in names[1:]:
                ratios.setdefault((name, t["kind"]), []).append(got[name] / got["fanout"])
        print(f"rep {rep + 1}/{args.reps} done", file=sys.stderr)
    kinds = ("short", "medium", "long")
    by_kind = {k: [t["id"] for t in tickets if t["kind"] == k] for k in kinds}
    out = {
        "model": ref.name,
        "threads": args.threads,
        "n_ctx": args.n_ctx,
        "reps": args.reps,
        "tickets": {k: len(v) for k, v in by_kind.items()},
        "load_start": load,
        "load_end": os.getloadavg(),
        "ticket_ms_median": {
            f"{name}:{k}": statistics.median(x for tid in ids for x in ms[(name, tid)])
            for name in names
            for k, ids in by_kind.items()
        },
        "ratio_vs_fanout_median": {f"{n}:{k}": statistics.median(v) for (n, k), v in ratios.items()},
        "tokens_evaluated_median": {
            f"{name}:{k}": statistics.median(tokens[(name, tid)] for tid in ids)
            for name in names
            for k, ids in by_kind.items()
        },
        "ticket_block_tokens_median": {k: statistics.median(block[tid] for tid in ids) for k, ids in by_kind.items()},
        "tokens_over_ticket_block_max": {
            name: max(tokens[(name, t["id"])] - block[t["id"]] for t in tickets) for name in names
        },
    }
    eng.close()
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
