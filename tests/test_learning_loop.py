"""bench/learning_loop.py: the prequential replay shows the head learned so far and judges it before it learns."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from conftest import load_module

BENCH = Path(__file__).resolve().parents[1] / "bench" / "learning_loop.py"


def _module():  # type: ignore[no-untyped-def]
    return load_module(BENCH, "learning_loop")


@dataclass
class _Opt:
    id: str


@dataclass
class _Crit:
    id: str
    options: list[_Opt] = field(default_factory=lambda: [_Opt("a"), _Opt("b")])


@dataclass
class _Pack:
    criteria: list[_Crit]


@dataclass
class _Row:
    labels: dict[str, str]


class _OracleHead:
    """A head that knows the answers of the rows it was fitted on, and guesses 'b' elsewhere."""

    def __init__(self, known: dict[int, int]) -> None:
        self.known = known
        self.criteria = {"c": None}

    def covers(self, cid: str) -> bool:
        return cid == "c"

    def apply(self, cid: str, features: np.ndarray, logprobs: np.ndarray) -> np.ndarray:
        i = int(features[0])
        return np.log(np.array([0.9, 0.1]) if self.known.get(i, 1) == 0 else np.array([0.1, 0.9]))


def _alternating(gold: list[str]) -> tuple[list[_Row], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Rows labelled ``gold`` on criterion c, each row's feature its index, and a zero-shot that always says a."""
    n = len(gold)
    return (
        [_Row({"c": g}) for g in gold],
        {"c": np.arange(n, dtype=float).reshape(-1, 1)},
        {"c": np.log(np.tile([0.8, 0.2], (n, 1)))},
    )


def test_replay_is_prequential_and_refits_on_schedule() -> None:
    m = _module()
    gold = ["a", "b"] * 10
    rows, feats, raw = _alternating(gold)
    fitted_on: list[list[int]] = []

    def fit(idx: list[int]) -> _OracleHead:
        fitted_on.append(idx)
        return _OracleHead({i: 0 if gold[i] == "a" else 1 for i in idx})

    out = m.replay(_Pack([_Crit("c")]), rows, feats, raw, refit_every=5, fit=fit)
    c = out["curves"]["c"]
    assert c["zero_shot_agree"] == [1, 0] * 10
    # first 5: zero-shot; then a head that has never seen the row guesses b: right on odd rows only
    assert c["source"][:5] == ["zero-shot"] * 5 and set(c["source"][5:]) == {"learned"}
    assert c["learned_agree"][:5] == [1, 0, 1, 0, 1] and c["learned_agree"][5:] == [
        0 if g == "a" else 1 for g in gold[5:]
    ]
    assert [len(i) for i in fitted_on] == [5, 10, 15]  # not after the last row
    assert [r["labels"] for r in out["refits"]] == [5, 10, 15]


def test_windowed_agreement_and_svg_series() -> None:
    m = _module()
    assert m.windowed([1, 0, 1, 1], window=2) == [1.0, 0.5, 0.5, 1.0]
    svg = m.svg({"c": {"labels": 4, "learned_agree": [1, 1, 0, 1], "zero_shot_agree": [0, 0, 1, 0]}}, "t", window=2)
    assert svg.count('class="series"') == 2 and 'data-series="c:learned loop:plain"' in svg  # no gold: no balanced


def test_windowed_balanced_agreement_averages_over_the_options_in_the_window() -> None:
    m = _module()
    # always right on option 0, never on option 1: plain agreement follows the mix, balanced stays at 1/2
    flags, gold = [1, 1, 1, 0, 1, 0], [0, 0, 0, 1, 0, 1]
    assert m.windowed_balanced(flags, gold, window=3) == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5]
    assert m.windowed(flags, window=3)[3] == 2 / 3


def test_the_baseline_loop_is_fitted_on_the_same_schedule_and_counts_only_after_its_fit() -> None:
    m = _module()
    gold = ["a", "b"] * 5
    rows, feats, raw = _alternating(gold)
    fitted_on: list[list[int]] = []

    def baseline(idx: list[int]) -> dict[str, np.ndarray]:
        fitted_on.append(idx)
        return {"c": np.ones(10, dtype=int)}  # always b once fitted

    out = m.replay(
        _Pack([_Crit("c")]), rows, feats, raw, refit_every=4, fit=lambda idx: _OracleHead({}), baseline=baseline
    )
    c = out["curves"]["c"]
    # rows 0-3 before any fit: zero-shot's a; then b
    assert c["baseline_agree"] == [1, 0, 1, 0] + [0 if g == "a" else 1 for g in gold[4:]]
    assert [len(i) for i in fitted_on] == [4, 8]
    assert c["balanced"]["baseline"] == 0.5 * (2 / 5 + 3 / 5)
    svg = m.svg(out["curves"], "t", window=2)
    assert svg.count('class="series"') == 6  # three series, plain and balanced
    assert 'data-series="c:TF-IDF loop:plain"' in svg and 'data-series="c:TF-IDF loop:balanced"' in svg


def test_without_a_baseline_the_curves_hold_none() -> None:
    m = _module()
    rows = [_Row({"c": "a"}), _Row({"c": "b"})]
    out = m.replay(
        _Pack([_Crit("c")]),
        rows,
        {"c": np.zeros((2, 1))},
        {"c": np.log(np.tile([0.8, 0.2], (2, 1)))},
        refit_every=1,
        fit=lambda idx: None,
    )
    assert "baseline_agree" not in out["curves"]["c"] and "baseline" not in out["curves"]["c"]["balanced"]
