#!/usr/bin/env python3
"""Score labelled sets into eval's readout cache at one read position, as the starter head reads them.

    python bench/quality/score_sets.py FILE.jsonl... [--model NAME] [--read shared:answer|tail] [--threads N]
        [--tickets MAPPED.jsonl...]

Each row is scored as :func:`triage.learning.starter.score_starter_rows` scores the starter set (the label
readout, answer-position features, ``triage score``'s context); a row already in the cache costs nothing.
``starter_fit_dump.py`` then reads them out. Prints rows/s every 50 rows. ``--tickets`` files are scored by
their ``id`` and ``text`` alone, whatever their labels (the mapped development set's are not the pack's options).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", type=Path, nargs="*")
    ap.add_argument("--tickets", type=Path, nargs="*", default=[], help="files scored by id and text alone")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--read", default=None, help="read position (default: the starter head's)")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()

    import json

    from triage.domain.pack import default_pack
    from triage.domain.ticket import make_ticket
    from triage.learning.cache import ReadoutCache
    from triage.learning.labelled import read_labelled
    from triage.learning.scorer import Scorer, score_rows
    from triage.learning.starter import STARTER_READ
    from triage.scoring.loader import load_engine

    pack = default_pack()
    engine = load_engine(args.model, threads=args.threads)
    with engine, ReadoutCache() as cache:
        scorer = Scorer(engine, pack, cache, "label", args.read or STARTER_READ)
        scorer.features = True
        sets = [(p, read_labelled(p, pack).rows) for p in args.files]
        sets += [(p, [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines()]) for p in args.tickets]
        for path, rows in sets:
            t0, state = time.perf_counter(), {"n": 0}

            def tick(_hit: bool, rows=rows, t0=t0, state=state, path=path) -> None:  # noqa: ANN001
                state["n"] += 1
                if state["n"] % 50 == 0 or state["n"] == len(rows):
                    rate = state["n"] / (time.perf_counter() - t0)
                    print(f"{path.name}: {state['n']}/{len(rows)}, {rate:.2f} rows/s", file=sys.stderr, flush=True)

            if rows and isinstance(rows[0], dict):
                for r in rows:
                    scorer.outcome(make_ticket(r["text"], r["id"]))
                    tick(False)
            else:
                score_rows(scorer, rows, tick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
