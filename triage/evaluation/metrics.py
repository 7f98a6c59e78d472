"""Classification and calibration metrics over option indices.

Conventions (the same as scikit-learn's where there is one):

* ``y`` are gold option indices, ``pred`` predicted ones, ``probs`` an (n, k) array
  of probabilities per option.
* Balanced accuracy is the mean recall over the classes present in ``y``.
* Macro-F1 averages F1 over the classes present in ``y`` or ``pred``; a class
  with no true positive has F1 0.
* ECE is top-label: rows are binned by their top probability into ``bins``
  equal-width bins on [0, 1]; ECE = sum over bins of (rows in bin / n) *
  |accuracy in bin - mean confidence in bin|.
* Brier is the multi-class form: mean over rows of sum over options of
  (p - onehot)^2, in [0, 2].
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ECE_BINS = 15


def confusion(y: Sequence[int], pred: Sequence[int], k: int) -> list[list[int]]:
    """Confusion matrix: ``m[true][predicted]`` counts."""
    m = [[0] * k for _ in range(k)]
    for t, p in zip(y, pred, strict=True):
        m[t][p] += 1
    return m


def accuracy(y: Sequence[int], pred: Sequence[int]) -> float:
    """Share of rows predicted right."""
    if not len(y):
        return float("nan")
    return sum(int(t == p) for t, p in zip(y, pred, strict=True)) / len(y)


def balanced_accuracy(y: Sequence[int], pred: Sequence[int], k: int) -> float:
    """Mean recall over the classes that occur in ``y``."""
    m = confusion(y, pred, k)
    recalls = [m[c][c] / sum(m[c]) for c in range(k) if sum(m[c])]
    return float(np.mean(recalls)) if recalls else float("nan")


def per_class_f1(y: Sequence[int], pred: Sequence[int], k: int) -> list[float | None]:
    """F1 per class; None for a class that occurs in neither ``y`` nor ``pred``."""
    m = confusion(y, pred, k)
    out: list[float | None] = []
    for c in range(k):
        tp = m[c][c]
        support = sum(m[c])
        predicted = sum(m[r][c] for r in range(k))
        if not support and not predicted:
            out.append(None)
        else:
            out.append(2 * tp / (support + predicted))
    return out


def macro_f1(y: Sequence[int], pred: Sequence[int], k: int) -> float:
    """Mean F1 over the classes present in ``y`` or ``pred``."""
    f1s = [f for f in per_class_f1(y, pred, k) if f is not None]
    return float(np.mean(f1s)) if f1s else float("nan")


def ece(probs: np.ndarray, y: Sequence[int], bins: int = ECE_BINS) -> float:
    """Top-label expected calibration error with ``bins`` equal-width bins."""
    probs = np.asarray(probs, dtype=np.float64)
    n = len(probs)
    if not n:
        return float("nan")
    conf = probs.max(axis=1)
    correct = (probs.argmax(axis=1) == np.asarray(y)).astype(np.float64)
    # Bin b holds confidences in (b/bins, (b+1)/bins]; a confidence of exactly 0 goes to bin 0.
    idx = np.clip(np.ceil(conf * bins).astype(int) - 1, 0, bins - 1)
    total = 0.0
    for b in range(bins):
        sel = idx == b
        if sel.any():
            total += sel.sum() / n * abs(correct[sel].mean() - conf[sel].mean())
    return float(total)


def brier(probs: np.ndarray, y: Sequence[int]) -> float:
    """Multi-class Brier score: mean of sum over options of (p - onehot)^2."""
    probs = np.asarray(probs, dtype=np.float64)
    if not len(probs):
        return float("nan")
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(probs)), np.asarray(y)] = 1.0
    return float(np.mean(np.sum((probs - onehot) ** 2, axis=1)))


def nll(logprobs: np.ndarray, y: Sequence[int]) -> float:
    """Mean negative log-likelihood of the gold options (natural log)."""
    logprobs = np.asarray(logprobs, dtype=np.float64)
    if not len(logprobs):
        return float("nan")
    return float(-np.mean(logprobs[np.arange(len(logprobs)), np.asarray(y)]))


def flip_rate(per_order_argmax: Sequence[Sequence[int]]) -> float:
    """How often rotating the options changes the raw answer.

    Args:
        per_order_argmax: per row, the argmax option of each ordering, the pack
            (identity) order first.

    Returns:
        Share of rotated orderings, over all rows, whose argmax differs from the
        pack order's. NaN when no row has more than one ordering.
    """
    flips = total = 0
    for row in per_order_argmax:
        first = row[0]
        flips += sum(int(a != first) for a in row[1:])
        total += len(row) - 1
    return flips / total if total else float("nan")


def summarize(logprobs: np.ndarray, y: Sequence[int], k: int) -> dict[str, object]:
    """Every metric of one variant from its (n, k) log-probabilities and the gold indices."""
    logprobs = np.asarray(logprobs, dtype=np.float64).reshape(-1, k)
    probs = np.exp(logprobs)
    probs = probs / probs.sum(axis=1, keepdims=True)
    pred = [int(i) for i in probs.argmax(axis=1)] if len(probs) else []
    y = [int(t) for t in y]
    return {
        "n": len(y),
        "accuracy": accuracy(y, pred),
        "balanced_accuracy": balanced_accuracy(y, pred, k),
        "macro_f1": macro_f1(y, pred, k),
        "ece": ece(probs, y),
        "brier": brier(probs, y),
        "nll": nll(logprobs, y),
        "balanced_accuracy_ci95": list(bootstrap_ci(y, pred, k)),
        "ece_floor": ece_floor(probs),
        "confusion": confusion(y, pred, k),
    }


def bootstrap_ci(
    y: Sequence[int], pred: Sequence[int], k: int, *, draws: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the balanced accuracy (rows resampled with replacement).

    On dev sets of tens of rows the interval is wide; read differences between
    variants against it.
    """
    n = len(y)
    if not n:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    cells = np.asarray(y) * k + np.asarray(pred)
    idx = rng.integers(0, n, (draws, n))
    # Confusion matrices of all draws at once: counts of (gold, predicted) cells.
    m = np.stack([np.bincount(row, minlength=k * k) for row in cells[idx]]).reshape(draws, k, k)
    support = m.sum(axis=2)
    diag = np.diagonal(m, axis1=1, axis2=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(support > 0, diag / np.maximum(support, 1), np.nan)
    stats = np.nanmean(recall, axis=1)
    lo, hi = np.nanpercentile(stats, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(lo), float(hi)


def ece_floor(probs: np.ndarray, *, bins: int = ECE_BINS, draws: int = 200, seed: int = 0) -> float:
    """The ECE a perfectly calibrated model would still show on these rows, on average.

    Labels are drawn from the model's own probabilities, so the model is
    calibrated by construction; what ECE remains is small-sample noise. With
    few rows it is far from 0, so an ECE target means little below it.
    """
    probs = np.asarray(probs, dtype=np.float64)
    if not len(probs):
        return float("nan")
    rng = np.random.default_rng(seed)
    cum = np.cumsum(probs / probs.sum(axis=1, keepdims=True), axis=1)
    out = []
    for _ in range(draws):
        u = rng.random((len(probs), 1))
        y = np.minimum((u > cum).sum(axis=1), probs.shape[1] - 1)
        out.append(ece(probs, y.tolist(), bins))
    return float(np.mean(out))
