"""Would TF-IDF features help the learned head? (docs/quality.md, "Learned read-out")

    TRIAGE_SPLITS=/tmp/triage-quality/splits .venv/bin/python bench/quality/head_tfidf.py

Reads the readouts and features cached by bench/quality/learn.sh. Fits the head's logistic regression
(standardised hidden-state features + option log-probs, balanced, C by 5-fold CV) with and without the
ticket's TF-IDF (word 1-2-grams, weighted x3 or x10 against the standardised features), on the split
and with its roles swapped. No rare-option backoff here (cfpb's consumer loan is never predicted).
"""

import warnings

import numpy as np

warnings.filterwarnings("ignore")
from cached import SETS, cached_split  # noqa: E402 (after the warnings filter, on purpose)
from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: E402 (after the warnings filter, on purpose)
from sklearn.linear_model import LogisticRegression  # noqa: E402 (after the warnings filter, on purpose)
from sklearn.model_selection import StratifiedKFold  # noqa: E402 (after the warnings filter, on purpose)
from sklearn.preprocessing import StandardScaler  # noqa: E402 (after the warnings filter, on purpose)

from triage.evaluation import metrics  # noqa: E402 (after the warnings filter, on purpose)
from triage.evaluation.runner import gold  # noqa: E402 (after the warnings filter, on purpose)
from triage.evaluation.variants import readings  # noqa: E402 (after the warnings filter, on purpose)
from triage.learning.scorer import stack_features  # noqa: E402 (after the warnings filter, on purpose)


def fit_eval(xtr, ytr, xte, yte, k, w_txt=None):
    best = None
    for C in np.logspace(-4, 1, 6):
        pred = np.zeros((len(ytr), k))
        cls = sorted(set(ytr))
        for a, b in StratifiedKFold(5, shuffle=True, random_state=0).split(xtr, ytr):
            m = LogisticRegression(C=C, class_weight="balanced", max_iter=3000).fit(xtr[a], np.array(ytr)[a])
            p = m.predict_proba(xtr[b])
            for j, cc in enumerate(m.classes_):
                pred[b, cc] = p[:, j]
        yi = np.array(ytr)
        ll = -np.log(np.clip(pred[np.arange(len(yi)), yi], 1e-12, 1))
        score = np.mean([ll[yi == j].mean() for j in cls])
        if best is None or score < best[0]:
            best = (score, C)
    m = LogisticRegression(C=best[1], class_weight="balanced", max_iter=3000).fit(xtr, ytr)
    p = np.full((len(yte), k), 1e-9)
    pp = m.predict_proba(xte)
    for j, cc in enumerate(m.classes_):
        p[:, cc] = pp[:, j]
    return metrics.summarize(np.log(p / p.sum(1, keepdims=True)), yte, k)["balanced_accuracy"]


for ds in SETS:
    for label, (a, b) in (("normal", ("train", "dev")), ("swapped", ("dev", "train"))):
        pack, crit, tr, otr = cached_split(ds, a)
        _, _, dv, odv = cached_split(ds, b)
        k = len(crit.options)
        xtr = np.hstack([stack_features(otr, crit.id), readings(crit, otr, None).raw])
        xdv = np.hstack([stack_features(odv, crit.id), readings(crit, odv, None).raw])
        ytr, y = gold(tr, crit), gold(dv, crit)
        sc = StandardScaler().fit(xtr)
        htr, hdv = sc.transform(xtr), sc.transform(xdv)
        vec = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2, strip_accents="unicode").fit(
            [r.ticket.text for r in tr]
        )
        ttr = vec.transform([r.ticket.text for r in tr]).toarray()
        tdv = vec.transform([r.ticket.text for r in dv]).toarray()
        res = {}
        res["hidden"] = fit_eval(htr, ytr, hdv, y, k)
        for wt in (3.0, 10.0):
            res[f"hidden+tfidf x{wt:g}"] = fit_eval(np.hstack([htr, ttr * wt]), ytr, np.hstack([hdv, tdv * wt]), y, k)
        print(ds, label, {a: round(b, 3) for a, b in res.items()}, "vocab", ttr.shape[1])
