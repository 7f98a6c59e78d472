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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MAX_DEPTH = 64  # nesting of arrays and objects; triage's own files need 4
MAX_LINE = 8 << 20  # bytes in one line of a JSON Lines file read as a stream (a label row is a few hundred)
_CHUNK = 1 << 16
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


def loads_json(text: str, *, max_depth: int = MAX_DEPTH, **kw: Any) -> Any:
    """``json.loads`` that refuses deep nesting and overlong integers with a :class:`Bounded` error.

    Raises:
        Bounded: nested deeper than ``max_depth``, or an integer past Python's digit limit.
        json.JSONDecodeError: not JSON.
    """
    if text.count("[") + text.count("{") > max_depth and (depth := json_depth(text)) > max_depth:
        raise Bounded(f"it is nested {depth:,} levels deep (at most {max_depth} are read)")
    try:
        return json.loads(text, **kw)
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


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out and out[key] != value:
            raise Bounded(f"key {key!r} is given twice, as {out[key]!r} and {value!r}")
        out[key] = value
    return out


def _split(fh: Any, sep: bytes, limit: int, head: bytes = b"") -> Iterator[bytes]:
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


def iter_json_lines(path: str | Path, what: str, *, max_line: int = MAX_LINE) -> Iterator[tuple[int, Any, str | None]]:
    """A JSON Lines file as a stream of ``(line number, object, None)`` or ``(line number, None, error)``.

    Memory is bounded by one line. Lines end in ``\n`` (a trailing ``\r`` dropped), or in ``\r``
    when the file's first 64 KiB have carriage returns and no ``\n`` (old Mac line ends). Each
    line is its own UTF-8 (a BOM on the first is dropped): a line that is not UTF-8, holds a NUL
    byte, is nested deeper than :data:`MAX_DEPTH`, gives one key two values, or is not JSON is
    that line's error.

    Raises:
        InputError: the file is missing, a folder or unreadable, or a line is longer than ``max_line``
            (reading stops there: a row of labels is not megabytes; this is not the right file).
    """
    from triage.errors import InputError

    path = Path(path)
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory; pass the {what} itself") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    with fh:
        n = 0
        try:
            head = fh.read(_CHUNK)
            sep = b"\r" if b"\r" in head and b"\n" not in head else b"\n"
            for n, raw in enumerate(_split(fh, sep, max_line, head), 1):
                if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                raw = raw.removesuffix(b"\r")
                if not raw.strip():
                    continue
                if b"\x00" in raw:
                    column = raw.index(b"\x00") + 1
                    yield n, None, f"holds a NUL byte (at column {column}); the line is not text"
                    continue
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    yield n, None, f"is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
                    continue
                try:
                    obj = loads_json(text, object_pairs_hook=_no_duplicate_keys)
                except json.JSONDecodeError as exc:
                    where = f"column {exc.colno}" if exc.msg.endswith(" at") else f"at column {exc.colno}"
                    yield n, None, f"not valid JSON ({exc.msg} {where})"
                    continue
                except Bounded as exc:
                    yield n, None, f"not read: {exc}"
                    continue
                yield n, obj, None
        except Bounded as exc:
            raise InputError(
                f"{what} {path} line {n + 1}: {exc}; a row of it is a few hundred bytes",
                hint="check that it is the right file",
            ) from None
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror}") from None
