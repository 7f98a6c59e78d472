"""The learned read-out with the split's roles swapped: fit on the dev rows, measure on the training rows.

    TRIAGE_SPLITS=/tmp/triage-quality/splits .venv/bin/python bench/quality/swap_split.py

Reads the readouts and features cached by bench/quality/learn.sh (scores nothing). Same settings as eval's
learned variant (rare options backed off), calibration (rare options frozen) and the TF-IDF baseline.
"""

import numpy as np
from cached import SETS, cached_split

from triage.evaluation import metrics
from triage.evaluation.baseline import fit_predict
from triage.evaluation.calibrating import fit_criterion as fit_cal
from triage.evaluation.runner import gold
from triage.evaluation.variants import readings
from triage.learning.learn import fit_criterion
from triage.learning.scorer import stack_features
from triage.scoring.calibrate import apply_vector_scaling

for ds in SETS:
    # swapped: train on the dev rows, evaluate on the training rows
    pack, crit, tr, otr = cached_split(ds, "dev")
    _, _, dv, odv = cached_split(ds, "train")
    xtr, xdv = stack_features(otr, crit.id), stack_features(odv, crit.id)
    lptr = readings(crit, otr, None).raw
    lpdv = readings(crit, odv, None).raw
    ytr, y = gold(tr, crit), gold(dv, crit)
    k = len(crit.options)
    head, _ = fit_criterion(crit, xtr, lptr, ytr, rare="backoff")
    m = metrics.summarize(np.stack([head.apply(f, lp_row) for f, lp_row in zip(xdv, lpdv, strict=True)]), y, k)
    o = fit_cal(crit, lptr, ytr, [r.id for r in tr], rare="freeze", holdout=0)
    cal = metrics.summarize(
        apply_vector_scaling(lpdv, o.temperature, np.array([o.bias[i.id] for i in crit.options])), y, k
    )
    tf = metrics.summarize(fit_predict([r.ticket.text for r in tr], ytr, [r.ticket.text for r in dv], k), y, k)
    zs = metrics.summarize(lpdv, y, k)
    print(
        f"{ds} (train {len(ytr)} dev rows, test {len(y)} train rows): learned {m['balanced_accuracy']:.3f} "
        f"(ECE {m['ece']:.3f}, floor {m['ece_floor']:.3f}) · calibrated {cal['balanced_accuracy']:.3f} · "
        f"TF-IDF {tf['balanced_accuracy']:.3f} · zero-shot {zs['balanced_accuracy']:.3f}"
    )
