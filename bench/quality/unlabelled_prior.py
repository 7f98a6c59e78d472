"""Zero-shot by name with a prior from unlabelled tickets (docs/quality.md): no labels used.

    .venv/bin/python bench/quality/unlabelled_prior.py     # after bench/quality/learn.sh (reads its cached readouts)

The prior is the mean readout of the training rows (their labels unused), divided out of each dev row's
log-probs with strength a; also with the dev rows' own mean (transductive). Splits in /tmp/q/splits or
TRIAGE_SPLITS.
"""
import os

import numpy as np
from triage.evaluation.cache import ReadoutCache, CacheKey
from triage.evaluation.data import read_labelled
from triage.evaluation.variants import readings
from triage.evaluation.runner import gold
from triage.scoring.pack import load_pack
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
            o = c.get(key, r.ticket.sha256)
            if o: outs.append(o); keep.append(r)
        return keep, outs
    tr, otr = load(f"{SPLITS}/{ds}/train.jsonl"); dv, odv = load(f"{SPLITS}/{ds}/dev.jsonl")
    lptr = readings(crit, otr, None).raw; lpdv = readings(crit, odv, None).raw; y = gold(dv, crit); k = len(crit.options)
    base = metrics.summarize(lpdv, y, k)["balanced_accuracy"]
    out = [f"{ds}: zero-shot {base:.3f}"]
    for name, src in (("mean prob over train (unlabeled)", lptr), ("mean over dev itself", lpdv)):
        for how in ("logmean", "probmean"):
            if how == "probmean":
                pr = np.log(np.exp(src).mean(0))
            else:
                pr = src.mean(0)
            for a in (0.5, 1.0):
                adj = lpdv - a * pr
                out.append(f"  {name} {how} a={a}: {metrics.summarize(adj, y, k)['balanced_accuracy']:.3f}")
    print("\n".join(out))
