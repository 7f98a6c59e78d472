"""The one options resolver: a flag beats the config, the config beats the default;
a bad value is named with its source."""

from __future__ import annotations

from pathlib import Path

import pytest

from triage.cli import build_parser, main
from triage.domain.pack import parse_pack
from triage.errors import InputError, TriageError
from triage.scoring import options as opts
from triage.scoring.options import ScoreOptions, resolve_options
from triage.store.config import config_path, load_config


def write_config(text: str) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_flag_beats_the_config_and_the_config_beats_the_default() -> None:
    path = write_config('theme = "nord"\nmode = "serial"\nreadout = "letter"\nprior = true\n')
    config = load_config()
    got = resolve_options({"mode": "full", "prior": None}, config)
    assert got.options == ScoreOptions(mode="full", readout="letter", prior=True)
    assert got.sources == {
        "mode": "--mode",
        "strategy": "default",
        "readout": f"config {path} line 3",
        "orderings": "default",
        "prior": f"config {path} line 4",
    }
    assert resolve_options().options == ScoreOptions() and ScoreOptions().readout == opts.DEFAULT_READOUT


def test_a_bad_config_value_is_named_with_its_file_and_line() -> None:
    path = write_config('# my settings\ntheme = "nord"\nmode = "foo"\n')
    with pytest.raises(TriageError) as caught:
        resolve_options(None, load_config())
    assert caught.value.exit_code == 2
    said = f"config {path} line 3: mode = \"foo\": unknown mode 'foo'; use one of fanout, serial, full"
    assert caught.value.message == said
    # The app's way: the default, and the same words for a notice.
    got = resolve_options(None, load_config(), fallback=True)
    assert got.options.mode == opts.DEFAULT_MODE and got.sources["mode"] == "default"
    assert got.problems == (f"{said}; using the default 'fanout'",)


def test_a_bad_flag_is_named_as_the_flag_even_with_fallback() -> None:
    with pytest.raises(TriageError, match="^--orderings sideways: unknown orderings"):
        resolve_options({"orderings": "sideways"}, fallback=True)


def test_criteria_are_checked_against_the_pack() -> None:
    options = [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]
    pack = parse_pack({"criterion": [{"id": "topic", "question": "Q?", "options": options}]})
    assert resolve_options({"criteria": " topic,topic "}, pack=pack).options.criteria == ("topic",)
    with pytest.raises(InputError, match="names no criteria"):
        resolve_options({"criteria": " , "}, pack=pack)


def test_choice_lists_come_from_options_py() -> None:
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    actions = {a.dest: a for a in commands["score"]._actions}
    assert tuple(actions["mode"].choices) == opts.MODES
    assert tuple(actions["readout"].choices) == opts.READOUTS
    assert tuple(actions["orderings"].choices) == opts.ORDERINGS
    assert tuple(actions["strategy"].choices) == opts.STRATEGIES


def test_score_exits_2_naming_the_config_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config('readout = "word"\n')
    ticket = tmp_path / "t.txt"
    ticket.write_text("I was charged twice", encoding="utf-8")
    missing = str(tmp_path / "no-model.gguf")
    assert main(["score", str(ticket), "--model", missing]) == 2  # before any model is looked for
    err = capsys.readouterr().err
    assert f"config {path} line 1: readout = \"word\": unknown readout 'word'; use one of label, letter" in err
    assert main(["score", str(ticket), "--readout", "label", "--model", missing]) != 0
    assert "readout" not in capsys.readouterr().err  # the flag wins: the bad config value is never read
