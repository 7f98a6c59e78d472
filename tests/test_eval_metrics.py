"""Eval metrics on small examples computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from triage.evaluation import metrics

Y = [0, 0, 0, 1, 1, 2]
PRED = [0, 0, 1, 1, 2, 2]


def test_confusion_accuracy_balanced_f1() -> None:
    assert metrics.confusion(Y, PRED, 3) == [[2, 1, 0], [0, 1, 1], [0, 0, 1]]
    assert metrics.accuracy(Y, PRED) == pytest.approx(4 / 6)
    # recalls 2/3, 1/2, 1/1
    assert metrics.balanced_accuracy(Y, PRED, 3) == pytest.approx((2 / 3 + 1 / 2 + 1) / 3)
    # F1 per class: 2*2/(3+2), 2*1/(2+2), 2*1/(1+2)
    assert metrics.per_class_f1(Y, PRED, 3) == pytest.approx([0.8, 0.5, 2 / 3])
    assert metrics.macro_f1(Y, PRED, 3) == pytest.approx((0.8 + 0.5 + 2 / 3) / 3)


def test_absent_classes() -> None:
    # Class 2 never occurs: balanced accuracy averages over classes in y only,
    # macro-F1 over classes in y or pred.
    y, pred = [0, 0, 1, 1], [0, 1, 1, 1]
    assert metrics.balanced_accuracy(y, pred, 3) == pytest.approx((0.5 + 1.0) / 2)
    assert metrics.per_class_f1(y, pred, 3)[2] is None
    assert metrics.macro_f1(y, pred, 3) == pytest.approx((2 * 1 / 3 + 2 * 2 / 5) / 2)
    # A class that is predicted but never gold counts as F1 0.
    assert metrics.macro_f1([0, 0], [0, 2], 3) == pytest.approx((2 / 3 + 0.0) / 2)


def test_matches_scikit_learn() -> None:
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(1)
    y, pred = rng.integers(0, 4, 200).tolist(), rng.integers(0, 4, 200).tolist()
    assert metrics.balanced_accuracy(y, pred, 4) == pytest.approx(sk.balanced_accuracy_score(y, pred))
    assert metrics.macro_f1(y, pred, 4) == pytest.approx(sk.f1_score(y, pred, average="macro"))
    assert metrics.confusion(y, pred, 4) == sk.confusion_matrix(y, pred, labels=[0, 1, 2, 3]).tolist()


PROBS = np.array(
    [
        [0.9, 0.05, 0.05],  # gold 0: right at 0.9
        [0.9, 0.1, 0.0],  # gold 1: wrong at 0.9
        [0.5, 0.3, 0.2],  # gold 0: right at 0.5
        [0.2, 0.5, 0.3],  # gold 2: wrong at 0.5
    ]
)
GOLD = [0, 1, 0, 2]


def test_ece_15_bins() -> None:
    # Bin (13/15, 14/15]: two rows, accuracy 0.5, confidence 0.9 -> 2/4 * 0.4.
    # Bin (7/15, 8/15]: two rows, accuracy 0.5, confidence 0.5 -> 0.
    assert metrics.ece(PROBS, GOLD) == pytest.approx(0.2)
    # One bin holds everything: |mean accuracy - mean confidence|.
    assert metrics.ece(PROBS, GOLD, bins=1) == pytest.approx(abs(0.5 - 0.7))
    perfect = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert metrics.ece(perfect, [0, 1]) == 0.0


def test_brier_and_nll() -> None:
    rows = [0.01 + 0.0025 + 0.0025, 0.81 + 0.81, 0.25 + 0.09 + 0.04, 0.04 + 0.25 + 0.49]
    assert metrics.brier(PROBS, GOLD) == pytest.approx(sum(rows) / 4)
    lp = np.log(np.array([[0.5, 0.5], [0.25, 0.75]]))
    assert metrics.nll(lp, [0, 1]) == pytest.approx(-(math.log(0.5) + math.log(0.75)) / 2)


def test_flip_rate() -> None:
    # Pack order first: 1 of 2 rotations flips, 0 of 2, 2 of 2 -> 3/6.
    assert metrics.flip_rate([[0, 0, 1], [2, 2, 2], [1, 0, 0]]) == pytest.approx(0.5)
    assert math.isnan(metrics.flip_rate([[0], [1]]))


def test_summarize() -> None:
    s = metrics.summarize(np.log(PROBS + 1e-300), GOLD, 3)
    assert s["n"] == 4
    assert s["accuracy"] == pytest.approx(0.5)
    assert s["confusion"] == [[2, 0, 0], [1, 0, 0], [0, 1, 0]]
    assert s["ece"] == pytest.approx(0.2)


def test_bootstrap_ci_brackets_the_estimate() -> None:
    y = [0, 1, 2] * 20
    pred = [t if i % 4 else (t + 1) % 3 for i, t in enumerate(y)]  # every 4th row wrong
    lo, hi = metrics.bootstrap_ci(y, pred, 3)
    assert lo <= metrics.balanced_accuracy(y, pred, 3) <= hi
    assert hi - lo > 0.05  # 60 rows: the interval is not a point
    assert metrics.bootstrap_ci(y, y, 3) == (1.0, 1.0)


def test_ece_floor_shrinks_with_more_rows() -> None:
    rng = np.random.default_rng(0)
    small = rng.dirichlet([1, 1, 1], 40)
    large = rng.dirichlet([1, 1, 1], 4000)
    f_small, f_large = metrics.ece_floor(small), metrics.ece_floor(large)
    assert f_small > 0.05 > f_large > 0.0
