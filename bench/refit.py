"""How long a re-fit takes as labels come in, and that the faster fit policy gives the same heads.

The app re-fits every criterion's head in the background after every 20 new labels, on every
label so far, and ``triage learn --history`` does the same fit. Its cost grows with the labels:
five-fold cross-validation over the C grid, each fold in the span of its rows. This times, on
the first N rows of a labelled file for each N given, side by side in one process:

* ``whole grid``: every C of the grid, in the rows' whole span (the fit before 2026-12-01);
* ``now``: the grid walk that stops after two C values in a row score worse than the best, in a
  span capped at the model's hidden width plus the log-probs (``fit_head``'s defaults).

and how far the two heads' probabilities are apart on every row. Each ticket is scored once
(the label readout in fanout, through eval's cache, as ``bench/learning_loop.py`` does), so
only fits are timed. Fits alternate between the two, ``--repeat`` times; medians.

  python bench/refit.py ../shared/datasets/helpdesk --model qwen2.5-coder-0.5b --sizes 100,200,300
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", type=Path, help="a folder with criteria.toml and tickets.jsonl, or a labelled JSONL")
    ap.add_argument("--pack", type=Path, default=None, help="the criteria pack (default: DATASET/criteria.toml)")
    ap.add_argument("--model", default=None, help="model name or .gguf path (default: triage's default order)")
    ap.add_argument("--sizes", default="100,200,300", help="comma-separated row counts to fit on (default 100,200,300)")
    ap.add_argument("--repeat", type=int, default=3, help="fits of each policy per size (default 3; medians)")
    ap.add_argument("--n-ctx", type=int, default=1024, help="context size (default 1024, as learn and eval)")
    ap.add_argument("-o", "--output", type=Path, default=None, help="write the figures as JSON here")
    args = ap.parse_args(argv)

    from triage.bench.labelled import score_labelled
    from triage.evaluation.labelled_runs import report_consoles

    out, err = report_consoles()
    sizes = [int(s) for s in args.sizes.split(",")]
    data = score_labelled(
        args.dataset,
        pack=args.pack,
        model=args.model,
        n_ctx=args.n_ctx,
        limit=max(sizes),
        part="refit",
        console=err,
        notice=lambda s: err.print(f"triage: {s}", markup=False),
    )
    rows, feats, raw = data.rows, data.features, data.raw

    def fit(n: int, policy: dict[str, Any]) -> tuple[float, Any]:
        inputs = data.inputs(range(n))  # not timed: the fit alone is
        t0 = time.perf_counter()
        head = data.fit(range(n), "refit", inputs=inputs, **policy)
        return time.perf_counter() - t0, head

    policies = {"whole grid": {"patience": None, "hidden_width": None}, "now": {}}
    results = []
    for n in [s for s in sizes if s <= len(rows)]:
        times: dict[str, list[float]] = {k: [] for k in policies}
        heads: dict[str, Any] = {}
        for rep in range(args.repeat):
            for name in policies if rep % 2 == 0 else reversed(list(policies)):
                seconds, heads[name] = fit(n, policies[name])
                times[name].append(seconds)
        gap, chosen = 0.0, {}
        for cid in heads["now"].criteria:
            a = np.array([np.exp(heads["now"].apply(cid, feats[cid][i], raw[cid][i])) for i in range(len(rows))])
            b = np.array([np.exp(heads["whole grid"].apply(cid, feats[cid][i], raw[cid][i])) for i in range(len(rows))])
            gap = max(gap, float(np.max(np.abs(a - b))))
            chosen[cid] = [heads[k].criteria[cid].info["C"] for k in policies]
        med = {k: float(np.median(v)) for k, v in times.items()}
        results.append({"rows": n, "seconds": times, "median": med, "max_abs_dp": gap, "C": chosen})
        out.print(
            f"{n} rows: whole grid {med['whole grid']:.2f} s · now {med['now']:.2f} s · "
            f"{med['whole grid'] / med['now']:.2f}x · max |Δp| over {len(rows)} rows {gap:.1e} · "
            + ", ".join(f"{cid} C {a:g}/{b:g}" for cid, (a, b) in chosen.items()),
            markup=False,
            highlight=False,
        )
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(
            json.dumps({"dataset": str(args.dataset), "model": data.model, "results": results}, indent=1) + "\n",
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
