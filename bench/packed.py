"""Backlog throughput with and without packed decodes, side by side in one run.

Scores the same tickets one per decode (``--pack-tokens 0``, as before packing) and packed
(``--pack-tokens N``), interleaved chunk by chunk so that machine noise hits both alike,
and reports tickets per second, the ratio, whether every choice is the same, the largest
probability difference, and the process's resident memory after each mode. Threads'
kept states are off (``thread_cache_mib=0``): each ticket is scored twice here.

  python bench/packed.py --model qwen2.5-coder-0.5b \\
      --short ../shared/datasets/airline-sentiment/tickets.jsonl --n-short 200 \\
      --long ../shared/datasets/cfpb-product/tickets.jsonl --n-long 50 --json bench/results/packed.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any


def rss_mib() -> float:
    """This process's resident memory now, in MiB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def read(path: str, n: int) -> list[Any]:
    from triage.domain.ticket import make_ticket

    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out.append(make_ticket(row["text"], str(row.get("id") or len(out))))
        if len(out) == n:
            break
    return out


PACK_TOKENS = 512  # tokens per packed decode: one llama.cpp micro-batch


def run_set(engine: Any, pack: Any, tickets: list[Any], budget: int, chunk: int) -> dict[str, Any]:
    import numpy as np

    from triage.errors import TriageError
    from triage.lab.packed import score_packed

    times = {"alone": 0.0, "packed": 0.0}
    results: dict[str, dict[str, Any]] = {"alone": {}, "packed": {}}
    rss = {}
    for i in range(0, len(tickets), chunk):
        part = tickets[i : i + chunk]
        for mode, b in (
            (("alone", 0), ("packed", budget)) if (i // chunk) % 2 == 0 else (("packed", budget), ("alone", 0))
        ):
            t0 = time.perf_counter()
            for t, done in score_packed(engine, part, pack, budget=b):
                if isinstance(done, TriageError):
                    raise done
                results[mode][t.id] = done.result
            times[mode] += time.perf_counter() - t0
            rss[mode] = max(rss.get(mode, 0.0), rss_mib())
    same = worst = 0
    for tid, a in results["alone"].items():
        p = results["packed"][tid]
        same += [c.choice for c in a.criteria] == [c.choice for c in p.criteria]
        pa = np.array([o.probability for c in a.criteria for o in c.options])
        pb = np.array([o.probability for c in p.criteria for o in c.options])
        worst = max(worst, float(np.max(np.abs(pa - pb))))
    n = len(tickets)
    return {
        "tickets": n,
        "mean_ticket_tokens": round(sum(r.tokens.ticket for r in results["alone"].values()) / n, 1),
        "alone_tickets_per_s": round(n / times["alone"], 3),
        "packed_tickets_per_s": round(n / times["packed"], 3),
        "speedup": round(times["alone"] / times["packed"], 3),
        "same_choices": same,
        "max_abs_prob_diff": round(worst, 4),
        "rss_mib": {k: round(v, 1) for k, v in rss.items()},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--short", required=True, help="JSON Lines of short tickets")
    p.add_argument("--long", required=True, help="JSON Lines of long tickets")
    p.add_argument("--n-short", type=int, default=200)
    p.add_argument("--n-long", type=int, default=50)
    p.add_argument(
        "--pack-tokens", type=int, default=PACK_TOKENS, help=f"budget (default {PACK_TOKENS}, one micro-batch)"
    )
    p.add_argument("--chunk", type=int, default=10, help="tickets per interleaved chunk")
    p.add_argument("--json", dest="json_path", default=None)
    args = p.parse_args(argv)

    from triage.bench.machine import load_average, machine_info
    from triage.domain.pack import default_pack
    from triage.model.resolve import resolve_model
    from triage.scoring.engine import Engine

    budget = args.pack_tokens
    ref = resolve_model(args.model)
    base_rss = rss_mib()
    engine = Engine.from_ref(ref, threads=args.threads, thread_cache_mib=0)
    pack = default_pack()
    engine.hold_stable(pack)
    loaded_rss = rss_mib()
    load0 = load_average()
    out: dict[str, Any] = {"model": engine.model_info, "budget": budget, "threads": args.threads}
    for name, path, n in (("short", args.short, args.n_short), ("long", args.long, args.n_long)):
        got = run_set(engine, pack, read(path, n), budget, args.chunk)
        out[name] = got
        print(
            f"{name}: {got['tickets']} tickets of {got['mean_ticket_tokens']} tokens: "
            f"{got['alone_tickets_per_s']} tickets/s one per decode, {got['packed_tickets_per_s']} packed "
            f"({got['speedup']}x); same choices {got['same_choices']}/{got['tickets']}, "
            f"max |dp| {got['max_abs_prob_diff']}; RSS {got['rss_mib']} MiB",
            flush=True,
        )
    out["rss_mib"] = {"before_model": round(base_rss, 1), "model_loaded": round(loaded_rss, 1)}
    out["load_average"] = {"start": load0, "end": load_average()}
    out["machine"] = machine_info(args.threads)
    print(f"load average {load0[0]:.2f} -> {out['load_average']['end'][0]:.2f}")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
