"""The app scores as the CLI does (``ScoreOptions()``) and picks fits with the CLI's policy, and says so;
a removed config key is named in the notice band with its line."""

from __future__ import annotations

from pathlib import Path

from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until
from textual import events

from triage.learning.fitstore import calibrations_dir, stored_name
from triage.scoring.calibrate import Calibration, CriterionCalibration, write_calibration
from triage.store.config import config_path, load_config, retired_notes

TICKET = "I was charged twice for my order and nobody answers my emails."


def write_config(text: str) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


async def score(app, pilot) -> None:  # type: ignore[no-untyped-def]
    await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model to load")
    app.post_message(events.Paste(TICKET))
    await wait_until(pilot, lambda: bool(app.main.ticket.ticket_text), what="the paste to land")
    app.main.action_score()
    await wait_until(pilot, lambda: app.main.result is not None, what="the score")


async def test_a_removed_config_key_is_shown_with_its_line_and_ignored() -> None:
    path = write_config('theme = "nord"\nreadout = "letter"\nmode = "serial"\n')
    config = load_config()
    assert config == {"theme": "nord"}  # the removed keys are not read
    app = fake_app(config=config, config_notes=tuple(retired_notes()))
    async with app.run_test() as pilot:
        main = app.main
        await wait_until(pilot, lambda: main.notices.has("config"), what="the config notice")
        text = main.notices.text
        assert f"config file {path} line 2: readout was removed: triage reads options by name" in text
        assert f"config file {path} line 3: mode was removed" in text
        await score(app, pilot)
        assert main.result is not None and (main.result.readout, main.result.mode) == ("label", "fanout")


async def test_the_app_applies_the_stored_calibration_by_the_cli_policy_and_says_why_not() -> None:
    from triage.domain.pack import resolve_pack

    engine = FakeEngine()
    app = fake_app(FakeFactory(engine), config={})
    pack = resolve_pack(None)  # the app's pack: the built-in one
    crit = pack.criteria[0]
    cal = Calibration(
        engine.sha256,
        pack.hash,
        engine.format_for("label").id,
        "none",
        False,
        {crit.id: CriterionCalibration(1.0, {o.id: 0.0 for o in crit.options})},
    )
    key = stored_name(cal.model_sha256, cal.pack_hash, cal.prompt_format)
    stored = write_calibration(cal, calibrations_dir() / key)
    async with app.run_test() as pilot:
        await score(app, pilot)
        assert app.main.result is not None and app.main.result.calibration == stored.name
        assert not app.main.notices.has("calibration")
    write_config("prior = true\n")  # a removed key: the app still scores without the prior, with the calibration
    app = fake_app(FakeFactory(FakeEngine()), config=load_config())
    async with app.run_test() as pilot:
        await score(app, pilot)
        assert app.main.result is not None and app.main.result.calibration == stored.name
        assert app.main.result.prior is False
    with_prior = Calibration(cal.model_sha256, cal.pack_hash, cal.prompt_format, "none", True, cal.criteria)
    write_calibration(with_prior, calibrations_dir() / key)  # fitted for eval's --prior: passed over, and said why
    app = fake_app(FakeFactory(FakeEngine()), config={})
    async with app.run_test() as pilot:
        await score(app, pilot)
        assert app.main.result is not None and app.main.result.calibration is None
        await wait_until(pilot, lambda: app.main.notices.has("calibration"), what="the calibration notice")
        assert "fitted with the prior, scoring without it" in app.main.notices.text
