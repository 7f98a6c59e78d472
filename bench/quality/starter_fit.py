#!/usr/bin/env python3
"""Candidates for the starter read-out, chosen on the check set and reported once on the mapped set.

    python bench/quality/starter_fit.py DUMP.npz --part lr|nc|loop [--criteria queue,type] [--c 1e-3,1e-2]
        [-o OUT.json]

DUMP.npz is ``starter_fit_dump.py``'s (the shared-cue readouts of the starter set, check.jsonl and the mapped
development set, from eval's readout cache). Every candidate is fitted on ``assets/starter/support.jsonl``
only; its setting (C, rank) is read off check.jsonl; each candidate's mapped figure is printed beside its check
figure so that all candidates are listed, not only the one check picks.

- ``lr``: the starter head's logistic regression (balanced classes, L2) at each C, fitted with scikit-learn's
  lbfgs on the rows' span (the same problem ``triage.learning.logistic`` solves, quicker on a loaded machine;
  no temperature: it moves no decision), with per-feature standardisation (``std``, the product's) or centring
  and one global scale (``center``); each also with the set being scored centred on its own mean
  (``+own-mean``, needs the tickets being scored: transductive).
- ``poe``: the standardised head at the C check picks, its log-probs plus B times the zero-shot log-probs
  (normalised over the options), B chosen on check.
- ``nc``: nearest class centroid in the standardised hidden state (cosine), plain or whitened on the starter
  set's first R principal directions (``pcaR``).
- ``loop``: a team's first N labels (the mapped help-desk rows, one shuffle per seed, the rest held out) with
  the starter rows at team weight W, the team alone and the starter alone (C fixed at --c's first value).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

MERGE = {"sentiment": {"angry": "negative", "upset": "negative"}}
GOLD = {"sentiment": ["negative", "neutral", "positive"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dump", type=Path)
    ap.add_argument("--part", choices=["lr", "poe", "nc", "loop"], required=True)
    ap.add_argument("--criteria", default="queue,type,sentiment,urgency,needs_approval")
    ap.add_argument("--c", default="1e-3,1e-2,1e-1")
    ap.add_argument("--ranks", default="16,32,64,128,256")
    ap.add_argument("--labels", default="20,50,100")
    ap.add_argument("--weights", default="1,4,16")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("-o", "--output", type=Path)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    sets = Sets(np.load(args.dump))
    crits = args.criteria.split(",")
    cs = [float(c) for c in args.c.split(",")]
    if args.part == "lr":
        out = {cid: part_lr(sets, cid, cs) for cid in crits}
    elif args.part == "poe":
        out = {cid: part_poe(sets, cid, cs) for cid in crits}
    elif args.part == "nc":
        out = {cid: part_nc(sets, cid, [int(r) for r in args.ranks.split(",")]) for cid in crits}
    else:
        sizes = [int(n) for n in args.labels.split(",")]
        weights = [float(w) for w in args.weights.split(",")]
        out = part_loop(
            sets, [c for c in crits if c in ("queue", "urgency", "type")], sizes, weights, cs[0], args.seeds
        )
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(out, indent=1) + "\n")
    return 0


class Sets:
    """The dump's rows per (set, criterion): features at the history's precision, raw log-probs, gold ids."""

    def __init__(self, d) -> None:  # noqa: ANN001
        from triage.domain.pack import default_pack

        self.pack = default_pack()
        self.ids = {c.id: [o.id for o in c.options] for c in self.pack.criteria}
        self.d = d

    def get(self, name: str, cid: str):  # noqa: ANN201
        from triage.learning.learn import design

        labs = json.loads(str(self.d[name + "_labels"]))
        have = self.d[name + "_have"]
        rows = [i for i, h in enumerate(have) if cid in labs[h]]
        x = design(self.d[f"{name}_F_{cid}"][rows], self.d[f"{name}_lp_{cid}"][rows])
        return x, self.d[f"{name}_lp_{cid}"][rows].astype(np.float64), [labs[have[i]][cid] for i in rows]

    def y(self, cid: str, gold) -> np.ndarray:  # noqa: ANN001
        return np.array([self.ids[cid].index(v) for v in gold])


def check_score(sets: Sets, cid: str, scores: np.ndarray, gold) -> float:  # noqa: ANN001
    from triage.evaluation.metrics import balanced_accuracy

    return round(balanced_accuracy(list(sets.y(cid, gold)), list(scores.argmax(1)), len(sets.ids[cid])), 3)


def mapped_score(sets: Sets, cid: str, scores: np.ndarray, gold) -> dict | None:  # noqa: ANN001
    """As ``starter.py`` scores the mapped set: merged sentiment, a choice outside the gold options is wrong."""
    from triage.evaluation.metrics import balanced_accuracy, bootstrap_ci

    if not len(gold):
        return None
    ids, names, merge = sets.ids[cid], GOLD.get(cid, sets.ids[cid]), MERGE.get(cid, {})
    chosen = [ids[int(i)] for i in scores.argmax(1)]
    pred = [names.index(merge.get(c, c)) if merge.get(c, c) in names else len(names) for c in chosen]
    y = [names.index(v) for v in gold]
    lo, hi = bootstrap_ci(y, pred, len(names) + 1, draws=1000)
    top, n_top = Counter(chosen).most_common(1)[0]
    return {
        "n": len(y),
        "balanced": round(balanced_accuracy(y, pred, len(names) + 1), 3),
        "ci": [round(lo, 3), round(hi, 3)],
        "most_chosen": top,
        "most_share": round(n_top / len(chosen), 3),
    }


class Prep:
    """Centre on the training rows' mean; scale per feature (``std``) or by one number (``center``)."""

    def __init__(self, how: str, x: np.ndarray) -> None:
        self.mean = x.mean(0)
        s = x.std(0)
        self.scale = np.where(s > 0, s, 1.0) if how == "std" else np.full(x.shape[1], s.mean() or 1.0)

    def __call__(self, x: np.ndarray, own_mean: bool = False) -> np.ndarray:
        return (x - (x.mean(0) if own_mean else self.mean)) / self.scale


def balanced_sample_weight(y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """``triage.learning.logistic``'s row weights: classes balanced over the weighted rows."""
    w = np.ones(len(y)) if w is None else np.asarray(w, dtype=np.float64)
    classes = np.unique(y)
    per = np.array([w[y == k].sum() for k in classes])
    return w * (w.sum() / (len(classes) * per))[np.searchsorted(classes, y)]


class Linear:
    """The balanced L2 logistic regression, fitted on the span of the prepared training rows."""

    def __init__(self, how: str, x: np.ndarray, y: np.ndarray, k: int, w: np.ndarray | None = None) -> None:
        self.prep, self.k, self.y = Prep(how, x), k, y
        xs = self.prep(x)
        _, s, vt = np.linalg.svd(xs, full_matrices=False)
        self.vt = vt[s > s[0] * 1e-10]
        self.z = xs @ self.vt.T
        self.sw = balanced_sample_weight(y, w)

    def fit(self, c: float):  # noqa: ANN201
        from sklearn.linear_model import LogisticRegression

        m = LogisticRegression(C=c, max_iter=2000, tol=1e-6)
        return m.fit(self.z, self.y, sample_weight=self.sw)

    def scores(self, m, x: np.ndarray, own_mean: bool = False) -> np.ndarray:  # noqa: ANN001
        out = np.full((len(x), self.k), -30.0)
        out[:, m.classes_] = m.predict_log_proba(self.prep(x, own_mean) @ self.vt.T)
        return out


def part_lr(sets: Sets, cid: str, cs: list[float]) -> dict:
    (xs, _, gs), (xk, lk, gk), (xm, lm, gm) = (sets.get(n, cid) for n in ("starter", "check", "mapped"))
    ys, k = sets.y(cid, gs), len(sets.ids[cid])
    out = {"zero-shot": {"check": check_score(sets, cid, lk, gk), "mapped": mapped_score(sets, cid, lm, gm)}}
    show(cid, "zero-shot", out["zero-shot"])
    t0 = time.perf_counter()
    for how in ("std", "center"):
        lin = Linear(how, xs, ys, k)
        for c in cs:
            m = lin.fit(c)
            for own in (False, True):
                name = f"{how}{'+own-mean' if own else ''} C={c:g}"
                out[name] = {
                    "check": check_score(sets, cid, lin.scores(m, xk, own), gk),
                    "mapped": mapped_score(sets, cid, lin.scores(m, xm, own), gm) if len(gm) else None,
                }
                show(cid, name, out[name], time.perf_counter() - t0)
    return out


def part_poe(sets: Sets, cid: str, cs: list[float], betas: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0)) -> dict:
    (xs, _, gs), (xk, lk, gk), (xm, lm, gm) = (sets.get(n, cid) for n in ("starter", "check", "mapped"))
    lin = Linear("std", xs, sets.y(cid, gs), len(sets.ids[cid]))
    fits = {c: lin.fit(c) for c in cs}
    c = max(cs, key=lambda c: check_score(sets, cid, lin.scores(fits[c], xk), gk))
    hk = lin.scores(fits[c], xk)
    hm = lin.scores(fits[c], xm) if len(gm) else None

    def norm(lp: np.ndarray) -> np.ndarray:
        return lp - np.logaddexp.reduce(lp, axis=1, keepdims=True)

    out = {}
    for b in betas:
        name = f"head C={c:g} + {b:g} x zero-shot"
        out[name] = {
            "check": check_score(sets, cid, hk + b * norm(lk), gk),
            "mapped": mapped_score(sets, cid, hm + b * norm(lm), gm) if hm is not None else None,
        }
        show(cid, name, out[name])
    return out


def part_nc(sets: Sets, cid: str, ranks: list[int]) -> dict:
    (xs, _, gs), (xk, _, gk), (xm, _, gm) = (sets.get(n, cid) for n in ("starter", "check", "mapped"))
    ys, k = sets.y(cid, gs), len(sets.ids[cid])
    prep = Prep("std", xs)
    zs = prep(xs)
    _, s, vt = np.linalg.svd(zs, full_matrices=False)
    out = {}
    for r in [0, *ranks]:
        proj = (lambda z: z) if r == 0 else (lambda z, r=r: z @ (vt[:r].T / s[:r]))
        cen = np.stack([proj(zs)[ys == j].mean(0) for j in range(k)])
        cen /= np.linalg.norm(cen, axis=1, keepdims=True)

        def scores(x: np.ndarray, proj=proj, cen=cen) -> np.ndarray:  # noqa: ANN001
            z = proj(prep(x))
            return (z / np.linalg.norm(z, axis=1, keepdims=True)) @ cen.T

        name = "std cosine" if r == 0 else f"pca{r} cosine"
        out[name] = {
            "check": check_score(sets, cid, scores(xk), gk),
            "mapped": mapped_score(sets, cid, scores(xm), gm) if len(gm) else None,
        }
        show(cid, f"centroid {name}", out[name])
    return out


def part_loop(sets: Sets, crits: list[str], sizes: list[int], weights: list[float], c: float, seeds: int) -> dict:
    from triage.evaluation.metrics import balanced_accuracy

    points = []
    for cid in crits:
        (xs, _, gs), (xm, lm, gm) = sets.get("starter", cid), sets.get("mapped", cid)
        ys, ym, k = sets.y(cid, gs), sets.y(cid, gm), len(sets.ids[cid])
        lin = Linear("std", xs, ys, k)
        starter_m = lin.fit(c)
        for seed in range(seeds):
            order = np.random.default_rng(seed).permutation(len(ym))
            for n in sizes:
                team, test = order[:n], order[n:]

                def ba(scores: np.ndarray, test=test, ym=ym, k=k) -> float:
                    return round(balanced_accuracy(list(ym[test]), list(scores.argmax(1)), k), 3)

                point = {"criterion": cid, "seed": seed, "team_labels": n, "test": len(test)}
                point["zero-shot"] = ba(lm[test])
                point["starter alone"] = ba(lin.scores(starter_m, xm[test]))
                if len(np.unique(ym[team])) >= 2:
                    alone = Linear("std", xm[team], ym[team], k)
                    point["team alone"] = ba(alone.scores(alone.fit(c), xm[test]))
                for w in weights:
                    x = np.vstack([xm[team], xs])
                    y = np.concatenate([ym[team], ys])
                    both = Linear("std", x, y, k, np.concatenate([np.full(n, w), np.ones(len(ys))]))
                    point[f"team x{w:g} + starter"] = ba(both.scores(both.fit(c), xm[test]))
                points.append(point)
                print(json.dumps(point), flush=True)
    return {"c": c, "points": points}


def show(cid: str, name: str, e: dict, t: float | None = None) -> None:
    m = e["mapped"]
    cell = (
        ""
        if m is None
        else f"mapped {m['balanced']:.3f} ({m['ci'][0]:.2f}-{m['ci'][1]:.2f}) {m['most_chosen']} {m['most_share']:.0%}"
    )
    print(f"{cid:15s} {name:28s} check {e['check']:.3f}  {cell}" + ("" if t is None else f"  [{t:.0f} s]"), flush=True)


if __name__ == "__main__":
    sys.exit(main())
