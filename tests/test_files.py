"""Atomic writes: the old file or the new one, never a part, and no temporary file left behind."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from triage.store.files import json_safe, write_json_atomic, write_text_atomic


def test_write_creates_the_folder_and_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b.txt"
    assert write_text_atomic(path, "one") == path and path.read_text(encoding="utf-8") == "one"
    write_text_atomic(path, "two ✓")
    assert path.read_text(encoding="utf-8") == "two ✓"
    assert sorted(p.name for p in path.parent.iterdir()) == ["b.txt"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    write_text_atomic(path, "old")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(path, "bad \ud800 surrogate")  # fails while writing the temporary file
    assert path.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]


def test_json_nan_and_infinity_become_null(tmp_path: Path) -> None:
    value = {"a": math.nan, "b": [1.5, math.inf, (-math.inf, 2)], "c": "x"}
    assert json_safe(value) == {"a": None, "b": [1.5, None, [None, 2]], "c": "x"}
    path = write_json_atomic(tmp_path / "r.json", value)
    assert json.loads(path.read_text(encoding="utf-8")) == {"a": None, "b": [1.5, None, [None, 2]], "c": "x"}
