"""Bench the ``threads`` workload: re-scoring a growing thread against a fresh score and the raw bound.

For three threads (a short, a medium and a long real ticket of the bench set, then an agent's
answer, a follow-up, an answer and a last follow-up), every turn is scored three ways side by
side and interleaved (see :mod:`triage.bench.threads`): re-scored with the thread's kept state,
scored fresh under a new id, and the re-score's evaluated tokens decoded plainly (the bound,
"new tokens + tails at the raw prompt-processing rate"). Prints a table of medians and writes JSON.

  python bench/threads.py --model qwen2.5-coder-0.5b --repeats 3 --json bench/results/threads-qwen2.5-coder-0.5b.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="catalog name or GGUF path (default: as triage score)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores)")
    p.add_argument("--n-ctx", type=int, default=4096)
    p.add_argument("--repeats", type=int, default=3, help="times each thread is replayed (default 3)")
    p.add_argument(
        "--read",
        default="zero-shot",
        help=(
            "zero-shot (default: every criterion read at its own tail, no head), or tail / shared[:CUE]: every "
            "criterion learned (a head of the real shape, random weights) and read there"
        ),
    )
    p.add_argument("--json", dest="json_path", default=None, help="write the results here")
    args = p.parse_args(argv)

    from triage.assets_path import asset
    from triage.bench.machine import cpu_snapshot, load_average, machine_info, other_cpu_share
    from triage.bench.threads import build_threads, measure
    from triage.bench.workload import TICKETS_ASSET, read_tickets
    from triage.domain.pack import default_pack
    from triage.model.native import default_threads
    from triage.scoring.loader import load_engine

    tickets = read_tickets(Path(asset(TICKETS_ASSET)))
    chosen = [next(t for t in tickets if t.kind == kind) for kind in ("short", "medium", "long")]
    engine = load_engine(args.model, n_ctx=args.n_ctx, threads=args.threads, persist_stable=False)
    pack = default_pack()
    head = None
    if args.read != "zero-shot":
        from triage.bench.heads import random_head
        from triage.scoring.cue import check_read

        head = random_head(engine, pack, check_read(args.read))
    load0, cpu0 = load_average(), cpu_snapshot()
    results = measure(engine, pack, build_threads(chosen), args.repeats, head=head)
    load1, cpu1 = load_average(), cpu_snapshot()
    print(f"model {engine.name}, read {args.read}, {args.repeats} repeats, load {load0[0]:.2f} -> {load1[0]:.2f}")
    print(
        f"{'thread':8} {'turn':>4} {'eval':>5} {'new':>4} {'reused':>6} {'fresh eval':>10} "
        f"{'re-score ms':>11} {'fresh ms':>9} {'bound ms':>9} {'/bound':>7} {'fresh/re':>8}"
    )
    for r in results:
        for t in r["turns"]:
            print(
                f"{r['kind']:8} {t['messages']:>4} {t['evaluated']:>5} {t['new']:>4} {t['reused']:>6} "
                f"{t['fresh_evaluated']:>10} {t['rescore_ms']:>11.0f} {t['fresh_ms']:>9.0f} {t['bound_ms']:>9.0f} "
                f"{t['rescore_over_bound']:>7.2f} {t['fresh_over_rescore']:>8.2f}"
            )
    if args.json_path:
        out = {
            "schema": "triage.bench-threads/1",
            "model": engine.model_info,
            "machine": machine_info(args.threads or default_threads()),
            "load_average": {"start": load0, "end": load1},
            "other_cpu_share": other_cpu_share(cpu0, cpu1),
            "repeats": args.repeats,
            "read": args.read,
            "threads": results,
        }
        Path(args.json_path).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json_path}")
    engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
