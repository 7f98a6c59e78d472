#!/usr/bin/env python3
"""From the starter to the team's own decisions: a team's first labels replayed on the mapped development set.

    python bench/quality/starter_loop.py MAPPED.jsonl [--model NAME] [--read shared:answer] [--labels 20,50,100]
        [--weights 1,4] [--seeds 3] [-o bench/quality/results/starter-loop-MODEL.json]

For each seed the mapped set's help-desk rows (they carry queue, urgency and type in the pack's options) are
shuffled; the first N are the team's labels and the rest are held out. Per criterion and N it fits, with
``triage learn``'s fit: the team's labels alone; the starter set alone (the starter head); and the two together
with the team's rows weighing W times a starter row (``triage.learning.starter.combine``), then reports
balanced accuracy on the held-out rows, and zero-shot's beside them. Every ticket must be in eval's readout cache
at that read position (``bench/quality/starter.py`` puts them there); nothing is scored here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mapped", type=Path)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--read", default="shared:answer")
    ap.add_argument("--labels", default="20,50,100")
    ap.add_argument("--weights", default="1,4")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("-o", "--output", type=Path)
    args = ap.parse_args()

    from triage.domain.pack import default_pack
    from triage.domain.ticket import make_ticket
    from triage.evaluation.metrics import balanced_accuracy
    from triage.evaluation.variants import readings
    from triage.learning import learn as learn_mod
    from triage.learning.cache import ReadoutCache
    from triage.learning.scorer import Scorer, fit_inputs, stack_features
    from triage.learning.starter import combine, starter_rows
    from triage.scoring.lazy import LazyEngine
    from triage.scoring.loader import load_engine

    pack = default_pack()
    rows = []
    for line in args.mapped.read_text().splitlines():
        obj = json.loads(line)
        if "queue" in obj["labels"]:  # the help-desk rows: queue, urgency and type in the pack's options
            rows.append((make_ticket(obj["text"], obj["id"]), obj["labels"]))
    starter = starter_rows(pack)
    engine = load_engine(args.model, lazy=True)
    assert isinstance(engine, LazyEngine)
    with engine, ReadoutCache() as cache:
        scorer = Scorer(engine, pack, cache, "label", args.read)
        scorer.features = True
        missing = [t.id for t, _ in rows if scorer.cached(t.sha256) is None]
        missing += [r.id for r in starter if scorer.cached(r.ticket.sha256) is None]
        if missing:
            print(
                f"{len(missing)} ticket(s) are not in the cache at {args.read}: run starter.py first", file=sys.stderr
            )
            return 2
        team_out = [scorer.cached(t.sha256) for t, _ in rows]
        start_out = [scorer.cached(r.ticket.sha256) for r in starter]
        keys = learn_mod.engine_keys(engine)
    crits = ["queue", "urgency", "type"]

    def fit(labels, outcomes, weights=None):  # noqa: ANN001, ANN202
        feats, lps, gold = fit_inputs(pack, labels, outcomes)
        w = None
        if weights is not None:
            w = {cid: [wt for lab, wt in zip(labels, weights, strict=True) if cid in lab] for cid in gold}
        head, _ = learn_mod.fit_head(
            pack, feats, lps, gold, **keys, min_per_option=learn_mod.MIN_PER_OPTION, rare="backoff", weights=w
        )
        return head

    def score(head, idx, cid):  # noqa: ANN001, ANN202
        crit = pack.criterion(cid) if hasattr(pack, "criterion") else next(c for c in pack.criteria if c.id == cid)
        ids = [o.id for o in crit.options]
        outs = [team_out[i] for i in idx]
        raw = readings(crit, outs, None).raw
        y = [ids.index(rows[i][1][cid]) for i in idx]
        if head is None or not head.covers(cid):
            pred = [int(np.argmax(r)) for r in raw]
        else:
            feats = stack_features(outs, cid)
            pred = [int(np.argmax(head.apply(cid, feats[j], raw[j]))) for j in range(len(idx))]
        return balanced_accuracy(y, pred, len(ids))

    starter_head = fit([r.labels for r in starter], start_out)
    sizes = [int(n) for n in args.labels.split(",")]
    weights = [float(w) for w in args.weights.split(",")]
    results: dict = {"model": engine.name, "read": args.read, "rows": len(rows), "seeds": args.seeds, "points": []}
    for seed in range(args.seeds):
        order = np.random.default_rng(seed).permutation(len(rows))
        for n in sizes:
            team_idx, test_idx = list(order[:n]), list(order[n:])
            labels = [{c: rows[i][1][c] for c in crits} for i in team_idx]
            outs = [team_out[i] for i in team_idx]
            point = {"seed": seed, "team_labels": n, "test": len(test_idx), "criteria": {}}
            heads = {"team alone": fit(labels, outs), "starter alone": starter_head}
            for w in weights:
                both = combine(labels, outs, starter, start_out, team_weight=w, enough=10**9)
                heads[f"team x{w:g} + starter"] = fit(both.labels, both.outcomes, both.weights)
            for cid in crits:
                point["criteria"][cid] = {"zero-shot": round(score(None, test_idx, cid), 3)} | {
                    name: round(score(h, test_idx, cid), 3) for name, h in heads.items()
                }
            results["points"].append(point)
            print(json.dumps(point), flush=True)
    summary = {}
    for n in sizes:
        pts = [p for p in results["points"] if p["team_labels"] == n]
        summary[n] = {
            cid: {
                name: round(float(np.mean([p["criteria"][cid][name] for p in pts])), 3)
                for name in pts[0]["criteria"][cid]
            }
            for cid in crits
        }
    results["mean_over_seeds"] = summary
    print(json.dumps(summary, indent=1))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
