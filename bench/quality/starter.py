#!/usr/bin/env python3
"""The starter read-out on tickets it was not fitted on: zero-shot, the starter head, and each with the
content-free prior divided out, at each read position (the tails, the shared cue).

    python bench/quality/starter.py MAPPED.jsonl [--check assets/starter/check.jsonl] [--model NAME]
        [--reads tail,shared:answer] [--threads N] [-o bench/quality/results/starter-MODEL.json]

MAPPED.jsonl is the mapped development set that ``../shared/tools/make_mapped_support_set.py`` writes from
``../shared/datasets`` (never shipped: its rows' licences forbid it). Its labels are scored as that tool says:
sentiment ``negative`` is angry or upset; type is problem or request (a choice of question or complaint counts
as wrong); queue over the four queues it holds (a choice of account counts as wrong).

Every ticket is scored through eval's readout cache exactly as the product fits and applies the starter head
(``triage.learning.starter``: the label readout in fanout with the answer-position features, the engine's
default context), so a second run scores nothing. The head is ``fit_starter_head`` on every starter row.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MERGE = {"sentiment": {"angry": "negative", "upset": "negative"}}
GOLD = {"sentiment": ["negative", "neutral", "positive"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mapped", type=Path)
    ap.add_argument("--check", type=Path, default=ROOT / "assets/starter/check.jsonl")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument(
        "--plan",
        default="shared:answer=starter,mapped,check;tail=starter,mapped,check",
        help="READ=SETS;...: which sets are scored at each read position (a head is fitted where the starter set is)",
    )
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("-o", "--output", type=Path)
    args = ap.parse_args()

    from rich.console import Console

    from triage.domain.pack import default_pack
    from triage.domain.ticket import make_ticket
    from triage.lab.prior import PRIOR_TEXT
    from triage.learning.cache import ReadoutCache
    from triage.learning.labelled import LabelledRow, read_labelled
    from triage.learning.scorer import Scorer, score_rows
    from triage.learning.starter import STARTER_SET, fit_starter_head, starter_rows
    from triage.scoring.loader import load_engine

    console = Console(stderr=True)
    pack = default_pack()
    mapped, gold = [], []
    for i, line in enumerate(args.mapped.read_text().splitlines(), 1):
        obj = json.loads(line)
        mapped.append(LabelledRow(i, make_ticket(obj["text"], obj["id"]), {}))
        gold.append(obj["labels"])
    check = read_labelled(args.check, pack).rows
    starter = starter_rows(pack)
    engine = load_engine(args.model, threads=args.threads, notice=lambda m: console.print(m))
    report: dict = {
        "model": engine.name,
        "sha256": engine.sha256,
        "n_ctx": engine.n_ctx,
        "sets": {"mapped": len(mapped), "check": len(check), "starter": len(starter), "starter_path": STARTER_SET},
        "reads": {},
    }
    with engine, ReadoutCache() as cache:
        sets = {"starter": starter, "mapped": mapped, "check": check}
        heads = {}
        for step in args.plan.split(";"):
            read, names = step.split("=")
            scorer = Scorer(engine, pack, cache, "label", read)
            scorer.features = True
            timing = {}
            parts = {}
            for name in names.split(","):
                t0, before = time.perf_counter(), scorer.scored
                parts[name] = score_rows(scorer, sets[name], _ticker(console, f"{read} {name}", len(sets[name])))
                timing[name] = {"s": round(time.perf_counter() - t0, 1), "scored": scorer.scored - before}
            prior_out, _ = scorer.outcome(make_ticket(PRIOR_TEXT, "prior"))
            if "starter" in parts:
                t0 = time.perf_counter()
                heads[read] = fit_starter_head(
                    engine, pack, parts["starter"].rows, parts["starter"].outcomes, read=read
                )
                timing["fit_s"] = round(time.perf_counter() - t0, 2)
            head, fitted = heads.get(read, (None, []))
            entry = {"timing": timing, "fit": [o.to_dict() for o in fitted]}
            if "mapped" in parts:
                golds = [gold[r.line - 1] for r in parts["mapped"].rows]
                entry["mapped"] = table(pack, head, parts["mapped"], golds, prior_out)
            if "check" in parts:
                entry["check"] = table(pack, head, parts["check"], [r.labels for r in parts["check"].rows], prior_out)
            report["reads"][step] = entry
            show(read, entry)
            if args.output:  # after every step: a long run that is stopped keeps what it measured
                args.output.parent.mkdir(parents=True, exist_ok=True)
                args.output.write_text(json.dumps(report, indent=1, default=float) + "\n")
    return 0


def _ticker(console, what, total):  # noqa: ANN001, ANN202
    state = {"n": 0, "t": time.perf_counter()}

    def tick(_hit: bool) -> None:
        state["n"] += 1
        if state["n"] == total or time.perf_counter() - state["t"] > 30:
            state["t"] = time.perf_counter()
            console.print(f"{what}: {state['n']}/{total}")

    return tick


def logprobs(head, crit, outcomes, prior_out):  # noqa: ANN001, ANN201
    """Per variant, (n, k) log-probs over ``outcomes``: zero-shot (the raw label readout), the starter head, and
    each with the content-free prior (the same read-out of the "N/A" ticket) divided out."""
    from triage.evaluation.variants import readings
    from triage.learning.scorer import stack_features

    raw = readings(crit, outcomes, None).raw
    p_raw = readings(crit, [prior_out], None).raw[0]
    out = {"zero-shot": raw, "zero-shot+prior": raw - p_raw}
    if head is not None and head.covers(crit.id):
        feats = stack_features(outcomes, crit.id)
        learned = np.stack([head.apply(crit.id, feats[i], raw[i]) for i in range(len(outcomes))])
        p_learned = head.apply(crit.id, prior_out.features[crit.id], p_raw)
        out["starter"], out["starter+prior"] = learned, learned - p_learned
    return out


def balanced(y, pred, k, draws=1000):  # noqa: ANN001, ANN201
    """Balanced accuracy over the gold classes with its 95% bootstrap interval."""
    from triage.evaluation.metrics import balanced_accuracy, bootstrap_ci

    lo, hi = bootstrap_ci(y, pred, k, draws=draws)
    return round(balanced_accuracy(y, pred, k), 3), [round(lo, 3), round(hi, 3)]


def table(pack, head, scored, gold, prior_out):  # noqa: ANN001, ANN201
    """Per criterion and variant: balanced accuracy (interval), plain accuracy, and how the choices spread."""
    out = {}
    for crit in pack.criteria:
        have = [i for i, g in enumerate(gold) if crit.id in g]
        if not have:
            continue
        ids = [o.id for o in crit.options]
        names = GOLD.get(crit.id, ids)
        merge = MERGE.get(crit.id, {})
        y = [names.index(gold[i][crit.id]) for i in have]
        entry = {"n": len(have), "gold": dict(Counter(gold[i][crit.id] for i in have))}
        for variant, lp in logprobs(head, crit, [scored.outcomes[i] for i in have], prior_out).items():
            chosen = [ids[int(np.argmax(r))] for r in lp]
            mapped = [merge.get(c, c) for c in chosen]
            pred = [names.index(m) if m in names else len(names) for m in mapped]  # "other": always wrong
            ba, ci = balanced(y, pred, len(names) + 1)
            spread = Counter(chosen)
            top, top_n = spread.most_common(1)[0]
            entry[variant] = {
                "balanced": ba,
                "ci": ci,
                "accuracy": round(float(np.mean([a == b for a, b in zip(y, pred, strict=True)])), 3),
                "most_chosen": top,
                "most_share": round(top_n / len(chosen), 3),
                "chosen": dict(spread),
            }
        out[crit.id] = entry
    return out


def show(read, entry):  # noqa: ANN001, ANN201
    print(f"\n== read {read}: {entry['timing']}")
    for part in ("mapped", "check"):
        if part not in entry:
            continue
        print(f"-- {part}")
        for cid, e in entry[part].items():
            cells = [
                f"{v} {m['balanced']:.3f} ({m['ci'][0]:.2f}-{m['ci'][1]:.2f}) "
                f"top {m['most_chosen']} {m['most_share']:.0%}"
                for v, m in e.items()
                if isinstance(m, dict) and "balanced" in m
            ]
            print(f"{cid:15s} n={e['n']:4d}  " + " | ".join(cells))
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
