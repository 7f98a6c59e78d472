"""The learned read-out with the split's roles swapped: fit on the dev rows, measure on the training rows.

    TRIAGE_SPLITS=/tmp/triage-quality/splits .venv/bin/python bench/quality/swap_split.py

Reads the readouts and features cached by bench/quality/learn.sh (scores nothing). Same settings as eval's
learned variant (rare options backed off), calibration (rare options frozen) and the TF-IDF baseline.
"""
import os

import numpy as np
from triage.evaluation.cache import ReadoutCache, CacheKey
from triage.evaluation.data import read_labelled
from triage.evaluation.variants import readings
from triage.evaluation.runner import gold
from triage.scoring.pack import load_pack
from triage.scoring.learn import fit_criterion
from triage.scoring.calibrate import fit_criterion as fit_cal, apply_vector_scaling
from triage.evaluation.baseline import fit_predict
from triage.evaluation import metrics
SPLITS = os.environ.get("TRIAGE_SPLITS", "/tmp/triage-quality/splits")
HOW = os.environ.get("TRIAGE_EVAL_HOW", "none@fanout")  # the cache key's orderings@mode: what eval scores the label readout with
c = ReadoutCache()
for ds in ("airline-sentiment", "issue-kind", "cfpb-product"):
    pack = load_pack(f"../shared/datasets/{ds}/criteria.toml"); crit = pack.criteria[0]
    row = c._db.execute("select model, prompt from outcome where pack=? and prompt like '%chat/label' and n_ctx=1024 limit 1", (pack.hash,)).fetchone()
    key = CacheKey(row[0], pack.hash, row[1], 1024, HOW)
    def load(path):
        rows = read_labelled(path, pack).rows[:150]; outs=[]; keep=[]
        for r in rows:
            o = c.get(key, r.ticket.sha256); f = c.get_features(key, r.ticket.sha256, "logits-image/1", [crit.id])
            if o and f: o.features = f; outs.append(o); keep.append(r)
        return keep, outs
    # swapped: train on the dev rows, evaluate on the training rows
    tr, otr = load(f"{SPLITS}/{ds}/dev.jsonl"); dv, odv = load(f"{SPLITS}/{ds}/train.jsonl")
    xtr = np.stack([o.features[crit.id] for o in otr]); xdv = np.stack([o.features[crit.id] for o in odv])
    lptr = readings(crit, otr, None).raw; lpdv = readings(crit, odv, None).raw; ytr, y = gold(tr, crit), gold(dv, crit); k = len(crit.options)
    head, _ = fit_criterion(crit, xtr, lptr, ytr, rare="backoff")
    m = metrics.summarize(np.stack([head.apply(f, l) for f, l in zip(xdv, lpdv)]), y, k)
    o = fit_cal(crit, lptr, ytr, [r.id for r in tr], rare="freeze", holdout=0)
    cal = metrics.summarize(apply_vector_scaling(lpdv, o.temperature, np.array([o.bias[i.id] for i in crit.options])), y, k)
    tf = metrics.summarize(fit_predict([r.ticket.text for r in tr], ytr, [r.ticket.text for r in dv], k), y, k)
    zs = metrics.summarize(lpdv, y, k)
    print(f"{ds} (train {len(ytr)} dev rows, test {len(y)} train rows): learned {m['balanced_accuracy']:.3f} (ECE {m['ece']:.3f}, floor {m['ece_floor']:.3f}) · calibrated {cal['balanced_accuracy']:.3f} · TF-IDF {tf['balanced_accuracy']:.3f} · zero-shot {zs['balanced_accuracy']:.3f}")
