"""Bounded readers: every file and JSON text triage reads has a size and a depth limit.

A hostile or damaged input must cost a clear message, never a ``MemoryError``
(``score /dev/zero``), a ``RecursionError`` (JSON nested 200,000 deep) or a
traceback from Python's 4,300-digit limit on integers. These helpers check
before they allocate or recurse; the callers turn their :class:`Bounded` error
into the right per-row error or :class:`~triage.errors.InputError`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

MAX_DEPTH = 64  # nesting of arrays and objects; triage's own files need 4
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


class Bounded(ValueError):
    """An input past a limit: the message says which limit and by how much."""


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (no recursion; strings skipped)."""
    if text.count("[") + text.count("{") == 0:
        return 0
    depth = deepest = 0
    for ch in _NOT_BRACKETS.sub("", _STRINGS.sub("", text)):
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth = max(0, depth - 1)
    return deepest


def loads_json(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` that refuses deep nesting and overlong integers with a :class:`Bounded` error.

    Raises:
        Bounded: nested deeper than ``max_depth``, or an integer past Python's digit limit.
        json.JSONDecodeError: not JSON.
    """
    if text.count("[") + text.count("{") > max_depth and (depth := json_depth(text)) > max_depth:
        raise Bounded(f"it is nested {depth:,} levels deep (at most {max_depth} are read)")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:  # pragma: no cover - the depth check above comes first
        raise Bounded(f"it is nested too deep (at most {max_depth} levels are read)") from None
    except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion"
        limit = sys.get_int_max_str_digits()
        raise Bounded(f"it holds a number of more than {limit:,} digits") from None


def read_bounded(path: str | Path, limit: int) -> bytes:
    """The bytes of ``path``, reading at most ``limit``; works for pipes and devices too.

    Raises:
        Bounded: the file holds more than ``limit`` bytes (``/dev/zero`` never ends).
        OSError: as ``open`` and ``read`` raise it.
    """
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise Bounded(f"it is larger than {mib(limit)}")
    return data


def mib(n: int) -> str:
    """``n`` bytes in MiB for messages (``64 MiB``)."""
    return f"{n / (1 << 20):g} MiB"
