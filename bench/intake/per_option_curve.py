"""The ``learn --per-option N`` learning curve: held-out balanced accuracy against N per option.

For each development set (``../shared/datasets/NAME``: tickets.jsonl and criteria.toml) the rows are
split once by id hash as ``learn --holdout F`` splits them (the held-out rows are eval ``--split 1-F``'s
dev rows), and every row is scored once, as ``triage learn`` scores (label readout, the answer-position
features, the readout cache, n_ctx 1024 by default). Then, for each N, the training rows are sampled as
``--per-option N`` samples them (:func:`triage.intake.sample.sample_rows`: per option the N rows of
lowest id hash), a head is fitted as ``triage learn`` fits it (:func:`triage.learning.learn.fit_head`,
the same options) and measured on the same held-out rows beside zero-shot and TF-IDF fitted on the same
sample (:func:`triage.evaluation.holdout.holdout_metrics`).

One difference from the command line, on purpose: ``learn --per-option N --holdout F`` samples first and
holds out F of the sample, so each N would be measured on other (and, for small N, very few) rows. Here
the held-out rows are the same for every N, so the points of a curve can be compared.

A criterion whose head cross-validates worse than zero-shot is refused by ``learn`` (without --force);
every head is fitted with ``force`` and measured, and ``learn_refuses`` says which ones learn would not
keep (its decisions would then stay zero-shot). A sample equal to an earlier N's (every option has fewer
rows than N) is not fitted again (``same_rows_as``).

usage: python bench/intake/per_option_curve.py airline-sentiment helpdesk ... --model M --threads 1
       [--sizes 5,10,20,50,100,200,all] [--holdout 0.3] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ROOT.parent / "shared" / "datasets"
SIZES = "5,10,20,50,100,200,all"


def features_of(pack: Any, scored: Any) -> tuple[dict, dict, dict]:
    """Per criterion: features, raw log-probs and gold indices of the labelled rows (as ``triage learn``)."""
    from triage.evaluation.runner import gold
    from triage.evaluation.variants import readings
    from triage.learning.scorer import stack_features

    features, logprobs, labels = {}, {}, {}
    for crit in pack.criteria:
        have = [i for i, r in enumerate(scored.rows) if crit.id in r.labels]
        if not have:
            continue
        outs = [scored.outcomes[i] for i in have]
        features[crit.id] = stack_features(outs, crit.id)
        logprobs[crit.id] = readings(crit, outs, None).raw
        labels[crit.id] = gold([scored.rows[i] for i in have], crit)
    return features, logprobs, labels


def subset(scored: Any, ids: set[str]) -> Any:
    from triage.learning.scorer import Scored

    keep = [i for i, r in enumerate(scored.rows) if r.id in ids]
    return Scored([scored.rows[i] for i in keep], [scored.outcomes[i] for i in keep])


def one_set(name: str, engine: Any, err: Any, sizes: list[int | None], holdout: float) -> dict[str, Any]:
    from triage.domain.pack import load_pack
    from triage.evaluation.holdout import holdout_metrics
    from triage.evaluation.labelled_runs import score_sets
    from triage.intake.sample import sample_rows
    from triage.learning import learn as learn_mod
    from triage.learning.labelled import read_labelled, split_by_id

    src = DATASETS / name
    pack = load_pack(src / "criteria.toml")
    rows = read_labelled(src / "tickets.jsonl", pack, partial=True)
    held, train = split_by_id(rows, 1 - holdout)
    t0 = time.perf_counter()
    run = score_sets(
        engine, pack, [("learn", train.rows), ("holdout", held.rows)], err, "label", features=True, prior=False
    )
    scoring_s = time.perf_counter() - t0
    scored_train, scored_held = run.sets
    out: dict[str, Any] = {
        "set": name,
        "rows": len(rows.rows),
        "train_rows": len(scored_train.rows),
        "held_out_rows": len(scored_held.rows),
        "scoring_s": round(scoring_s, 1),
        "scored": run.misses,
        "cached": run.hits,
        "cut": scored_train.cut + scored_held.cut,
        "points": [],
    }
    done: dict[frozenset[str], dict[str, Any]] = {}  # a sample equal to an earlier one is not fitted again
    for n in sizes:
        sample = sample_rows(scored_train.rows, n) if n is not None else list(scored_train.rows)
        ids = frozenset(r.id for r in sample)
        label = n if n is not None else "all"
        if ids in done:
            point = {**done[ids], "per_option": label, "same_rows_as": done[ids]["per_option"]}
            out["points"].append(point)
            err.print(f"{name} per-option {label}: the rows of {point['same_rows_as']}", markup=False)
            continue
        part = subset(scored_train, ids)
        features, logprobs, labels = features_of(pack, part)
        point: dict[str, Any] = {"per_option": label, "train_n": len(part.rows)}
        t1 = time.perf_counter()
        head, outcomes = learn_mod.fit_head(
            pack,
            features,
            logprobs,
            labels,
            **learn_mod.engine_keys(engine),
            min_per_option=learn_mod.MIN_PER_OPTION,
            rare="backoff",
            force=True,  # every head is measured; `refused` says which ones learn (without --force) would not keep
        )
        point["fit_s"] = round(time.perf_counter() - t1, 2)
        results = holdout_metrics(pack, head, part, scored_held) if head.criteria else {}
        per: dict[str, Any] = {}
        for o in outcomes:
            entry = results.get(o.criterion)
            if o.refused or entry is None:
                per[o.criterion] = {"not_learned": o.refused or "not learned", "n": o.n, "counts": o.counts}
                continue
            per[o.criterion] = {
                "n": o.n,
                "counts": o.counts,
                "C": o.c,
                "cv": o.cv.get("balanced_accuracy"),
                "cv_zero_shot": o.cv.get("zero_shot_balanced_accuracy"),
                "learn_refuses": any(w.endswith("kept (--force)") for w in o.warnings),
                "warnings": o.warnings,
                "held_out_n": entry["n"],
                **{
                    v: round(entry[v]["balanced_accuracy"], 4)
                    for v in ("learned", "zero-shot", "tfidf")
                    if v in entry and "balanced_accuracy" in entry[v]
                },
            }
        point["criteria"] = per
        done[ids] = point
        out["points"].append(point)
        err.print(f"{name} per-option {point['per_option']}: {json.dumps(point)}", markup=False, highlight=False)
    return out


def table(results: list[dict[str, Any]]) -> str:
    """Markdown: per set and criterion, one column per N: training rows, and held-out balanced accuracy of the
    learned head, zero-shot and TF-IDF (fitted on the same sample)."""
    lines = []
    for res in results:
        points = res["points"]
        crits = list(points[0]["criteria"])
        lines.append(
            f"{res['set']} ({res['train_rows']} training rows, {res['held_out_rows']} held out; "
            f"{res['scored']} scored in {res['scoring_s']} s, {res['cached']} cached)"
        )
        lines.append("| criterion | | " + " | ".join(f"N={p['per_option']}" for p in points) + " |")
        lines.append("| --- | --- | " + " | ".join("---" for _ in points) + " |")
        for c in crits:
            for what, key in (("rows", None), ("learned", "learned"), ("zero-shot", "zero-shot"), ("TF-IDF", "tfidf")):
                cells = []
                for p in points:
                    e = p["criteria"].get(c, {})
                    if key is None:
                        cells.append(str(e.get("n", p["train_n"])))
                    elif key in e:
                        mark = "*" if key == "learned" and e.get("learn_refuses") else ""
                        cells.append(f"{e[key]:.3f}{mark}")
                    else:
                        cells.append("–")
                lines.append(f"| {c} | {what} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append("*: learn without --force would not keep this head (it cross-validates worse than zero-shot)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sets", nargs="+", help="development set names under ../shared/datasets")
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-ctx", type=int, default=1024)
    ap.add_argument("--sizes", default=SIZES, help=f"N per option, comma-separated; all: every row ({SIZES})")
    ap.add_argument("--holdout", type=float, default=0.3)
    ap.add_argument("--json", type=Path, help="write the results here")
    a = ap.parse_args(argv)
    from triage.evaluation.labelled_runs import load_for, report_consoles

    sizes = [None if s == "all" else int(s) for s in a.sizes.split(",")]
    out, err = report_consoles()
    engine = load_for(err, model=a.model, n_ctx=a.n_ctx, threads=a.threads, prompt_style="auto")
    before = json.loads(a.json.read_text(encoding="utf-8"))["sets"] if a.json and a.json.exists() else []
    results = []
    with engine:
        meta = {"model": engine.name, "sha256": engine.sha256, "n_ctx": engine.n_ctx, "threads": a.threads}
        for name in a.sets:
            results.append(one_set(name, engine, err, sizes, a.holdout))
            if a.json:  # after each set: a stopped run keeps what it measured (other sets' results are kept)
                mine = {r["set"] for r in results}
                kept = [r for r in before if r["set"] not in mine] + results
                a.json.write_text(json.dumps({**meta, "holdout": a.holdout, "sets": kept}, indent=1) + "\n")
    out.print(table(results), markup=False, highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
