"""Zero-shot by name with a prior from unlabelled tickets (docs/quality.md): no labels used.

    .venv/bin/python bench/quality/unlabelled_prior.py     # after bench/quality/learn.sh (reads its cached readouts)

The prior is the mean readout of the training rows (their labels unused), divided out of each dev row's
log-probs with strength a; also with the dev rows' own mean (transductive). Splits from
TRIAGE_SPLITS.
"""

import numpy as np
from cached import SETS, cached_split

from triage.evaluation import metrics
from triage.evaluation.runner import gold
from triage.evaluation.variants import readings

for ds in SETS:
    pack, crit, tr, otr = cached_split(ds, "train", features=False)
    _, _, dv, odv = cached_split(ds, "dev", features=False)
    lptr = readings(crit, otr, None).raw
    lpdv = readings(crit, odv, None).raw
    y = gold(dv, crit)
    k = len(crit.options)
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
