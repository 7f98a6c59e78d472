"""Calibration fitting: recovers a known temperature and bias, refuses too few labels, stores and finds files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from triage.domain.pack import parse_pack
from triage.evaluation.calibrating import fit_calibration, fit_criterion
from triage.learning import fitstore
from triage.learning.vector_scaling import fit_vector_scaling
from triage.scoring import calibrate as cal_mod
from triage.scoring.calibrate import apply_vector_scaling

PACK = parse_pack(
    {
        "criterion": [
            {
                "id": "mood",
                "question": "Mood?",
                "options": [
                    {"id": "bad", "label": "Bad"},
                    {"id": "meh", "label": "Meh"},
                    {"id": "good", "label": "Good"},
                ],
            },
        ],
    }
)
CRIT = PACK.criteria[0]


def synthetic(n: int, temperature: float, bias: np.ndarray, seed: int = 0) -> tuple[np.ndarray, list[int]]:
    """Uncalibrated log-probs, and labels drawn from the calibrated distribution."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, len(bias))) * 2.5
    x = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
    true = np.exp(apply_vector_scaling(x, temperature, bias))
    y = [int(rng.choice(len(bias), p=p)) for p in true]
    return x, y


def test_recovers_known_temperature_and_bias() -> None:
    bias = np.array([0.6, -0.4, -0.2])  # mean zero: the gauge the L2 penalty picks
    x, y = synthetic(6000, 2.0, bias)
    t, b = fit_vector_scaling(x, y, l2_bias=1e-3, l2_log_t=1e-3)
    assert t == pytest.approx(2.0, rel=0.06)
    np.testing.assert_allclose(b, bias, atol=0.08)


def test_regularisation_pulls_toward_identity() -> None:
    x, y = synthetic(30, 3.0, np.array([1.0, -0.5, -0.5]), seed=3)
    t_weak, b_weak = fit_vector_scaling(x, y, l2_bias=1e-3, l2_log_t=1e-3)
    t_strong, b_strong = fit_vector_scaling(x, y, l2_bias=1e3, l2_log_t=1e3)
    assert abs(np.log(t_strong)) < abs(np.log(t_weak))
    assert np.abs(b_strong).max() < 0.01 < np.abs(b_weak).max()


def test_refuses_too_few_labels_by_name() -> None:
    x, _ = synthetic(40, 1.0, np.zeros(3))
    y = [0] * 20 + [1] * 17 + [2] * 3
    out = fit_criterion(CRIT, x, y, [f"r{i}" for i in range(40)])
    assert out.refused is not None
    assert "'mood'" in out.refused and "good has 3" in out.refused and "at least 5" in out.refused
    assert out.temperature is None
    cal, outcomes = fit_calibration(
        PACK, {"mood": x}, {"mood": y}, [f"r{i}" for i in range(40)], model_sha256="m", prompt_format="f"
    )
    assert cal.criteria == {} and outcomes[0].refused


def test_freeze_holds_rare_option_bias_at_zero() -> None:
    x, _ = synthetic(60, 1.0, np.zeros(3))
    y = [0] * 30 + [1] * 28 + [2] * 2
    out = fit_criterion(CRIT, x, y, [f"r{i}" for i in range(60)], rare="freeze")
    assert out.refused is None and out.frozen == ["good"]
    assert out.bias is not None and out.bias["good"] == 0.0
    assert any("good has 2" in w for w in out.warnings)


def test_holdout_check_and_refit() -> None:
    x, y = synthetic(400, 2.5, np.array([0.8, -0.3, -0.5]), seed=5)
    ids = [f"t{i}" for i in range(400)]
    out = fit_criterion(CRIT, x, y, ids)
    h = out.holdout
    assert h is not None and 60 < h["n"] < 140 and h["n"] + h["fit_n"] == 400
    assert h["after"]["nll"] < h["before"]["nll"]  # over-confident input: the fit must help
    assert h["after"]["ece"] < h["before"]["ece"]
    assert out.temperature is not None and out.temperature > 1.5


def test_calibration_apply_matches_fit() -> None:
    x, y = synthetic(300, 1.7, np.array([0.5, 0.0, -0.5]), seed=2)
    cal, _ = fit_calibration(
        PACK, {"mood": x}, {"mood": y}, [str(i) for i in range(300)], model_sha256="abc", prompt_format="p/1"
    )
    c = cal.criteria["mood"]
    bias = np.array([c.bias[o.id] for o in CRIT.options])
    np.testing.assert_allclose(
        np.stack([cal.apply("mood", r) for r in x[:5]]), apply_vector_scaling(x[:5], c.temperature, bias), atol=1e-12
    )


def test_store_find_and_refuse_mismatch(tmp_path: Path) -> None:
    x, y = synthetic(100, 1.5, np.zeros(3))
    cal, _ = fit_calibration(
        PACK,
        {"mood": x},
        {"mood": y},
        [str(i) for i in range(100)],
        model_sha256="a" * 64,
        prompt_format="triage-prompt/1:chat",
    )
    assert fitstore.find_calibration("a" * 64, PACK.hash, "triage-prompt/1:chat") is None
    stored = fitstore.store_calibration(cal)
    assert stored.parent == fitstore.calibrations_dir()
    assert fitstore.find_calibration("a" * 64, PACK.hash, "triage-prompt/1:chat") == stored
    assert fitstore.find_calibration("b" * 64, PACK.hash, "triage-prompt/1:chat") is None
    assert fitstore.find_calibration("a" * 64, PACK.hash, "triage-prompt/1:plain") is None
    # A copy under another name is found too; a broken file is passed over.
    other = stored.with_name("mine.json")
    stored.rename(other)
    (stored.parent / "broken.json").write_text("{not json")
    assert fitstore.find_calibration("a" * 64, PACK.hash, "triage-prompt/1:chat") == other
    back = cal_mod.read_calibration(other)
    assert back.criteria["mood"].temperature == pytest.approx(cal.criteria["mood"].temperature)
    assert json.loads(other.read_text())["report"]["criteria"][0]["criterion"] == "mood"

    class FakeEngine:
        sha256 = "c" * 64

        def format_for(self, kind: str = "label"):  # type: ignore[no-untyped-def]
            return type("F", (), {"id": f"triage-prompt/1:chat/{kind}"})()

    with pytest.raises(cal_mod.InputError, match="fitted for another setup: model sha256"):
        fitstore.load_calibration(other, engine=FakeEngine(), pack=PACK)
    assert fitstore.auto_calibration(FakeEngine(), PACK) is None
    assert cal_mod.check_options(back, orderings="cyclic", prior=True) is not None
    assert cal_mod.check_options(back, orderings="cyclic", prior=False) is None


def test_a_near_flat_direction_does_not_blow_up_the_fit() -> None:
    """Real cfpb readouts on which an unguarded Newton step asked for log T = -1814 (OverflowError)."""
    data = json.loads((Path(__file__).parent / "data" / "calibration-divergence.json").read_text(encoding="utf-8"))
    x, y = np.array(data["logprobs"]), np.array(data["labels"])
    t, b = fit_vector_scaling(x, y, frozen=data["frozen"])
    assert np.isfinite(t) and 0 < t < 1 and np.all(np.isfinite(b)) and b[data["frozen"][0]] == 0

    def nll(temp: float, bias: np.ndarray) -> float:
        return float(-apply_vector_scaling(x, temp, bias)[np.arange(len(y)), y].mean())

    assert nll(t, b) < nll(1.0, np.zeros(x.shape[1]))  # the fit improved on the identity
