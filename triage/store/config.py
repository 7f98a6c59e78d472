"""The user's config file: a flat TOML table of defaults.

Known keys: ``model``, ``pack``, ``theme``, ``n_ctx``, ``threads``, ``mode``,
``orderings``, ``readout``, ``prior``, ``auto_score`` and the others in
:data:`KNOWN_KEYS`. A config file that cannot be read is never overwritten: it
is set aside as ``config.toml.bad-<time>`` before a new one is written, so nothing the user wrote is lost.
"""

from __future__ import annotations

import time
import tomllib
from pathlib import Path
from typing import Any

from triage.errors import TriageError
from triage.store.files import write_text_atomic
from triage.store.paths import user_dirs

KNOWN_KEYS: dict[str, type | tuple[type, ...]] = {
    "model": str,
    "pack": str,
    "theme": str,
    "n_ctx": int,
    "threads": int,
    "mode": str,
    "orderings": str,
    "readout": str,
    "prior": bool,
    "auto_score": bool,
    "calibration": str,
    "stable_cache_mb": int,
    "stable_cache_ttl_days": (int, float),
    "strategy": str,
    "keep_features": int,
    "auto_learn": bool,
    "auto_learn_every": int,
    "thread_cache_mib": int,  # recently scored tickets' KV state (threads); default: the context's KV size
    "pack_tokens": int,  # triage score on many tickets: tokens per packed decode (0: one ticket per decode)
    "serve_queue_limit": int,  # triage serve: requests that may wait for the engine
}


class ConfigError(TriageError):
    """The config file exists but is not valid."""


def config_path() -> Path:
    """Path of the config file (it may not exist)."""
    return user_dirs().config_file


def load_config(path: Path | None = None) -> dict[str, Any]:
    """Read the config file; a missing file is an empty config.

    Raises:
        ConfigError: the file is not TOML, or a known key has the wrong type.
    """
    path = path or config_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(
            f"config file {path} is not valid TOML: {exc}",
            hint="fix the file, or delete it to start from the defaults",
        ) from exc
    for key, value in data.items():
        want = KNOWN_KEYS.get(key)
        if want is not None and (not isinstance(value, want) or (want is int and isinstance(value, bool))):
            kind = "number" if isinstance(want, tuple) else want.__name__
            raise ConfigError(
                f"config file {path}: key {key!r} should be a {kind}, got {value!r}",
                hint="fix the value, or delete the line to use the default",
            )
    return data


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def save_config(updates: dict[str, Any], path: Path | None = None) -> Path:
    """Merge ``updates`` into the config file, atomically.

    A config file that does not parse is renamed aside first, never lost.
    """
    path = path or config_path()
    try:
        current = load_config(path)
    except ConfigError:
        current = {}
        if path.exists():
            path.rename(path.with_name(f"{path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}"))
    current.update(updates)
    lines = ["# triage settings; see `triage --help`.\n"]
    for key in sorted(current):
        value = current[key]
        if isinstance(value, dict | list):
            continue  # flat file: nested tables are not ours to rewrite
        lines.append(f"{key} = {_toml_value(value)}\n")
    return write_text_atomic(path, "".join(lines))
