"""Read a helpdesk export as a stream of records: CSV, JSON Lines, a JSON array or Parquet.

The format is chosen by content first (Parquet's ``PAR1`` magic, a JSON array's ``[``, a JSON
object's ``{``, else a CSV whose delimiter the sniffer or the header line reveals) and by the
file's extension when the content allows both. Text is UTF-8, with or without a BOM. A byte
that is not UTF-8 is read as Windows-1252 (Latin-1 for the five bytes Windows-1252 leaves
undefined), that byte only: one Windows-1252 row does not turn every UTF-8 row into mojibake.
:attr:`Export.notice` names the lines that had such bytes, in one line. A NUL byte is the
error of the record that holds it, named with its line; a file that starts with many is binary.
A JSON record nested deeper than :data:`~triage.bounded.MAX_DEPTH` levels, or holding a
number past Python's digit limit, is that record's error.

Memory stays bounded by one record (one CSV row, one JSON line or element, one Parquet
batch): nothing here holds the whole file. One cell may hold at most :data:`MAX_CELL`
characters; the csv module's own limit (128 KiB) is raised to it on purpose, and a larger
cell stops the read with its row named (a ticket that size is not a ticket: the model reads
a few thousand tokens at most).
"""

from __future__ import annotations

import codecs
import csv
import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Literal

from triage import gate
from triage.bounded import MAX_DEPTH, Bounded, json_depth, loads_json
from triage.errors import InputError

Format = Literal["csv", "jsonl", "json", "parquet"]
FORMATS: tuple[Format, ...] = ("csv", "jsonl", "json", "parquet")
SUFFIXES: dict[str, Format] = {
    ".csv": "csv",
    ".tsv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}
MAX_CELL = 8 * 1024 * 1024  # characters in one cell; see the module docstring
CHUNK = 1 << 20
SNIFF_BYTES = 64 * 1024
PEEK_RECORDS = 200  # JSON records looked at to list the columns an export has
DELIMITERS = ",;\t|"


@dataclass(frozen=True)
class Record:
    """One record of an export: its data (nested dicts for JSON and Parquet structs), or why it has none.

    ``n`` counts records from 1; ``where`` names it for messages (``row 3 (line 5)``, ``line 7``).
    """

    n: int
    where: str
    data: dict[str, object] | None
    error: str | None = None


@dataclass
class Export:
    """An opened export: its format, encoding and columns; :meth:`records` streams it."""

    path: Path
    format: Format
    encoding: str | None = None  # None for Parquet
    notice: str | None = None  # one line when the file is not UTF-8
    delimiter: str | None = None
    _columns: list[str] | None = None
    _peeked: list[Record] = field(default_factory=list)
    _stream: Iterator[Record] | None = None

    @property
    def columns(self) -> list[str]:
        """The column names (dotted paths into nested JSON and Parquet structs), in file order."""
        if self._columns is None and self.format == "csv":
            self._columns = _csv_header(self.path, self.encoding or "utf-8", self.delimiter or ",")
        if self._columns is None:
            self._stream = self._read()
            seen: dict[str, None] = {}
            for rec in self._stream:
                self._peeked.append(rec)
                if rec.data is not None:
                    for name in flat_names(rec.data):
                        seen.setdefault(name, None)
                if len(self._peeked) >= PEEK_RECORDS:
                    break
            self._columns = list(seen)
        return self._columns

    def records(self) -> Iterator[Record]:
        """Every record, in file order (once: the file is streamed, not held)."""
        if self._stream is not None:
            peeked, stream = self._peeked, self._stream
            self._peeked, self._stream = [], None
            return chain(peeked, stream)
        return self._read()

    def _read(self) -> Iterator[Record]:
        if self.format == "parquet":
            return _parquet_records(self.path)
        if self.format == "csv":
            return _csv_records(self.path, self.encoding or "utf-8", self.delimiter or ",")
        if self.format == "jsonl":
            return _jsonl_records(self.path, self.encoding or "utf-8")
        return _json_array_records(self.path, self.encoding or "utf-8")


def flat_names(data: dict[str, object], prefix: str = "") -> Iterator[str]:
    """Dotted names of a record's values: ``{"ticket": {"subject": ...}}`` -> ``ticket.subject``.

    A nested object is also a name of its own (``labels`` as well as ``labels.queue``).
    """
    for key, value in data.items():
        name = f"{prefix}{key}"
        yield name
        if isinstance(value, dict):
            yield from flat_names(value, f"{name}.")


def open_export(path: str | Path, what: str = "export") -> Export:
    """Open an export, choosing its format and encoding (see the module docstring).

    Raises:
        InputError: the file is missing, a folder, empty, binary, or not CSV/JSON/Parquet.
    """
    path = Path(path).expanduser()
    try:
        with gate.open_binary(path, "export") as fh:
            head = fh.read(SNIFF_BYTES)
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory; pass the {what} file itself") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    suffix = SUFFIXES.get(path.suffix.lower())
    if head.startswith(b"PAR1"):
        return Export(path, "parquet")
    if suffix == "parquet":
        raise InputError(f"{path} is named .parquet but is not a Parquet file (no PAR1 magic)")
    if not head.strip(b" \t\r\n\xef\xbb\xbf"):
        raise InputError(f"the {what} {path} is empty", hint="export the tickets again; the file holds no rows")
    nuls = head.count(b"\x00")  # a few are the rows that hold them (named there); many are a binary file
    if (nuls >= 16 and nuls * 100 > len(head)) or head.startswith((b"\x00", b"\xff\xfe", b"\xfe\xff")):
        line = _nul_line(head) if b"\x00" in head else 1
        raise InputError(
            f"{path} is not a CSV, JSON Lines, JSON or Parquet export (it holds binary data: NUL bytes from line "
            f"{line} on)",
            hint="export the tickets as CSV, JSON or Parquet (UTF-8 text; a UTF-16 export must be saved as UTF-8)",
        )
    encoding, notice = detect_encoding(path)
    text = head.decode("utf-8", errors=FALLBACK).lstrip("\ufeff \t\r\n")
    if text.startswith("["):
        return Export(path, "json", encoding, notice)
    if text.startswith("{"):
        return Export(path, "jsonl", encoding, notice)
    if suffix in ("json", "jsonl"):
        raise InputError(f"{path} is named {path.suffix} but does not start with a JSON object or array")
    delimiter = sniff_delimiter(text, tab=path.suffix.lower() == ".tsv")
    if delimiter is None:
        raise InputError(
            f"{path} is not a CSV, JSON Lines, JSON or Parquet export: its first line has no ',', ';', tab or '|' "
            "between column names",
            hint="export the tickets as CSV with a header row (or JSON / Parquet)",
        )
    return Export(path, "csv", encoding, notice, delimiter)


FALLBACK = "triage-cp1252"  # the decoding error handler: a byte that is not UTF-8 as Windows-1252 (or Latin-1)


def _cp1252_bytes(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    text = "".join(bytes([b]).decode("cp1252", errors="ignore") or chr(b) for b in bad)
    return text, exc.end


codecs.register_error(FALLBACK, _cp1252_bytes)


def detect_encoding(path: Path) -> tuple[str, str | None]:
    """``utf-8-sig``, and a notice naming the lines with bytes that are not UTF-8 (read as Windows-1252), or None.

    Reads the file once in chunks (bounded memory): a fast whole-file check first, and only when
    it fails a line-by-line one to name the lines.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with gate.open_binary(path, "export") as fh:
            while chunk := fh.read(CHUNK):
                decoder.decode(chunk)
        decoder.decode(b"", final=True)
        return "utf-8-sig", None
    except UnicodeDecodeError:
        pass
    line, bad, first = 1, 0, None
    line_bad = False
    decoder = codecs.getincrementaldecoder("utf-8")()
    with gate.open_binary(path, "export") as fh:
        while piece := fh.readline(CHUNK):
            ends = piece.endswith(b"\n")
            if not line_bad:
                try:
                    decoder.decode(piece, final=ends)
                except UnicodeDecodeError as exc:
                    line_bad = True
                    if first is None:
                        first = (line, exc.object[exc.start] if exc.start < len(exc.object) else 0)
            if ends:
                bad += line_bad
                line, line_bad = line + 1, False
                decoder.reset()
        if not line_bad:
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                line_bad = True
                first = first or (line, 0)
        bad += line_bad
    where = f"line {first[0]} (byte 0x{first[1]:02x})" if first else "its last line"
    more = f" and {bad - 1} more line(s)" if bad > 1 else ""
    return "utf-8-sig", (
        f"{path} is not UTF-8 on {where}{more}: those bytes read as Windows-1252, all the rest as UTF-8"
    )


def _nul_line(head: bytes) -> int:
    return head.count(b"\n", 0, head.index(b"\x00")) + 1


def sniff_delimiter(sample: str, *, tab: bool = False) -> str | None:
    """The CSV delimiter: the sniffer's, else the one the header line has most of; None when there is none."""
    if tab:
        return "\t"
    header = sample.split("\n", 1)[0]
    counts = {d: header.count(d) for d in DELIMITERS}
    try:
        found = csv.Sniffer().sniff(sample, delimiters=DELIMITERS).delimiter
        if counts.get(found, 0) > 0:
            return found
    except csv.Error:
        pass
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] > 0 else None


@contextmanager
def _csv_limit() -> Iterator[None]:
    previous = csv.field_size_limit(MAX_CELL)
    try:
        yield
    finally:
        csv.field_size_limit(previous)


def _csv_header(path: Path, encoding: str, delimiter: str) -> list[str]:
    with gate.open_text(path, "export", encoding=encoding, errors=FALLBACK, newline="") as fh, _csv_limit():
        try:
            header = next(csv.reader(fh, delimiter=delimiter, quotechar='"', doublequote=True), None)
        except csv.Error as exc:
            raise InputError(f"{path} line 1: not a valid CSV header ({exc})") from None
    return _unique([h.strip() or f"column {i}" for i, h in enumerate(header or [], 1)])


def _csv_records(path: Path, encoding: str, delimiter: str) -> Iterator[Record]:
    with gate.open_text(path, "export", encoding=encoding, errors=FALLBACK, newline="") as fh, _csv_limit():
        reader = csv.reader(fh, delimiter=delimiter, quotechar='"', doublequote=True, strict=False)
        try:
            header = next(reader, None)
            if header is None:
                raise InputError(f"the export {path} is empty")
            names = _unique([h.strip() or f"column {i}" for i, h in enumerate(header, 1)])
            n = 0
            for fields in reader:
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    continue  # a blank line
                n += 1
                where = f"row {n} (line {reader.line_num})"
                if len(fields) > len(names):
                    yield Record(n, where, None, f"has {len(fields)} fields, the header has {len(names)}")
                    continue
                nul = next((i for i, f in enumerate(fields) if "\x00" in f), None)
                if nul is not None:
                    yield Record(n, where, None, f"holds a NUL byte (in column {names[nul]!r}); the row is not text")
                    continue
                fields += [""] * (len(names) - len(fields))
                yield Record(n, where, dict(zip(names, fields, strict=True)))
        except csv.Error as exc:
            line = reader.line_num
            if "field larger than field limit" in str(exc):
                raise InputError(
                    f"{path} line {line}: a cell is larger than {MAX_CELL // (1024 * 1024)} MiB "
                    "(triage's limit for one cell)",
                    hint="cut that cell (the model reads a few thousand tokens of a ticket at most) or remove the row",
                ) from None
            raise InputError(f"{path} line {line}: not valid CSV ({exc})") from None


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return out


def _json_error(exc: json.JSONDecodeError) -> str:
    where = f"column {exc.colno}" if exc.msg.endswith(" at") else f"at column {exc.colno}"
    return f"not valid JSON ({exc.msg} {where})"


def _jsonl_records(path: Path, encoding: str) -> Iterator[Record]:
    with gate.open_text(path, "export", encoding=encoding, errors=FALLBACK, newline="") as fh:
        n = 0
        for line_no, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            n += 1
            if len(raw) > MAX_CELL:
                raise InputError(
                    f"{path} line {line_no} is larger than {MAX_CELL // (1024 * 1024)} MiB "
                    "(triage's limit for one record)",
                    hint="cut that ticket's text or remove the line",
                )
            if "\x00" in raw:
                yield Record(n, f"line {line_no}", None, f"holds a NUL byte (at column {raw.index(chr(0)) + 1})")
                continue
            try:
                obj = loads_json(raw)
            except json.JSONDecodeError as exc:
                yield Record(n, f"line {line_no}", None, _json_error(exc))
                continue
            except Bounded as exc:
                yield Record(n, f"line {line_no}", None, f"not read: {exc}")
                continue
            if not isinstance(obj, dict):
                yield Record(n, f"line {line_no}", None, f"expected a JSON object, got {type(obj).__name__}")
                continue
            yield Record(n, f"line {line_no}", obj)


_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|"|[\[\]{}]', re.S)


def _value_end(buf: str, pos: int) -> tuple[int | None, int]:
    """Where the JSON value at ``buf[pos]`` ends, and how deep it nests; end None when ``buf`` ends first.

    No recursion and no parsing: strings are skipped, brackets counted (for a value too deep to decode).
    """
    depth = deepest = 0
    for m in _JSON_TOKENS.finditer(buf, pos):
        tok = m.group()
        if tok == '"':
            return None, deepest  # a string not closed in what was read yet
        if tok[0] == '"':
            if depth == 0:
                return m.end(), deepest
            continue
        depth += 1 if tok in "[{" else -1
        deepest = max(deepest, depth)
        if depth <= 0:
            return m.end(), deepest
    return None, deepest


def _json_array_records(path: Path, encoding: str) -> Iterator[Record]:
    """The elements of a top-level JSON array, one at a time (``raw_decode`` over a growing window).

    An element nested deeper than :data:`MAX_DEPTH` (or with a number past Python's digit limit)
    is that element's error; the next elements are read. ``where`` names the element and its line.
    """
    decoder = json.JSONDecoder()
    with gate.open_text(path, "export", encoding=encoding, errors=FALLBACK, newline="") as fh:
        buf = fh.read(CHUNK).lstrip("\ufeff \t\r\n")
        if not buf.startswith("["):
            raise InputError(f"{path} does not start with a JSON array")
        pos, n, eof = 1, 0, False
        line, counted = 1, 0  # the line of buf[counted]

        def where_at(i: int) -> str:
            nonlocal line, counted
            line += buf.count("\n", counted, i)
            counted = i
            return f"element {n} (line {line})"

        def more() -> None:
            nonlocal buf, pos, eof, counted, line
            line += buf.count("\n", counted, pos)
            chunk = fh.read(CHUNK)
            buf, pos, eof, counted = buf[pos:] + chunk, 0, not chunk, 0

        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                pos += 1
            if pos >= len(buf) and not eof:
                more()
                continue
            if pos < len(buf) and buf[pos] == "]":
                return
            if pos >= len(buf):
                raise InputError(f"{path}: the JSON array is not closed (no ']' at the end)")
            problem = None
            try:
                obj, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as exc:
                if eof:
                    at = line + buf.count("\n", counted, pos)
                    raise InputError(f"{path} element {n + 1}: {_json_error(exc)} (it begins on line {at})") from None
                if len(buf) - pos > MAX_CELL:
                    raise InputError(
                        f"{path} element {n + 1} is larger than {MAX_CELL // (1024 * 1024)} MiB "
                        "(triage's limit for one record)"
                    ) from exc
                more()
                continue
            except (RecursionError, ValueError) as exc:  # too deep for the decoder, or a number too long
                stop, depth = _value_end(buf, pos)
                if stop is None:
                    if eof:
                        raise InputError(f"{path} element {n + 1}: the JSON array is not closed") from None
                    if len(buf) - pos > MAX_CELL:
                        raise InputError(
                            f"{path} element {n + 1} is larger than {MAX_CELL // (1024 * 1024)} MiB "
                            "(triage's limit for one record)"
                        ) from exc
                    more()
                    continue
                obj, end = None, stop
                problem = (
                    f"it is nested {depth:,} levels deep (at most {MAX_DEPTH} are read)"
                    if isinstance(exc, RecursionError) or depth > MAX_DEPTH
                    else f"it holds a number of more than {sys.get_int_max_str_digits():,} digits"
                )
            n += 1
            where = where_at(pos)
            if problem is None and (depth := json_depth(buf[pos:end])) > MAX_DEPTH:
                problem = f"it is nested {depth:,} levels deep (at most {MAX_DEPTH} are read)"
            pos = end
            if problem is not None:
                yield Record(n, where, None, f"not read: {problem}")
            elif not isinstance(obj, dict):
                yield Record(n, where, None, f"expected a JSON object, got {type(obj).__name__}")
            else:
                yield Record(n, where, obj)
            if pos > CHUNK:  # drop what was read, keep memory at about one chunk and one element
                line += buf.count("\n", counted, pos)
                buf, pos, counted = buf[pos:], 0, 0


def _parquet_records(path: Path) -> Iterator[Record]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"reading {path} needs pyarrow", hint="pip install pyarrow (or 'triage[ray]')") from None
    try:
        fd, _ = gate.open_fd(path, "export")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        try:
            pfile = pq.ParquetFile(fh)  # the descriptor the gate checked
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise InputError(f"cannot read {path} as Parquet: {exc}") from None
        n = 0
        for batch in pfile.iter_batches(batch_size=2048):
            for data in batch.to_pylist():
                n += 1
                yield Record(n, f"row {n}", data)
