"""The gate: every file triage reads that a user or another process could have replaced comes through here.

One place decides the three things issue 42 kept finding surface by surface:

- **File type.** A path is opened with ``O_NONBLOCK`` (a FIFO never blocks the open) and the
  descriptor is ``fstat``-ed: only a regular file is read (symlinks are followed). A FIFO, a
  device, a socket or a folder is refused with :class:`NotARegularFile` (an ``OSError``; a
  folder's is also an ``IsADirectoryError``) whose ``strerror`` says what it is and what to do.
- **Size.** The size is checked (``fstat``) before anything is read, against the bound of the
  file's kind in :data:`KINDS`; a read never reads past the bound (a file growing meanwhile is
  cut and refused). Past the bound: :class:`TooLarge` (a :class:`~triage.bounded.Bounded`).
- **Depth.** JSON and TOML are parsed under :data:`~triage.bounded.MAX_DEPTH`: JSON as
  :func:`triage.bounded.loads_json` does, TOML by :func:`toml_depth` on the text first
  (``tomllib`` recurses, and a dotted key ``a.b.c...`` builds a dict as deep as its dots).

Callers turn these errors into their own messages (a cache file failing the gate is a miss; a
file the user named is an ``InputError``). A path that must be handed to another library
(SQLite, llama.cpp) is checked with :func:`check_regular` first.
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import stat
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from triage.bounded import _CHUNK, MAX_DEPTH, MAX_LINE, Bounded, _no_duplicate_keys, _split, loads_json, mib
from triage.errors import InputError

_UNBOUNDED = 1 << 62  # a kind whose size is not bounded: it is read as a stream or only in part


@dataclass(frozen=True)
class Kind:
    """A kind of file: how messages name it and the most bytes of it triage reads."""

    what: str
    limit: int
    why: str  # why the bound is what it is (docs/hardening.md lists them)


# Every kind of file triage reads, with its bound. A real file of each kind is far below it.
KINDS: dict[str, Kind] = {
    "config": Kind("config file", 1 << 20, "a flat table of a few dozen settings is a few KB"),
    "pack": Kind("pack file", 16 << 20, "a pack with examples is tens of KB"),
    "catalog": Kind("model catalog", 4 << 20, "a few dozen models are a few KB"),
    "stable-state": Kind("stable cache file", 2 << 30, "a stable block's KV state is at most a few hundred MB"),
    "stable-last": Kind("stable cache record", 64 << 10, "three names and a process id"),
    "head": Kind("head file", 256 << 20, "a head is a few hundred KB"),
    "calibration": Kind("calibration file", 16 << 20, "a few numbers per criterion"),
    "prior": Kind("prior file", 16 << 20, "a few numbers per criterion"),
    "sha-cache": Kind("sha256 cache", 16 << 20, "one line per model file"),
    "model-record": Kind("model record", 1 << 20, "a model's source and sha256"),
    "run-record": Kind("run record", 16 << 20, "a run's options and counts"),
    "token": Kind("token file", 4 << 10, "a token is one short line"),
    "fit-lock": Kind("fit lock", 64, "the fitting process's id"),
    "run-output": Kind("scored output", _UNBOUNDED, "a run's own output, read back to resume it"),
    "model": Kind("model file", _UNBOUNDED, "only the GGUF header is read by triage; llama.cpp maps the rest"),
    "export": Kind("export", _UNBOUNDED, "read as a stream: memory is bounded per row"),
    "labels": Kind("label file", _UNBOUNDED, "read as a stream: memory is bounded per line"),
    "sniff": Kind("file", _UNBOUNDED, "only its first bytes are read, to tell what it is"),
    "eval-cache": Kind("eval readout cache", _UNBOUNDED, "SQLite reads it in pages"),
}

_TYPES = (
    (stat.S_ISDIR, "a folder", "pass a file inside it"),
    (stat.S_ISFIFO, "a FIFO (named pipe)", "triage reads only regular files"),
    (stat.S_ISCHR, "a character device", "triage reads only regular files"),
    (stat.S_ISBLK, "a block device", "triage reads only regular files"),
    (stat.S_ISSOCK, "a socket", "triage reads only regular files"),
)


class NotARegularFile(OSError):
    """The path is a FIFO, a device, a socket or a folder: ``strerror`` says which and what to do."""


class FolderNotFile(NotARegularFile, IsADirectoryError):
    """The path is a folder."""


class TooLarge(Bounded):
    """The file is larger than its kind's bound."""


def file_type(mode: int) -> str:
    """What a file of ``mode`` is, for messages: ``a FIFO (named pipe)``, ``a folder``, ``a regular file``."""
    for test, name, _ in _TYPES:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def refusal(path: str | Path, mode: int) -> NotARegularFile:
    """The error for ``path`` of ``mode`` (not a regular file)."""
    for test, name, todo in _TYPES:
        if test(mode):
            cls = FolderNotFile if test is stat.S_ISDIR else NotARegularFile
            return cls(errno.EINVAL, f"it is {name}, not a regular file ({todo})", str(path))
    return NotARegularFile(errno.EINVAL, "it is not a regular file (triage reads only regular files)", str(path))


def _kind(kind: str) -> Kind:
    return KINDS[kind]


def check_size(size: int, kind: str, path: str | Path | None = None) -> None:
    """Raise :class:`TooLarge` when ``size`` bytes is past ``kind``'s bound."""
    k = _kind(kind)
    if size > k.limit:
        raise TooLarge(f"it is {size:,} bytes; a {k.what} is at most {mib(k.limit)}")


def open_fd(path: str | Path, kind: str) -> tuple[int, os.stat_result]:
    """A read-only descriptor of ``path`` and its ``fstat``, once it is known to be a regular file within bounds.

    Opened with ``O_NONBLOCK`` (cleared again afterwards) and ``O_NOCTTY``, so neither a FIFO
    nor a terminal blocks or is taken over.

    Raises:
        NotARegularFile: a FIFO, device, socket or folder (nothing is read from it).
        TooLarge: larger than the kind's bound.
        OSError: as ``open`` raises it (``FileNotFoundError``, ``PermissionError``, ...).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket cannot be opened: say what it is
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):
                raise refusal(path, st.st_mode) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise refusal(path, st.st_mode)
        check_size(st.st_size, kind, path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


@contextmanager
def open_binary(path: str | Path, kind: str) -> Iterator[IO[bytes]]:
    """``path`` opened for reading in binary, through the gate (:func:`open_fd`'s errors)."""
    fd, _ = open_fd(path, kind)
    with os.fdopen(fd, "rb") as fh:
        yield fh


@contextmanager
def open_text(
    path: str | Path, kind: str, *, encoding: str = "utf-8", errors: str = "strict", newline: str | None = None
) -> Iterator[IO[str]]:
    """``path`` opened for reading as text, through the gate (:func:`open_fd`'s errors)."""
    fd, _ = open_fd(path, kind)
    with os.fdopen(fd, "rb") as raw, io.TextIOWrapper(raw, encoding=encoding, errors=errors, newline=newline) as fh:
        yield fh


def read_bytes(path: str | Path, kind: str) -> bytes:
    """The bytes of ``path``, at most the kind's bound (:func:`open_fd`'s errors)."""
    limit = _kind(kind).limit
    fd, st = open_fd(path, kind)
    chunks: list[bytes] = []
    got = 0
    with os.fdopen(fd, "rb", buffering=0) as fh:
        want = st.st_size + 1  # one read of what fstat said; a file growing meanwhile is read on, to the bound
        while got <= limit and (chunk := fh.read(min(limit + 1 - got, max(want - got, 1 << 16)))):
            chunks.append(chunk)
            got += len(chunk)
    if got > limit:
        raise TooLarge(f"it grew past {mib(limit)} while it was read; a {_kind(kind).what} is at most that")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_text(path: str | Path, kind: str) -> str:
    """The UTF-8 text of ``path`` (:func:`read_bytes`' errors, and ``UnicodeDecodeError``)."""
    return read_bytes(path, kind).decode("utf-8")


def load_json(path: str | Path, kind: str, *, max_depth: int = MAX_DEPTH) -> object:
    """The JSON in ``path``, bounded in size and nesting.

    Raises:
        Bounded: too large, nested too deep, or a number past Python's digit limit.
        ValueError: not UTF-8 (``UnicodeDecodeError``) or not JSON (``json.JSONDecodeError``).
        OSError: as :func:`open_fd`.
    """
    return loads_json(read_text(path, kind), max_depth=max_depth)


# --- TOML under a depth bound --------------------------------------------------------------

# Strings (multi-line first) and comments, each matched where it starts; what is left is structure.
# Possessive throughout (no backtracking marks: a greedy (?:a|b)* costs 146 bytes a character).
_TOML_SKIP = re.compile(
    r'"""(?:[^"\\]++|\\.|"(?!""))*+"""|'
    r"'''(?:[^']++|'(?!''))*+'''|"
    r'"(?:[^"\\\n]++|\\.)*+"|'
    r"'[^'\n]*+'|"
    r"#[^\n]*+",
    re.S,
)
_TOML_MARKS = re.compile(r"[\[\]{}=,.\n]")


def toml_depth(text: str) -> int:
    """A bound on how deeply ``tomllib`` nests the tables and arrays of TOML ``text`` (no recursion).

    The document is 1 (a table). Counted conservatively, strings and comments skipped: each ``[``
    and ``{`` of a value one level inside what holds it; each dot of a key one table more (``a.b.c =
    1`` is three tables deep), and a key's value inside its last table; a table header's last name
    one table (two for ``[[header]]``), each name before it two (it may name an array of tables),
    and the keys under it start there. Dots in values (``0.5``)
    do not count.
    """
    if not any(ch in text for ch in "[{."):
        return 1
    body = _TOML_SKIP.sub("_", text)
    stack: list[tuple[str, int]] = []  # open values: ("[", depth) an array, ("{", depth) an inline table
    table = 1  # the depth of the current [table]
    deepest = 1
    in_key, key_dots, parent = True, 0, 1  # at a key, its dots so far; the depth a value's container is in
    in_header, header_dots, double = False, 0, False
    line_start = True
    for m in _TOML_MARKS.finditer(body):
        ch = m.group()
        if in_header:
            if ch == ".":
                header_dots += 1
            elif ch == "[":
                double = True  # the second bracket of [[
            elif ch in "]\n":
                in_header, in_key = False, False  # what follows on its line: the second ] or nothing
                table = 1 + 2 * header_dots + 1 + double  # a segment before the last may be an [[array]]
                deepest = max(deepest, table)
                if ch == "\n":
                    in_key, key_dots, line_start = True, 0, True
            continue
        if ch == "\n":
            if not stack:
                in_key, key_dots, line_start = True, 0, True
            continue
        if ch == "[" and line_start and not stack:
            in_header, header_dots, double, line_start = True, 0, False, False
            continue
        line_start = False
        if in_key:
            if ch == ".":
                key_dots += 1
            elif ch == "=":
                parent = (stack[-1][1] if stack else table) + key_dots
                deepest = max(deepest, parent)
                in_key, key_dots = False, 0
            elif ch == "}" and stack and stack[-1][0] == "{":  # an empty inline table
                stack.pop()
                in_key = False
                if stack and stack[-1][0] == "[":
                    parent = stack[-1][1]
            continue
        if ch in "[{":
            depth = parent + 1
            deepest = max(deepest, depth)
            stack.append((ch, depth))
            if ch == "{":
                in_key, key_dots = True, 0
            else:
                parent = depth
        elif ch in "]}":
            if stack:
                stack.pop()
            if stack and stack[-1][0] == "[":
                parent = stack[-1][1]
        elif ch == "," and stack:
            if stack[-1][0] == "{":
                in_key, key_dots = True, 0
            else:
                parent = stack[-1][1]
    return deepest


def loads_toml(text: str, *, max_depth: int = MAX_DEPTH) -> dict[str, object]:
    """``tomllib.loads`` that refuses deep nesting with a :class:`~triage.bounded.Bounded` error.

    Raises:
        Bounded: nested deeper than ``max_depth`` (:func:`toml_depth`).
        tomllib.TOMLDecodeError: not TOML.
    """
    if (depth := toml_depth(text)) > max_depth:
        raise Bounded(f"it is nested {depth:,} levels deep (at most {max_depth} are read)")
    try:
        return tomllib.loads(text)
    except RecursionError:  # pragma: no cover - the depth check above comes first
        raise Bounded(f"it is nested too deep (at most {max_depth} levels are read)") from None


def load_toml(path: str | Path, kind: str, *, max_depth: int = MAX_DEPTH) -> dict[str, object]:
    """The TOML in ``path``, bounded in size and nesting (:func:`read_text`'s and :func:`loads_toml`'s errors)."""
    return loads_toml(read_text(path, kind), max_depth=max_depth)


# --- paths handed to another library ----------------------------------------------------------


def check_regular(path: str | Path, kind: str, *, missing_ok: bool = False) -> os.stat_result | None:
    """Check that ``path`` is a regular file within bounds before SQLite or llama.cpp opens it itself.

    The check opens it as :func:`open_fd` does (so a FIFO cannot block it) and closes it again.
    Returns its ``fstat``, or None when it does not exist and ``missing_ok``.

    Raises:
        NotARegularFile, TooLarge, OSError: as :func:`open_fd`.
    """
    try:
        fd, st = open_fd(path, kind)
    except FileNotFoundError:
        if missing_ok and not os.path.lexists(path):
            return None
        raise
    os.close(fd)
    return st


def is_regular_or_absent(path: str | Path) -> bool:
    """Whether ``path`` is a regular file (symlinks followed) or nothing at all; never opens it.

    For a cache's own files before it writes over them: a FIFO, a device or a folder a
    user put there is left alone.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return not os.path.lexists(path)  # a dangling symlink is not ours either
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode)


def not_a_folder(path: str | Path) -> str | None:
    """Why ``path``'s folder cannot exist (``NotADirectoryError``): ``"/x is a regular file, not a folder"``; else None.

    Names the nearest ancestor that exists and is no folder (``TRIAGE_HOME`` naming a file, say).
    """
    for parent in Path(path).parents:
        try:
            st = os.stat(parent)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            return None
        return f"{parent} is {file_type(st.st_mode)}, not a folder"
    return None


# --- a JSON Lines file read as a stream (label --file) ------------------------------------------


def iter_json_lines(
    path: str | Path, what: str, *, max_line: int = MAX_LINE
) -> Iterator[tuple[int, object, str | None]]:
    """A JSON Lines file as a stream of ``(line number, object, None)`` or ``(line number, None, error)``.

    Memory is bounded by one line. Lines end in ``\n`` (a trailing ``\r`` dropped), or in ``\r``
    when the file's first 64 KiB have carriage returns and no ``\n`` (old Mac line ends). Each
    line is its own UTF-8 (a BOM on the first is dropped): a line that is not UTF-8, holds a NUL
    byte, is nested deeper than :data:`MAX_DEPTH`, gives one key two values, or is not JSON is
    that line's error.

    Raises:
        InputError: the file is missing, a folder, a FIFO or device, or unreadable, or a line is longer
            than ``max_line`` (reading stops there: a row of labels is not megabytes; this is not the right file).
    """
    path = Path(path)
    try:
        fd, _ = open_fd(path, "labels")  # a FIFO, device or folder is refused, never waited on
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory; pass the {what} itself") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
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
