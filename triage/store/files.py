"""Writing files so that a crash or a full disk never leaves half of one behind."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


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


def json_safe(value: Any) -> Any:
    """``value`` with NaN and infinities (which are not JSON) replaced by None, at any depth."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def write_json_atomic(path: str | Path, value: Any) -> Path:
    """Write ``value`` as indented JSON (NaN as null), atomically."""
    return write_text_atomic(path, json.dumps(json_safe(value), indent=2, ensure_ascii=False) + "\n")
