"""The ticket budget's cost, paired and resampled (docs/quality.md, "The ticket budget", "Resampled").

`bench/quality/budget.py run` left in eval's readout cache, for every set and budget, the readouts (the label
readout's option log-probs and the answer-position features a learned head reads) of the first 60 dev and 60
training rows of each set's split. This script reads them back (it scores nothing: a row missing from the cache
stops it) and, per set, pools those 120 rows, then draws ``--splits`` random 50/50 splits of them, stratified by
the rows' labels (every criterion's, jointly), with a fixed seed. For each split and each budget B it fits the
learned head on one half exactly as `triage eval --train` does (:func:`triage.learning.learn.fit_criterion` with
eval's options: ``rare="backoff"``, ``min_per_option`` 5, the model's hidden width, C by 5-fold CV; a head that
cross-validates worse than zero-shot is refused, and the product then decides by the zero-shot readout, as
`triage learn`'s verdict does), once on the rows as read at B and once as read with no budget, applies each to
the other half as read at the same budget, and records the paired difference in balanced accuracy (B − none):
the same rows, the same split, only the text the model read differs. The same for the zero-shot readout (no fit).

    TRIAGE_HOME=... TRIAGE_DATASETS=... TRIAGE_SPLITS=/tmp/triage-quality/splits \\
        python bench/quality/budget_resample.py [SET ...] --budgets 512,384,256,128 --splits 200

writes bench/quality/results/budget/resample.json (every split's Δ and a summary) and prints the markdown table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # before numpy: small SVDs, 2 shared cores
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from budget import DATA, LIMITS, OUT, SPLITS, budget_value  # noqa: E402  (bench/quality/budget.py)

SETS = ("issue-kind", "cfpb-product", "helpdesk")
SEED = 20261202
BAR = 0.01


def load_rows(d: str, n: int) -> tuple[object, list]:
    """The pack and the pooled rows: the first ``n`` dev rows, then the first ``n`` training rows (eval's rows)."""
    from triage.domain.pack import load_pack
    from triage.learning.labelled import read_labelled

    pack = load_pack(DATA / d / "criteria.toml")
    dev = read_labelled(str(SPLITS / d / "dev.jsonl"), pack).rows[:n]
    train = read_labelled(str(SPLITS / d / "train.jsonl"), pack).rows[:n]
    return pack, list(dev) + list(train)


def cached_inputs(d: str, budgets: list[str], model: str, n: int) -> tuple[object, list, dict, int, dict]:
    """Per budget and criterion, the pooled rows' (features, raw log-probs), from the cache only.

    Returns (pack, rows, {budget: {criterion: (features, logprobs)}}, the model's hidden width, {budget: rows whose
    read text differs from no budget's}).
    """
    import triage.scoring.prompt as prompt
    from triage.evaluation.variants import readings
    from triage.learning.cache import ReadoutCache
    from triage.learning.scorer import Scorer, stack_features
    from triage.scoring.loader import load_engine

    pack, rows = load_rows(d, n)
    out: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    keys: dict[str, list[str]] = {}
    keep = prompt.TICKET_TOKENS
    with load_engine(model, n_ctx=1024, threads=1, lazy=True) as engine, ReadoutCache() as cache:
        scorer = Scorer(engine, pack, cache, "label")
        scorer.features = True
        try:
            for b in budgets:
                prompt.TICKET_TOKENS = budget_value(b)
                keys[b] = [scorer.text_key(r.ticket) for r in rows]
                outs = []
                for r, k in zip(rows, keys[b], strict=True):
                    o = scorer.cached(k)
                    if o is None:
                        raise SystemExit(f"{d} budget {b}: row {r.id} is not in the cache (with features); not scoring")
                    outs.append(o)
                out[b] = {c.id: (stack_features(outs, c.id), readings(c, outs, None).raw) for c in pack.criteria}
        finally:
            prompt.TICKET_TOKENS = keep
        if getattr(engine, "loaded", False) or scorer.scored:
            raise SystemExit("the model was loaded or a row scored: this script must read the cache only")
        width = engine.native.n_embd
    differ = {b: sum(k != k0 for k, k0 in zip(keys[b], keys["none"], strict=True)) for b in budgets}
    return pack, rows, out, width, differ


def stratified_halves(strata: list[tuple], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random 50/50 split stratified by ``strata``: the rows grouped by stratum (strata and rows within each in
    random order), then dealt alternately to the two halves from a random start; every stratum splits to within one
    row, and the halves are equal to within one row. Each half's indices are in pool order."""
    groups: dict[tuple, list[int]] = {}
    for i, s in enumerate(strata):
        groups.setdefault(s, []).append(i)
    order = []
    for g in rng.permutation(len(groups)):
        members = list(groups.values())[g]
        order += [members[j] for j in rng.permutation(len(members))]
    start = int(rng.integers(2))
    a = np.sort(np.array([i for j, i in enumerate(order) if (j + start) % 2 == 0]))
    b = np.sort(np.array([i for j, i in enumerate(order) if (j + start) % 2 == 1]))
    return a, b


class Fits:
    """Eval's learned fit per criterion, memoised on its exact inputs (a budget that cuts none of a half's rows
    gives the same inputs as no budget, so the same head: the fit is deterministic)."""

    def __init__(self, width: int) -> None:
        self.kw = {"min_per_option": 5, "rare": "backoff", "hidden_width": width}  # triage eval --train's learn_kw
        self.memo: dict[str, tuple] = {}
        self.fitted = 0

    def fit(self, crit: object, x: np.ndarray, lp: np.ndarray, y: np.ndarray) -> tuple:
        from triage.learning.learn import fit_criterion

        h = hashlib.sha1()
        for a in (x, lp, y):
            h.update(np.ascontiguousarray(a).tobytes())
        key = f"{crit.id}:{h.hexdigest()}"
        if key not in self.memo:
            head, outcome = fit_criterion(crit, x, lp, y, **self.kw)
            self.memo[key] = (head, outcome.c, outcome.refused)
            self.fitted += 1
        return self.memo[key]


def decide(head: object | None, x: np.ndarray, lp: np.ndarray) -> np.ndarray:
    """The product's choices: the head's where it was fitted, else the zero-shot readout's."""
    if head is None:
        return lp.argmax(axis=1)
    return np.array([int(np.argmax(head.apply(f, p))) for f, p in zip(x, lp, strict=True)])


def summary(deltas: list[float]) -> dict[str, float]:
    v = np.asarray(deltas)
    return {
        "mean": float(v.mean()),
        "median": float(np.median(v)),
        "p2.5": float(np.percentile(v, 2.5)),
        "p97.5": float(np.percentile(v, 97.5)),
        "share_below_-0.01": float(np.mean(v < -BAR - 1e-12)),
        "share_above_+0.01": float(np.mean(v > BAR + 1e-12)),
        "sd": float(v.std(ddof=1)),
        "se_of_mean": float(v.std(ddof=1) / np.sqrt(len(v))),  # over the splits only: the 120 rows are fixed
    }


def run_set(d: str, budgets: list[str], model: str, n: int, splits: int, seed: int) -> dict:
    from triage.evaluation.metrics import balanced_accuracy
    from triage.evaluation.runner import gold

    t0 = time.perf_counter()
    pack, rows, inputs, width, differ = cached_inputs(d, ["none", *budgets], model, n)
    ys = {c.id: np.array(gold(rows, c)) for c in pack.criteria}
    strata = [tuple(int(ys[c.id][i]) for c in pack.criteria) for i in range(len(rows))]
    rng = np.random.default_rng([seed, SETS.index(d) if d in SETS else len(d)])
    fits = Fits(width)
    per: dict[str, dict[str, dict[str, list]]] = {
        b: {
            c.id: {"learned": [], "zero_shot": [], "learned_none": [], "learned_b": [], "refused": [], "c": []}
            for c in pack.criteria
        }
        for b in budgets
    }
    for s in range(splits):
        fit_on, test_on = stratified_halves(strata, rng)
        for c in pack.criteria:
            y, k = ys[c.id], len(c.options)
            got = {}
            for b in ["none", *budgets]:
                x, lp = inputs[b][c.id]
                head, cc, refused = fits.fit(c, x[fit_on], lp[fit_on], y[fit_on])
                learned = balanced_accuracy(y[test_on], decide(head, x[test_on], lp[test_on]), k)
                zero = balanced_accuracy(y[test_on], lp[test_on].argmax(axis=1), k)
                got[b] = (learned, zero, refused is not None, cc)
            for b in budgets:
                r = per[b][c.id]
                r["learned"].append(got[b][0] - got["none"][0])
                r["zero_shot"].append(got[b][1] - got["none"][1])
                r["learned_none"].append(got["none"][0])
                r["learned_b"].append(got[b][0])
                r["refused"].append([got["none"][2], got[b][2]])
                r["c"].append([got["none"][3], got[b][3]])
        if (s + 1) % 20 == 0:
            print(
                f"{d}: {s + 1}/{splits} splits, {fits.fitted} fits, {time.perf_counter() - t0:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    result = {"rows": len(rows), "rows_read_differently": differ, "fits": fits.fitted, "budgets": {}}
    for b in budgets:
        result["budgets"][b] = {}
        for c in pack.criteria:
            r = per[b][c.id]
            zero_b, zero_none = inputs[b][c.id][1].argmax(axis=1), inputs["none"][c.id][1].argmax(axis=1)
            k = len(c.options)
            result["budgets"][b][c.id] = {
                "zero_shot_moved": int(np.sum(zero_b != zero_none)),  # of the pooled rows, against none
                "zero_shot_pool_delta": balanced_accuracy(ys[c.id], zero_b, k)
                - balanced_accuracy(ys[c.id], zero_none, k),
                "learned": summary(r["learned"]),
                "zero_shot": summary(r["zero_shot"]),
                "learned_none_mean": float(np.mean(r["learned_none"])),
                "learned_budget_mean": float(np.mean(r["learned_b"])),
                "refused_none": int(sum(x[0] for x in r["refused"])),
                "refused_budget": int(sum(x[1] for x in r["refused"])),
                "same_c": int(sum(x[0] == x[1] for x in r["c"])),
                "deltas": {"learned": r["learned"], "zero_shot": r["zero_shot"]},
            }
    result["seconds"] = round(time.perf_counter() - t0, 1)
    return result


def table(res: dict) -> None:
    print(
        "| set | criterion | budget | rows read differently | learned Δ mean (± 2 se) | median | 2.5–97.5% | "
        "share Δ < −0.01 | zero-shot Δ mean | median | 2.5–97.5% | share Δ < −0.01 | zero-shot choices moved |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for d, got in res["sets"].items():
        for b, crits in got["budgets"].items():
            for cid, m in crits.items():
                lr, zs = m["learned"], m["zero_shot"]
                print(
                    f"| {d} | {cid} | {b} | {got['rows_read_differently'][b]} / {got['rows']} | "
                    f"{lr['mean']:+.4f} (± {2 * lr['se_of_mean']:.4f}) | {lr['median']:+.3f} | "
                    f"{lr['p2.5']:+.3f} – {lr['p97.5']:+.3f} | "
                    f"{lr['share_below_-0.01']:.0%} | {zs['mean']:+.4f} | {zs['median']:+.3f} | "
                    f"{zs['p2.5']:+.3f} – {zs['p97.5']:+.3f} | {zs['share_below_-0.01']:.0%} | "
                    f"{m['zero_shot_moved']} / {got['rows']} |"
                )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sets", nargs="*", default=list(SETS))
    p.add_argument("--budgets", default="512,384,256,128", help="against none")
    p.add_argument("--splits", type=int, default=200)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--rows", type=int, default=60, help="first rows of each part of the split (dev and train)")
    p.add_argument("--model", default=os.environ.get("TRIAGE_EVAL_MODEL", "qwen2.5-coder-0.5b"))
    p.add_argument("--json", default=str(OUT / "resample.json"))
    p.add_argument("--table", action="store_true", help="print the table of an existing --json, compute nothing")
    a = p.parse_args()
    if a.table:
        table(json.loads(Path(a.json).read_text()))
        return
    budgets = a.budgets.split(",")
    res = {
        "what": "paired Δ balanced accuracy (budget − none), learned head (eval --train's fit) and zero-shot, "
        "over random stratified 50/50 splits of each set's cached 60 dev + 60 train rows",
        "model": a.model,
        "splits": a.splits,
        "seed": a.seed,
        "rows_per_part": a.rows,
        "limits_of_budget_py": LIMITS,
        "sets": {},
    }
    for d in a.sets:
        res["sets"][d] = run_set(d, budgets, a.model, a.rows, a.splits, a.seed)
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    table(res)


if __name__ == "__main__":
    main()
