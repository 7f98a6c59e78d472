"""triage.learning.logistic: the numpy fit behind every head is scikit-learn's fit, to its tolerance,
on its folds; and it needs no scikit-learn."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

from triage.learning.logistic import Standardizer, balanced_weights, fit_logistic, stratified_folds


def _problem(k: int, n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = np.argmax(x @ rng.normal(size=(k, d)).T + 3 * rng.gumbel(size=(n, k)), axis=1)
    y[:k] = np.arange(k)  # every class present
    return x, y


def _proba(x: np.ndarray, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    z = x @ coef.T + intercept
    if z.shape[1] == 1:
        z = np.hstack([np.zeros_like(z), z])
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize(("n", "d"), [(40, 30), (80, 80), (200, 20)])
def test_the_fit_is_scikit_learns_to_its_tolerance(k: int, n: int, d: int) -> None:
    sklearn_lm = pytest.importorskip("sklearn.linear_model")
    x, y = _problem(k, n, d, seed=k * 1000 + n)
    for c in np.logspace(-4, 1, 6):  # learn's grid, strong to weak: the weak end is separable data
        classes, coef, intercept = fit_logistic(x, y, c)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = sklearn_lm.LogisticRegression(C=c, class_weight="balanced", max_iter=5000, tol=1e-6).fit(x, y)
        assert list(classes) == list(ref.classes_)
        assert coef.shape == ref.coef_.shape  # one row for two classes, as scikit-learn
        assert np.max(np.abs(_proba(x, coef, intercept) - ref.predict_proba(x))) < 1e-4


def test_the_folds_are_stratified_kfolds() -> None:
    model_selection = pytest.importorskip("sklearn.model_selection")
    rng = np.random.default_rng(7)
    for k in (2, 3, 6):
        y = rng.integers(0, k, size=97)
        y[: 5 * k] = np.repeat(np.arange(k), 5)[rng.permutation(5 * k)]
        ref = model_selection.StratifiedKFold(5, shuffle=True, random_state=0).split(np.zeros(len(y)), y)
        got = stratified_folds(y, 5, 0)
        assert [(a.tolist(), b.tolist()) for a, b in ref] == [(a.tolist(), b.tolist()) for a, b in got]
    with pytest.raises(ValueError, match="at least 5 rows of every class"):
        stratified_folds([0, 0, 0, 0, 0, 1, 1], 5)


def test_standardizer_and_weights() -> None:
    x = np.array([[1.0, 5.0], [3.0, 5.0], [5.0, 5.0]])
    s = Standardizer.fit(x)
    assert np.allclose(s.transform(x)[:, 0], [-1.2247449, 0.0, 1.2247449]) and np.all(s.transform(x)[:, 1] == 0)
    w = balanced_weights(np.array([0, 0, 0, 1]), np.array([0, 1]))
    assert np.allclose(w, [4 / 6, 4 / 6, 4 / 6, 2.0]) and np.isclose(w.sum(), 4)  # each class weighs n / K


def test_fitting_a_head_imports_no_scikit_learn() -> None:
    code = (
        "import sys, numpy as np\n"
        "from triage.learning.learn import fit_criterion\n"
        "from triage.domain.pack import default_pack\n"
        "c = default_pack().criteria[0]\n"
        "k = len(c.options)\n"
        "rng = np.random.default_rng(0)\n"
        "y = np.repeat(np.arange(k), 10)\n"
        "f = rng.normal(size=(len(y), 50)) + y[:, None]\n"
        "lp = np.log(np.full((len(y), k), 1 / k))\n"
        "head, out = fit_criterion(c, f, lp, y, force=True)\n"
        "assert head is not None and out.cv['folds'] == 5, out\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy')))\n"
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "[]"
