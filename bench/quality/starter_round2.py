#!/usr/bin/env python3
"""Round 2 of the starter read-out (issue 41): candidates fitted on the starter set, chosen on the check sets,
the mapped development set looked at once, and each language of the parallel check set against English.

    python bench/quality/starter_round2.py DUMP.npz [--head assets/heads/NAME.npz] [-o OUT.json]

DUMP.npz is ``starter_fit_dump.py``'s (the shared-cue readouts of the starter set, the three check sets and the
mapped set). Candidates, each fitted on ``assets/starter/support.jsonl`` alone:

- ``head``: the shipped starter head (``--head``, the product's own fit: ``triage learn``'s, C cross-validated on
  the starter set), applied as scoring applies it;
- ``centroid``: nearest class centroid, cosine, in the head's standardised features (the starter set's mean and
  spread), the classes' centroids from the starter rows;
- ``head+cue B``: the head's log-probs plus B times the cue's own option log-probs (renormalised), B in 0.5, 1, 2;

With a dump and a head read at each criterion's tail (``starter_fit_dump.py --read tail``, ``starter_tail_head.py``)
the same candidates are the tail head's, and ``head+tails B`` mixes in the tails' zero-shot log-probs;
``zero-shot`` is the dump's own log-probs alone.

Per criterion the candidate with the best mean balanced accuracy over the two round-2 check sets (help-desk mail,
languages) is chosen; check.jsonl is reported beside them. Balanced accuracy with 95% bootstrap intervals; the
mapped set is scored as ``starter.py`` scores it (sentiment merged to negative, a choice outside the gold options
wrong).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MERGE = {"sentiment": {"angry": "negative", "upset": "negative"}}
GOLD = {"sentiment": ["negative", "neutral", "positive"]}
CHOOSE_ON = ("helpdesk", "languages")
REPORT = ("check", "helpdesk", "languages", "mapped")
LANGS = ("en", "de", "es", "fr", "pl", "pt", "it", "nl")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dump", type=Path)
    ap.add_argument("--head", type=Path, help="the shipped head (default: the one of the dump's model in assets/heads)")
    ap.add_argument("-o", "--output", type=Path)
    args = ap.parse_args()

    from triage.domain.pack import default_pack
    from triage.learning.head_file import read_head

    d = np.load(args.dump)
    pack = default_pack()
    head = read_head(args.head)
    out: dict = {"head": args.head.name, "criteria": {}, "languages": {}}
    for crit in pack.criteria:
        cid = crit.id
        if not head.covers(cid):
            continue
        ids = [o.id for o in crit.options]
        cands = candidates(d, head, cid)
        table: dict = {}
        for name, fn in cands.items():
            table[name] = {s: score(d, s, cid, ids, fn) for s in REPORT if f"{s}_F_{cid}" in d}
        chosen = max(
            table,
            key=lambda n: np.mean([table[n][s]["balanced"] for s in CHOOSE_ON if table[n].get(s)]),
        )
        out["criteria"][cid] = {"candidates": table, "chosen": chosen}
        if f"languages_F_{cid}" in d:
            out["languages"][cid] = per_language(d, cid, ids, cands["head"])
    show(out)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(out, indent=1) + "\n")
    return 0


def rows(d, name: str, cid: str):  # noqa: ANN001, ANN201
    """(features, raw cue log-probs, gold option ids, row indices into the set) of one set for one criterion."""
    labs = json.loads(str(d[name + "_labels"]))
    have = d[name + "_have"]
    keep = [i for i, h in enumerate(have) if cid in labs[h]]
    feats = d[f"{name}_F_{cid}"][keep].astype(np.float64)
    lp = d[f"{name}_lp_{cid}"][keep].astype(np.float64)
    return feats, lp, [labs[have[i]][cid] for i in keep], [int(have[i]) for i in keep]


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(1, keepdims=True)
    return x - np.log(np.exp(x).sum(1, keepdims=True))


def candidates(d, head, cid: str) -> dict:  # noqa: ANN001
    """Each candidate as a function (features, cue log-probs) -> (n, k) scores."""
    from triage.domain.pack import default_pack

    def apply_head(f: np.ndarray, lp: np.ndarray) -> np.ndarray:
        return np.stack([head.apply(cid, f[i], lp[i]) for i in range(len(f))])

    sf, slp, sgold, _ = rows(d, "starter", cid)
    ids = [o.id for o in next(c for c in default_pack().criteria if c.id == cid).options]
    mean, sd = sf.mean(0), sf.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    z = (sf - mean) / sd
    cents = np.stack([z[[g == o for g in sgold]].mean(0) if o in sgold else np.zeros(z.shape[1]) for o in ids])
    cents /= np.linalg.norm(cents, axis=1, keepdims=True) + 1e-12

    def centroid(f: np.ndarray, lp: np.ndarray) -> np.ndarray:
        x = (f - mean) / sd
        x /= np.linalg.norm(x, axis=1, keepdims=True) + 1e-12
        return x @ cents.T

    out = {"head": apply_head, "centroid": centroid}
    mixed = "cue" if head.shared else "tails"  # the dump's log-probs: the cue's own, or the tails' zero-shot
    for b in (0.5, 1.0, 2.0):
        out[f"head+{mixed} {b:g}"] = lambda f, lp, b=b: log_softmax(apply_head(f, lp)) + b * log_softmax(lp)
    out["zero-shot"] = lambda f, lp: lp
    return out


def score(d, name: str, cid: str, ids: list[str], fn) -> dict | None:  # noqa: ANN001
    from triage.evaluation.metrics import balanced_accuracy, bootstrap_ci

    feats, lp, gold, _ = rows(d, name, cid)
    if not gold:
        return None
    chosen = [ids[int(i)] for i in fn(feats, lp).argmax(1)]
    if name == "mapped":
        names, merge = GOLD.get(cid, ids), MERGE.get(cid, {})
    else:
        names, merge = ids, {}
    pred = [names.index(merge.get(c, c)) if merge.get(c, c) in names else len(names) for c in chosen]
    y = [names.index(v) for v in gold]
    k = len(names) + (name == "mapped")
    lo, hi = bootstrap_ci(y, pred, k, draws=1000)
    top, n_top = Counter(chosen).most_common(1)[0]
    return {
        "n": len(y),
        "balanced": round(balanced_accuracy(y, pred, k), 3),
        "ci": [round(lo, 3), round(hi, 3)],
        "most_chosen": top,
        "most_share": round(n_top / len(chosen), 3),
    }


def per_language(d, cid: str, ids: list[str], fn) -> dict:  # noqa: ANN001
    """The head on the parallel language set: each language's balanced accuracy and its difference from English's
    on the same 100 tickets."""
    from triage.evaluation.metrics import balanced_accuracy

    feats, lp, gold, idx = rows(d, "languages", cid)
    lang = d["languages_lang"]
    chosen = fn(feats, lp).argmax(1)
    by: dict = {}
    for code in LANGS:
        sel = [j for j, i in enumerate(idx) if lang[i] == code]
        if not sel:
            continue
        y = [ids.index(gold[j]) for j in sel]
        by[code] = {"n": len(sel), "balanced": round(balanced_accuracy(y, [int(chosen[j]) for j in sel], len(ids)), 3)}
    if "en" in by:
        for code in by:
            by[code]["minus_en"] = round(by[code]["balanced"] - by["en"]["balanced"], 3)
    return by


def show(out: dict) -> None:
    for cid, e in out["criteria"].items():
        print(f"\n== {cid} (chosen on {' + '.join(CHOOSE_ON)}: {e['chosen']})")
        for name, sets in e["candidates"].items():
            cells = [
                f"{s} {m['balanced']:.3f} ({m['ci'][0]:.2f}-{m['ci'][1]:.2f}) {m['most_chosen']} {m['most_share']:.0%}"
                for s, m in sets.items()
                if m
            ]
            print(f"  {name:14s} " + " | ".join(cells))
        langs = out["languages"].get(cid, {})
        print("  languages (head): " + ", ".join(f"{c} {v['balanced']:.3f}" for c, v in langs.items()))
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
