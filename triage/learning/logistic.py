"""L2 logistic regression, standardisation and stratified folds, in numpy: what fitting a head needs.

A head (:mod:`triage.learning.learn`) is fitted on a few hundred rows at most per fold, in the span
of its rows (a problem with as many columns as rows). Fitting it here, with a truncated Newton
method, takes milliseconds, and ``triage learn`` and the app's re-fit import nothing but numpy.

The problem solved is the one scikit-learn's ``LogisticRegression(C, class_weight="balanced")``
solves (so heads fitted before are the same fit, to its tolerance):

    minimise  (1/S) Σᵢ sᵢ ℓᵢ(W, b) + (1 / (2 C S)) ‖W‖²,   S = Σᵢ sᵢ,

with sᵢ the balanced class weight of row i (n / (K nₖ)), ℓᵢ the log loss of the softmax over K
rows of weights for K ≥ 3 classes, and of one row (the logistic of the second class against the
first) for two; intercepts are not penalised. The objective is strictly convex in W, so the
solution is unique (the multinomial intercepts up to a common shift, which moves no probability).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Standardizer", "balanced_weights", "fit_logistic", "stratified_folds"]

TOL = 1e-9  # stop when every gradient entry of the objective above is this small
MAX_NEWTON = 100
MAX_CG = 250


@dataclass
class Standardizer:
    """Centre each column and scale it to unit variance (a column with none is left unscaled)."""

    mean_: np.ndarray
    scale_: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray) -> Standardizer:
        x = np.asarray(x, dtype=np.float64)
        mean = x.mean(axis=0)
        std = x.std(axis=0)
        return cls(mean, np.where(std > 0, std, 1.0))

    def transform(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, dtype=np.float64) - self.mean_) / self.scale_


def stratified_folds(y: Sequence[int] | np.ndarray, k: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``k`` (train, test) index pairs, each class spread over the test folds as evenly as it divides.

    The assignment is scikit-learn's ``StratifiedKFold(k, shuffle=True, random_state=seed)``'s, so that
    heads cross-validate on the folds they always did: the classes in order of first appearance; the
    rows sorted by class dealt round-robin to the folds to fix how many of each class a fold gets;
    then, class by class, that sequence of fold numbers shuffled (``numpy.random.RandomState(seed)``)
    and given to the class's rows in file order.
    """
    y = np.asarray(y)
    _, first, inverse = np.unique(y, return_index=True, return_inverse=True)
    by_appearance = np.argsort(np.argsort(first))[inverse.ravel()]  # class codes in order of first appearance
    n_classes = len(first)
    if np.min(np.bincount(by_appearance)) < k:
        raise ValueError(f"{k} folds need at least {k} rows of every class")
    dealt = np.sort(by_appearance)
    per_fold = np.array([np.bincount(dealt[i::k], minlength=n_classes) for i in range(k)])
    rng = np.random.RandomState(seed)
    fold_of = np.empty(len(y), dtype=int)
    for c in range(n_classes):
        folds = np.repeat(np.arange(k), per_fold[:, c])
        rng.shuffle(folds)
        fold_of[by_appearance == c] = folds
    every = np.arange(len(y))
    return [(every[fold_of != f], every[fold_of == f]) for f in range(k)]


def balanced_weights(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Each row's weight n / (K nₖ): every class weighs the same in the loss."""
    counts = np.array([np.sum(y == c) for c in classes], dtype=np.float64)
    per_class = len(y) / (len(classes) * counts)
    return per_class[np.searchsorted(classes, y)]


def fit_logistic(
    x: np.ndarray,
    y: np.ndarray,
    c: float,
    start: tuple[np.ndarray, np.ndarray] | None = None,
    weight: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit the balanced L2 logistic regression above on rows ``x`` and labels ``y``.

    ``start``: ``(coef, intercept)`` of a fit on the same rows with another ``c`` (a warm start: the
    optimum is the same, reached in fewer steps; cross-validation walks its grid so). ``weight``: each
    row's weight (default 1; scikit-learn's ``sample_weight``): classes are balanced over the weighted rows.

    Returns:
        ``(classes, coef, intercept)``: the sorted distinct labels; ``coef`` of shape (K, d) and
        ``intercept`` (K,) for K ≥ 3 classes, or (1, d) and (1,) for two (the second class's log-odds).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y)
    classes = np.unique(y)
    if len(classes) < 2:
        raise ValueError("logistic regression needs at least two classes")
    if weight is None:
        s = balanced_weights(y, classes)
    else:
        w = np.asarray(weight, dtype=np.float64)
        per_class = np.array([w[y == k].sum() for k in classes])
        s = w * (w.sum() / (len(classes) * per_class))[np.searchsorted(classes, y)]
    lam = 1.0 / (c * s.sum())
    s = s / s.sum()  # the loss is a weighted mean
    onehot = (y[:, None] == classes[None, :]).astype(np.float64)
    problem = _Binary(x, onehot[:, 1], s, lam) if len(classes) == 2 else _Multinomial(x, onehot, s, lam)
    theta = _newton(problem, None if start is None else np.hstack([start[0], start[1][:, None]]).ravel())
    coef, intercept = problem.unpack(theta)
    return classes, coef, intercept


class _Binary:
    """One row of weights: the logistic loss of the second class (``t`` = 1) against the first."""

    def __init__(self, x: np.ndarray, t: np.ndarray, s: np.ndarray, lam: float) -> None:
        self.x, self.t, self.s, self.lam = x, t, s, lam
        self.d = x.shape[1]
        self.size = self.d + 1

    def unpack(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return theta[: self.d][None, :], theta[self.d :]

    def evaluate(self, theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        w, b = theta[: self.d], theta[self.d]
        z = self.x @ w + b
        # log(1 + e^z) - t z, stably; its derivative is sigmoid(z) - t
        loss = float(self.s @ (np.logaddexp(0.0, z) - self.t * z) + 0.5 * self.lam * (w @ w))
        p = 0.5 * (1.0 + np.tanh(0.5 * z))
        r = self.s * (p - self.t)
        grad = np.concatenate([self.x.T @ r + self.lam * w, [r.sum()]])
        return loss, grad, self.s * p * (1.0 - p)

    def hessian_times(self, curvature: np.ndarray, v: np.ndarray) -> np.ndarray:
        u = self.x @ v[: self.d] + v[self.d]
        q = curvature * u
        return np.concatenate([self.x.T @ q + self.lam * v[: self.d], [q.sum()]])


class _Multinomial:
    """K rows of weights and the softmax over them."""

    def __init__(self, x: np.ndarray, onehot: np.ndarray, s: np.ndarray, lam: float) -> None:
        self.x, self.y, self.s, self.lam = x, onehot, s, lam
        self.k, self.d = onehot.shape[1], x.shape[1]
        self.size = self.k * (self.d + 1)

    def unpack(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        wb = theta.reshape(self.k, self.d + 1)
        return wb[:, : self.d].copy(), wb[:, self.d].copy()

    def evaluate(self, theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        w, b = self.unpack(theta)
        z = self.x @ w.T + b
        z = z - z.max(axis=1, keepdims=True)
        log_norm = np.log(np.exp(z).sum(axis=1))
        loss = float(self.s @ (log_norm - (z * self.y).sum(axis=1)) + 0.5 * self.lam * np.sum(w * w))
        p = np.exp(z - log_norm[:, None])
        r = self.s[:, None] * (p - self.y)
        gw = r.T @ self.x + self.lam * w
        return loss, np.hstack([gw, r.sum(axis=0)[:, None]]).ravel(), p

    def hessian_times(self, p: np.ndarray, v: np.ndarray) -> np.ndarray:
        vw, vb = self.unpack(v)
        u = self.x @ vw.T + vb
        q = self.s[:, None] * p * (u - (p * u).sum(axis=1, keepdims=True))
        hw = q.T @ self.x + self.lam * vw
        return np.hstack([hw, q.sum(axis=0)[:, None]]).ravel()


def _newton(problem: _Binary | _Multinomial, theta: np.ndarray | None = None) -> np.ndarray:
    """Truncated Newton from ``theta`` (zeros): conjugate gradients on the Newton system, then a backtracking
    line search."""
    theta = np.zeros(problem.size) if theta is None or theta.shape != (problem.size,) else theta.astype(np.float64)
    loss, grad, curvature = problem.evaluate(theta)
    for _ in range(MAX_NEWTON):
        gmax = float(np.max(np.abs(grad)))
        if gmax <= TOL:
            break
        step = _conjugate_gradients(problem, curvature, -grad, min(0.5, np.sqrt(gmax)) * np.linalg.norm(grad))
        slope = float(grad @ step)
        if slope >= 0:  # not a descent direction (should not happen: the Hessian is positive semi-definite)
            step, slope = -grad, -float(grad @ grad)
        t = 1.0
        while True:
            new = theta + t * step
            new_loss, new_grad, new_curv = problem.evaluate(new)
            if new_loss <= loss + 1e-4 * t * slope or t < 1e-10:
                break
            t *= 0.5
        if loss - new_loss <= 1e-16 * max(1.0, abs(loss)) and t < 1e-10:
            break  # no further progress is possible in floating point
        theta, loss, grad, curvature = new, new_loss, new_grad, new_curv
    return theta


def _conjugate_gradients(
    problem: _Binary | _Multinomial, curvature: np.ndarray, b: np.ndarray, tol: float
) -> np.ndarray:
    """Approximately solve H x = b (H positive semi-definite), to a residual of ``tol``."""
    x = np.zeros_like(b)
    r = b.copy()
    d = r.copy()
    rr = float(r @ r)
    for _ in range(MAX_CG):
        if np.sqrt(rr) <= tol:
            break
        hd = problem.hessian_times(curvature, d)
        dhd = float(d @ hd)
        if dhd <= 0:
            break
        alpha = rr / dhd
        x += alpha * d
        r -= alpha * hd
        rr_new = float(r @ r)
        d = r + (rr_new / rr) * d
        rr = rr_new
    return x if np.any(x) else b
