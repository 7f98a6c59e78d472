#!/usr/bin/env python3
"""Fit the starter head at each criterion's tail (issue 41's unmeasured candidate) from eval's readout cache.

    python bench/quality/starter_tail_head.py OUT.npz [--model NAME]

The starter set must already be in the cache at ``--read tail`` (``score_sets.py --read tail``); nothing is
scored here. The fit is the product's own (:func:`triage.learning.starter.fit_starter_head`, ``triage learn``'s
fit) with ``read="tail"``; ``starter_round2.py`` then reads the tail dump with this head.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("output", type=Path)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    args = ap.parse_args()

    from triage.domain.pack import default_pack
    from triage.learning.cache import ReadoutCache
    from triage.learning.head_file import write_head
    from triage.learning.scorer import Scorer
    from triage.learning.starter import fit_starter_head, starter_rows
    from triage.scoring.cue import TAIL
    from triage.scoring.loader import load_engine

    pack = default_pack()
    rows = starter_rows(pack)
    engine = load_engine(args.model, lazy=True)
    with engine, ReadoutCache() as cache:
        sc = Scorer(engine, pack, cache, "label", TAIL)
        sc.features = True
        outcomes = [sc.cached(sc.text_key(r.ticket)) for r in rows]
    missing = sum(o is None for o in outcomes)
    if missing:
        print(f"{missing} of {len(rows)} starter rows are not in the cache at the tails: score them first")
        return 1
    t0 = time.perf_counter()
    head, _ = fit_starter_head(engine, pack, rows, [o for o in outcomes if o is not None], read=TAIL)
    print(f"fitted the tail head on {len(rows)} rows in {time.perf_counter() - t0:.0f} s")
    write_head(head, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
