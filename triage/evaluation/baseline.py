"""The classical baseline: TF-IDF features and logistic regression with balanced class weights.

Trained on the same training labels the calibration sees, it is the bar the
model's calibrated readout has to clear. scikit-learn is an optional dependency
(the ``eval`` extra) and is imported only when a baseline is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from triage.errors import TriageError

SEED = 0


def _missing(flag: str) -> TriageError:
    return TriageError(
        "the TF-IDF baseline needs scikit-learn, which is not installed",
        hint=f"install the eval extra: pip install 'triage[eval]' (or pip install scikit-learn), or leave out {flag}",
    )


def _sklearn(flag: str = "--train") -> tuple[type, type]:
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        raise _missing(flag) from None
    return TfidfVectorizer, LogisticRegression


def need_sklearn(flag: str) -> None:
    """Raise now, before any scoring, when the baseline will be needed and scikit-learn is missing."""
    import importlib.util

    if importlib.util.find_spec("sklearn") is None:
        raise _missing(flag)


def fit_predict(train_texts: Sequence[str], train_y: Sequence[int], test_texts: Sequence[str], k: int) -> np.ndarray:
    """Fit on the training texts and return (n_test, k) log-probabilities for the test texts.

    Word 1-2-grams with sublinear tf; ``class_weight="balanced"`` so that a
    majority class does not win by default. Options absent from the training
    labels get probability 0 (log-prob -inf is clipped to -50).

    Raises:
        TriageError: scikit-learn is missing, or the training labels hold one class only.
    """
    tfidf_cls, lr_cls = _sklearn()
    classes = sorted(set(int(t) for t in train_y))
    if len(classes) < 2:
        raise TriageError("the baseline needs at least two different labels in the training rows")
    vec = tfidf_cls(sublinear_tf=True, ngram_range=(1, 2), min_df=1, strip_accents="unicode")
    x_train = vec.fit_transform(list(train_texts))
    model = lr_cls(class_weight="balanced", max_iter=2000, random_state=SEED)
    model.fit(x_train, list(train_y))
    proba = model.predict_proba(vec.transform(list(test_texts)))
    out = np.zeros((len(test_texts), k))
    for j, c in enumerate(model.classes_):
        out[:, int(c)] = proba[:, j]
    return np.log(np.clip(out, np.exp(-50), 1.0))
