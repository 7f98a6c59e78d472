"""Writing files so that a crash or a full disk never leaves half of one behind."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file and a rename.

    The folder is created. Readers see the old file or the new one, never a
    part of it; on failure the temporary file is removed and the error raised.

    Raises:
        OSError: the folder or the file cannot be written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file and a rename (see :func:`write_text_atomic`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def json_safe(value: object) -> object:
    """``value`` with NaN and infinities (which are not JSON) replaced by None, at any depth."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def write_json_atomic(path: str | Path, value: object) -> Path:
    """Write ``value`` as indented JSON (NaN as null), atomically."""
    return write_text_atomic(path, json.dumps(json_safe(value), indent=2, ensure_ascii=False) + "\n")


def move_aside(path: Path) -> Path | None:
    """Rename ``path`` (and its ``-wal``/``-shm``) to ``<name>.bad-<time>``.

    Returns:
        The new path, or None when there was nothing to move (no message may then
        say that something was moved).
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.bad-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.bad-{stamp}-{n}")
    moved = False
    if path.exists() or path.is_symlink():
        os.replace(path, aside)
        moved = True
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, aside.with_name(aside.name + suffix))
            moved = True
    return aside if moved else None


def set_aside(path: Path, what: str, reason: str) -> str:
    """Move a damaged stored file out of the way (``NAME.bad-TIME``) and say so in one line.

    Stored files (heads, calibrations) are found by name on every run: left in
    place, one damaged file would cost every score. Moved aside, it is kept for
    whoever wants to look at it, and nothing reads it again.
    """
    try:
        aside = move_aside(path)
    except OSError as exc:
        return f"{what} {path} is damaged ({reason}) and cannot be moved aside ({exc.strerror or exc}); delete it"
    if aside is None:
        return f"{what} {path} is damaged ({reason}); it is gone already"
    return f"{what} {path.name} is damaged ({reason}); moved it aside to {aside}, scoring goes on without it"
