"""One settings object (triage/settings.py): every config key's type, default, description and flag in one
place; the config file checked against it (an unknown key named with its file and line, a removed key a
note with its line); flag help and every module's defaults read from it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from triage.cli import build_parser, main
from triage.settings import DEFAULTS, RETIRED, SETTINGS, Settings, retired_message
from triage.store.config import ConfigError, config_path, load_config, retired_notes, save_config

ROOT = Path(__file__).resolve().parents[1]


def write_config(text: str) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_every_setting_has_a_type_a_default_and_a_description() -> None:
    assert list(SETTINGS) == [f.name for f in dataclasses.fields(Settings)]
    for key, s in SETTINGS.items():
        assert s.description and s.kinds, key
        assert s.default is None or s.accepts(s.default), key
        assert s.default is not None or s.unset, f"{key}: a default of None needs words for it"
    assert DEFAULTS == Settings() and DEFAULTS.keep_features == 5000 and DEFAULTS.n_ctx == 4096
    assert (DEFAULTS.starter, DEFAULTS.server) == (True, None)  # the lead's starter head; score --server
    assert SETTINGS["starter"].kinds == (bool,) and SETTINGS["server"].flag == "--server"
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULTS.keep_features = 1  # type: ignore[misc]
    assert Settings.of({"keep_features": 10, "theme": "nord"}) == Settings(keep_features=10, theme="nord")
    assert set(RETIRED).isdisjoint(SETTINGS)


def test_an_unknown_key_is_named_with_its_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config('# my settings\ntheme = "nord"\n\n  n_cxt = 2048\n')
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert caught.value.message == f"config file {path} line 4: unknown key 'n_cxt' (did you mean 'n_ctx'?)"
    assert "keep_features" in (caught.value.hint or "")
    ticket = tmp_path / "t.txt"
    ticket.write_text("I was charged twice", encoding="utf-8")
    assert main(["score", str(ticket), "--model", str(tmp_path / "none.gguf")]) == 1  # before any model
    assert f"config file {path} line 4: unknown key 'n_cxt'" in capsys.readouterr().err
    write_config('"colour" = "red"\n')  # a quoted key is found on its line too
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert caught.value.message.endswith("line 1: unknown key 'colour'")


def test_a_value_of_the_wrong_type_is_named_with_its_line() -> None:
    path = write_config('theme = "nord"\nkeep_features = "many"\n')
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert (
        caught.value.message == f"config file {path} line 2: key 'keep_features' should be a whole number, got 'many'"
    )
    for text, kind in (
        ("auto_learn = 1", "true or false"),
        ("n_ctx = true", "a whole number"),
        ("pack = 3", "a string"),
    ):
        write_config(text + "\n")
        with pytest.raises(ConfigError, match=f"should be {kind}"):
            load_config()
    write_config("stable_cache_ttl_days = 7\n")  # a whole number is a number
    assert Settings.of(load_config()).stable_cache_ttl_days == 7


def test_a_removed_key_is_a_note_with_its_line_ignored_and_never_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config('theme = "nord"\nreadout = "letter"\nprior = true\npack_tokens = 512\n')
    assert load_config() == {"theme": "nord"}
    notes = retired_notes()
    assert notes == [
        f"config file {path} line 2: {retired_message('readout')}; the line is ignored, delete it",
        f"config file {path} line 3: {retired_message('prior')}; the line is ignored, delete it",
        f"config file {path} line 4: {retired_message('pack_tokens')}; the line is ignored, delete it",
    ]
    assert "readout was removed: triage reads options by name" in notes[0]
    ticket = tmp_path / "t.txt"
    ticket.write_text("I was charged twice", encoding="utf-8")
    assert main(["score", str(ticket), "--model", str(tmp_path / "none.gguf")]) == 2  # the missing model, not the key
    err = capsys.readouterr().err
    assert f"triage: note: config file {path} line 2: readout was removed" in err
    save_config({"auto_score": True})  # the app saves a setting: the user's removed lines stay
    assert 'readout = "letter"' in path.read_text(encoding="utf-8")
    assert load_config() == {"theme": "nord", "auto_score": True}


def test_flag_help_reads_the_defaults_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    def helps(command: str) -> dict[str, str]:
        sub = build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
        return {a.option_strings[0]: a.help or "" for a in sub._actions if a.option_strings}

    score, serve = helps("score"), helps("serve")
    assert score["--n-ctx"] == SETTINGS["n_ctx"].help() and "else 4096)" in score["--n-ctx"]
    assert serve["--queue-limit"] == SETTINGS["serve_queue_limit"].help() and "else 16)" in serve["--queue-limit"]
    assert score["--calibration"].startswith(SETTINGS["calibration"].description)
    assert helps("eval")["--n-ctx"].endswith("(default 1024)")  # eval's own default
    monkeypatch.setitem(SETTINGS, "n_ctx", dataclasses.replace(SETTINGS["n_ctx"], default=2048))
    assert "else 2048)" in helps("score")["--n-ctx"]


# Each setting's default as a literal, and how a line that restates it would look. A module that needs a default
# reads it from triage.settings (DEFAULTS.keep_features), so none of these may appear anywhere else in triage/.
RESTATED = {
    "keep_features": r"\b5000\b",
    "n_ctx": r"n_ctx\b.*\b4096\b",
    "theme": r"textual-dark",
    "stable_cache_mb": r"(?i)(cache|_mb\b).*\b512\b",
    "stable_cache_ttl_days": r"(?i)(ttl|days).*\b14(\.0)?\b",
    "auto_learn_every": r"(?i)auto.?learn.*\b20\b",
    "serve_queue_limit": r"(?i)queue.*\b16\b",
}


def test_every_default_is_written_once_in_the_settings() -> None:
    source = (ROOT / "triage/settings.py").read_text(encoding="utf-8")
    for key, pattern in RESTATED.items():  # each pattern finds the setting's own field (so it can find a copy)
        field = re.search(rf"\n    {key}: .*?(?=\n    \w+: |\n\n)", source, re.S)
        assert field is not None and re.search(pattern, field.group().replace("\n", " ")), key
    config_get = re.compile(r"""config\b[^=\n]*?\.get\(\s*["'](%s)["']""" % "|".join(SETTINGS))
    found = []
    for path in sorted((ROOT / "triage").rglob("*.py")):
        if path.name == "settings.py" and path.parent.name == "triage":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
            found += [f"{where} (restates {k})" for k, p in RESTATED.items() if re.search(p, line)]
            if config_get.search(line):
                found.append(f"{where} (a config.get: read it as Settings.of(config).key)")
    assert not found, "defaults written outside triage/settings.py:\n" + "\n".join(found)


def test_docs_config_md_lists_every_setting_and_every_removed_key_as_declared() -> None:
    doc = (ROOT / "docs/config.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", doc, re.M)}
    for key, s in SETTINGS.items():
        row = rows.get(key, "")
        assert s.description in row and s.shown_default in row, f"docs/config.md: the row of {key} is not {s}"
        assert (f"`{s.flag}`" in row) == (s.flag is not None), key
    for key, replaced in RETIRED.items():
        assert replaced in rows.get(key, ""), f"docs/config.md: the removed key {key}"
    assert set(rows) == set(SETTINGS) | set(RETIRED)
