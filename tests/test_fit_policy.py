"""The one fit policy (triage.learning.fit.choose_fits): which learned head and calibration apply, and why not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import TOPIC_MOOD

from triage.errors import InputError
from triage.lab.options import LabOptions
from triage.learning import fitstore, head_file
from triage.learning.fit import FitRequest, Fits, choose_fits
from triage.learning.fitstore import calibrations_dir, stored_name
from triage.scoring import head as head_mod
from triage.scoring.calibrate import Calibration, CriterionCalibration, write_calibration
from triage.scoring.options import ScoreOptions

PACK = TOPIC_MOOD


class Fmt:
    def __init__(self, readout: str) -> None:
        self.id = f"triage-prompt/3:plain/{readout}"


class Model:
    """A model's identity, as Ray nodes report it: sha256 and prompt format, no native model."""

    def __init__(self, sha256: str = "ab" * 32) -> None:
        self.sha256 = sha256

    def format_for(self, kind: str) -> Fmt:
        return Fmt(kind)


def make_head(model: Model, *, name: str = "team head") -> head_mod.Head:
    n_vocab, n_embd = 300, 50
    f = len(head_mod.feature_ids(n_vocab, n_embd))
    rng = np.random.default_rng(1)
    options = ["billing", "other"]
    topic = head_mod.CriterionHead(options, options, rng.normal(size=(2, f + 2)), rng.normal(size=2))
    fmt = model.format_for("label").id
    return head_mod.Head(model.sha256, PACK.hash, fmt, n_vocab, n_embd, {"topic": topic}, name=name)


def store(head: head_mod.Head) -> Path:
    name = fitstore.head_name(head.model_sha256, head.pack_hash, head.prompt_format)
    return head_file.write_head(head, fitstore.heads_dir() / name)


def make_cal(
    model: Model, *, readout: str = "label", orderings: str = "none", prior: bool = False, name: str = "cal.json"
) -> Calibration:
    return Calibration(
        model.sha256,
        PACK.hash,
        model.format_for(readout).id,
        orderings,
        prior,
        {"mood": CriterionCalibration(0.5, {"angry": 1.0, "calm": 0.0})},
        name=name,
    )


def test_the_stored_head_applies_and_says_to_which_criteria() -> None:
    model = Model()
    path = store(make_head(model))
    fits = choose_fits(model, PACK, ScoreOptions())
    assert fits.head is not None and fits.head.name == "team head" and fits.head_path == str(path)
    assert fits.calibration is None
    assert [(n.about, n.applied, n.text) for n in fits.notes] == [
        ("head", True, "applying learned head 'team head' to topic (not learned: mood)"),
    ]
    assert fits.engine_kwargs() == {"calibration": None, "head": fits.head}


def test_a_head_learned_for_another_model_is_passed_over_with_a_note() -> None:
    store(make_head(Model("cd" * 32)))
    fits = choose_fits(Model(), PACK, ScoreOptions())
    assert fits.head is None
    [why] = fits.passed_over("head")
    assert "not applied" in why and "another setup" in why and "model sha256" in why


def test_no_head_refuses_even_the_stored_one() -> None:
    model = Model()
    store(make_head(model))
    fits = choose_fits(model, PACK, ScoreOptions(), FitRequest(no_head=True))
    assert fits.head is None and fits.notes == ()


def test_an_explicit_bad_head_is_an_error(tmp_path: Path) -> None:
    model = Model()
    with pytest.raises(InputError, match="does not exist"):
        choose_fits(model, PACK, ScoreOptions(), FitRequest(head=str(tmp_path / "missing.npz")))
    foreign = head_file.write_head(make_head(Model("cd" * 32)), tmp_path / "foreign.npz")
    with pytest.raises(InputError, match="was learned for another setup"):
        choose_fits(model, PACK, ScoreOptions(), FitRequest(head=str(foreign)))
    mine = head_file.write_head(make_head(model), tmp_path / "mine.npz")
    with pytest.raises(InputError, match="reads options by name"):
        lab_fits(model, LabOptions(readout="letter"), FitRequest(head=str(mine)))
    assert choose_fits(model, PACK, ScoreOptions(), FitRequest(head=str(mine))).head_path == str(mine)


def lab_fits(model: Model, options: LabOptions, request: FitRequest | None = None, **kw: Any) -> Fits:
    """``choose_fits`` for the lab's ``options``: the product's part, and what their readings are."""
    return choose_fits(model, PACK, options.product, request, read_as=options.read_as, **kw)


def test_the_prior_with_a_head_is_noted() -> None:
    model = Model()
    store(make_head(model))
    fits = lab_fits(model, LabOptions(prior=True, criteria=("topic",)))
    assert [n.text for n in fits.notes] == [
        "learned criteria read the raw readout; --prior applies to the others only",
        "applying learned head 'team head' to topic",
    ]


def test_a_stored_calibration_for_other_options_is_passed_over_an_explicit_one_refused(tmp_path: Path) -> None:
    model = Model()
    cal = make_cal(model, readout="letter", orderings="cyclic")
    key = stored_name(cal.model_sha256, cal.pack_hash, cal.prompt_format)
    stored = write_calibration(cal, calibrations_dir() / key)
    letters = LabOptions(readout="letter", orderings="none")
    fits = lab_fits(model, letters)
    assert fits.calibration is None
    why = "fitted on orderings=cyclic, scoring with orderings=none"
    assert fits.passed_over("calibration") == [f"stored calibration {stored.name} not applied: {why}"]
    assert lab_fits(model, LabOptions(readout="letter")).calibration is not None  # cyclic: it fits
    assert lab_fits(model, letters, any_base=True).calibration is not None  # eval reads every base
    explicit = write_calibration(cal, tmp_path / "explicit.json")
    with pytest.raises(InputError, match="does not fit these options"):
        lab_fits(model, letters, FitRequest(calibration=str(explicit)))
    # The config's calibration is an explicit request too; --no-calibration wins over both.
    config = {"calibration": str(explicit)}
    fits = lab_fits(model, LabOptions(readout="letter"), FitRequest.of(config=config))
    assert fits.calibration_path == str(explicit) and fits.notes[0].text == f"applying calibration {explicit}"
    refused = FitRequest.of(no_calibration=True, config=config)
    assert lab_fits(model, LabOptions(readout="letter"), refused).calibration is None
