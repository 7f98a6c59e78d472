"""Bounded readers: every file and JSON text triage reads has a size and a depth limit.

A hostile or damaged input must cost a clear message, never a ``MemoryError``
(``score /dev/zero``), a ``RecursionError`` (JSON nested 200,000 deep) or a
traceback from Python's 4,300-digit limit on integers. These helpers check
before they allocate or recurse; the callers turn their :class:`Bounded` error
into the right per-row error or :class:`~triage.errors.InputError`.

A file is opened through :mod:`triage.gate` (regular files only, a bound per kind); here are the
text-level bounds it and the stream readers share. :func:`read_bounded` is for what may be a
stream on purpose: a ticket file (``score <(cmd)``) and standard input.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

MAX_DEPTH = 64  # nesting of arrays and objects; triage's own files need 4
MAX_LINE = 8 << 20  # bytes in one line of a JSON Lines file read as a stream (a label row is a few hundred)
_CHUNK = 1 << 16
# Possessive (no backtracking): a greedy (?:a|b)* keeps a backtracking mark per character, 146 bytes
# each (a 1 MiB string cost 153 MB); this costs nothing.
_STRINGS = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.S)
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


def loads_json(
    text: str,
    *,
    max_depth: int = MAX_DEPTH,
    object_pairs_hook: Callable[[list[tuple[str, object]]], object] | None = None,
) -> object:
    """``json.loads`` that refuses deep nesting and overlong integers with a :class:`Bounded` error.

    Raises:
        Bounded: nested deeper than ``max_depth``, or an integer past Python's digit limit.
        json.JSONDecodeError: not JSON.
    """
    if text.count("[") + text.count("{") > max_depth and (depth := json_depth(text)) > max_depth:
        raise Bounded(f"it is nested {depth:,} levels deep (at most {max_depth} are read)")
    try:
        return json.loads(text, object_pairs_hook=object_pairs_hook)
    except (json.JSONDecodeError, Bounded):
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


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out and out[key] != value:
            raise Bounded(f"key {key!r} is given twice, as {out[key]!r} and {value!r}")
        out[key] = value
    return out


def _split(fh: BinaryIO, sep: bytes, limit: int, head: bytes = b"") -> Iterator[bytes]:
    """The ``sep``-separated pieces of ``head`` and then a binary stream, each at most ``limit`` bytes
    (else :class:`Bounded`)."""
    buf = bytearray(head)
    start = searched = 0
    while True:
        i = buf.find(sep, searched)
        if i >= 0:
            yield bytes(buf[start:i])
            start = searched = i + 1
            continue
        if start:
            del buf[:start]
            start = 0
        searched = len(buf)
        if len(buf) > limit:
            raise Bounded(f"it is longer than {mib(limit)}")
        chunk = fh.read(_CHUNK)
        if not chunk:
            if buf:
                yield bytes(buf)
            return
        buf += chunk
