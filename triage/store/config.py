"""The user's config file: a flat TOML table of the settings in :mod:`triage.settings`.

Checked when read, against :class:`~triage.settings.Settings`: a key that is no setting is an
error naming the file and its line (a typo would otherwise be ignored without a word), and so is
a value of the wrong type. A key that was removed (:data:`triage.settings.RETIRED`: ``readout``,
``mode``, ``prior``, ...) is no error: it is left out of what is read, and :func:`retired_notes`
gives one line per such key naming the file, the line and what replaced it (the CLI prints them
on stderr, the app shows them in its notice band).

A config file that cannot be read is never overwritten: it is set aside as
``config.toml.bad-<time>`` before a new one is written, so nothing the user wrote is lost.
A UTF-8 byte-order mark at its start (some editors write one) is skipped.
"""

from __future__ import annotations

import difflib
import re
import time
import tomllib
from pathlib import Path

from triage import gate
from triage.bounded import Bounded
from triage.errors import TriageError
from triage.settings import RETIRED, SETTINGS, retired_message
from triage.store.files import write_text_atomic
from triage.store.paths import user_dirs

BOM = b"\xef\xbb\xbf"
"""UTF-8's byte-order mark, which some editors write at the start of a file: skipped when read."""


class ConfigError(TriageError):
    """The config file exists but is not valid."""


def config_path() -> Path:
    """Path of the config file (it may not exist)."""
    return user_dirs().config_file


def key_line(text: str, key: str) -> tuple[int, str] | None:
    """``(line number, line)`` of ``key``'s first ``key = ...`` line in ``text`` (a flat table), or None.

    tomllib gives no line numbers; a flat table writes one key a line, so a scan finds it. A
    quoted key (``"mode" = ...``) is found too.
    """
    pattern = re.compile(rf"""^\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*=""")
    for n, line in enumerate(text.splitlines(), 1):
        if pattern.match(line):
            return n, line.strip()
    return None


def config_source(key: str, value: object, path: Path | None = None) -> str:
    """Where a config value came from, as a message names it: ``config /path line 3: n_ctx = 100``."""
    path = path or config_path()
    try:
        found = key_line(gate.read_bytes(path, "config").decode("utf-8-sig"), key)
    except (OSError, ValueError):  # UnicodeDecodeError and the gate's Bounded are ValueErrors
        found = None
    if found is None:
        return f"config {path}: {key} = {value!r}"
    return f"config {path} line {found[0]}: {found[1]}"


def _where(path: Path, text: str, key: str) -> str:
    found = key_line(text, key)
    return f"config file {path}" + (f" line {found[0]}" if found else "")


def _read(path: Path) -> tuple[dict[str, object], str] | None:
    """The file's table and text, checked against the settings (None: no file).

    Raises:
        ConfigError: not TOML, a key that is no setting, a value of the wrong type.
    """
    try:
        raw = gate.read_bytes(path, "config")  # a FIFO, a device or a folder is refused, never waited on
    except FileNotFoundError:
        return None
    except gate.TooLarge as exc:
        raise ConfigError(
            f"config file {path} is not read: {exc}",
            hint="a config file is a few lines; check that it is the right file",
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read config file {path}: {exc.strerror}",
            hint="make it a regular file, or delete it to start from the defaults",
        ) from None
    if raw.startswith(BOM):  # Notepad's "UTF-8 with BOM": the mark is no TOML, the rest is read as written
        raw = raw[len(BOM) :]
    try:
        text = raw.decode("utf-8")
        data = gate.loads_toml(text)
    except Bounded as exc:
        raise ConfigError(
            f"config file {path} is not read: {exc}", hint="a config file is a flat table; fix it or delete it"
        ) from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(
            f"config file {path} is not valid TOML: {exc}",
            hint="fix the file, or delete it to start from the defaults",
        ) from exc
    for key, value in data.items():
        if key in RETIRED:
            continue
        setting = SETTINGS.get(key)
        if setting is None:
            near = difflib.get_close_matches(key, SETTINGS, n=1)
            raise ConfigError(
                f"{_where(path, text, key)}: unknown key {key!r}" + (f" (did you mean {near[0]!r}?)" if near else ""),
                hint=f"the keys: {', '.join(SETTINGS)} (docs/config.md); delete the line or fix its name",
            )
        if not setting.accepts(value):
            raise ConfigError(
                f"{_where(path, text, key)}: key {key!r} should be {setting.kind}, got {value!r}",
                hint="fix the value, or delete the line to use the default",
            )
    return data, text


def load_config(path: Path | None = None) -> dict[str, object]:
    """The config file's settings, checked; a missing file is an empty config.

    Removed keys are left out (:func:`retired_notes` says so).

    Raises:
        ConfigError: the file is not TOML, a key is no setting, or a value has the wrong type.
    """
    got = _read(path or config_path())
    if got is None:
        return {}
    return {k: v for k, v in got[0].items() if k not in RETIRED}


def retired_notes(path: Path | None = None) -> list[str]:
    """One note per removed key the config file still holds, naming the file, the line and what replaced it.

    An unreadable or invalid file has no notes (:func:`load_config` reports it).
    """
    path = path or config_path()
    try:
        got = _read(path)
    except ConfigError:
        return []
    if got is None:
        return []
    data, text = got
    return [
        f"{_where(path, text, key)}: {retired_message(key)}; the line is ignored, delete it"
        for key in data
        if key in RETIRED
    ]


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def save_config(updates: dict[str, object], path: Path | None = None) -> Path:
    """Merge ``updates`` into the config file, atomically.

    A config file that does not parse is renamed aside first, never lost. Removed keys the
    file still holds are written back as they were (they are the user's lines).
    """
    path = path or config_path()
    try:
        got = _read(path)
        current = dict(got[0]) if got is not None else {}
    except ConfigError:
        if not gate.is_regular_or_absent(path):
            raise  # a FIFO, device or folder named config.toml is not ours to move or replace
        current = {}
        if path.exists():
            path.rename(path.with_name(f"{path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}"))
    current.update(updates)
    lines = ["# triage settings (docs/config.md).\n"]
    for key in sorted(current):
        value = current[key]
        if isinstance(value, dict | list):
            continue  # flat file: nested tables are not ours to rewrite
        lines.append(f"{key} = {_toml_value(value)}\n")
    return write_text_atomic(path, "".join(lines))
