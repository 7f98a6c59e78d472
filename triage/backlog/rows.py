"""The backlog's input: JSON Lines, Parquet or a helpdesk export (CSV, a JSON array), one file, a folder or a glob.

An export (a .csv/.tsv or JSON-array file, or any file when columns are named) is read
through :mod:`triage.intake` with a :class:`~triage.intake.columns.ColumnMap`
(``--text-columns``, ``--id-column``); JSON Lines and Parquet with the default columns are
read as before.

Rows are read the way ``triage score`` reads JSON Lines (the same ids, the same error
for a bad line), so a row that cannot be a ticket becomes an error record and the
others are scored. Each row has a key that identifies it in the output across runs:
the ticket id and the sha256 of its cleaned text for a ticket, and its place
(file, line) for a row that is not one.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from triage import gate
from triage.errors import InputError

if TYPE_CHECKING:
    from triage.intake.columns import ColumnMap

SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet", ".csv", ".tsv")


@dataclass(frozen=True)
class BacklogRow:
    """One input row: a ticket to score, or the error that stops it from being one."""

    key: str
    ticket_id: str | None
    text: str | None
    line: int | None
    source: str | None  # the file, when the input has several
    ticket_sha256: str | None = None
    error: str | None = None
    messages: str | None = None  # a thread's messages as JSON ([{"role", "text"}, ...]); ``text`` is then None

    def error_record(self) -> dict[str, object]:
        """The error record ``triage score`` writes for a bad row (plus ``source``)."""
        record: dict[str, object] = {"ticket_id": self.ticket_id, "line": self.line, "error": self.error}
        if self.source is not None:
            record["source"] = self.source
        if self.ticket_sha256 is not None:
            record["ticket_sha256"] = self.ticket_sha256
        return record


def ticket_key(ticket_id: str, ticket_sha256: str) -> str:
    """Key of a ticket: its id and the hash of its cleaned text."""
    return json.dumps(["ticket", ticket_id, ticket_sha256])


def row_key(source: str | None, line: int | None) -> str:
    """Key of a row that is not a ticket: where it is."""
    return json.dumps(["row", source, line])


def record_key(record: Mapping[str, object]) -> str | None:
    """The key of an output record (a result or an error record), or None if it has none."""
    tid, sha = record.get("ticket_id"), record.get("ticket_sha256")
    if isinstance(tid, str) and isinstance(sha, str):
        return ticket_key(tid, sha)
    source, line = record.get("source"), record.get("line")
    if "error" in record and isinstance(line, int) and (source is None or isinstance(source, str)):
        return row_key(source, line)
    return None  # no key, or one no row of an input has (a line that is no number)


def input_files(spec: str) -> list[Path]:
    """The files of an input: a file, a folder (its JSON Lines and Parquet files) or a glob.

    Raises:
        InputError: nothing matches, or a folder holds no input files.
    """
    path = Path(spec).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and p.suffix.lower() in SUFFIXES and not p.name.startswith((".", "_"))
        )
        if not files:
            raise InputError(f"folder {path} holds no {', '.join(SUFFIXES)} files")
        return files
    matches = sorted(Path(m) for m in glob.glob(str(path), recursive=True) if Path(m).is_file())
    if not matches:
        raise InputError(f"input {spec} does not exist and matches no files")
    return matches


def read_rows(spec: str, columns: ColumnMap | None = None) -> list[BacklogRow]:
    """Every row of the input, in order; a repeated ticket (same id and text) is kept once.

    ``columns``: a :class:`~triage.intake.columns.ColumnMap` (default: ``text`` and ``id``).

    Raises:
        InputError: no input files, an unreadable file, invalid UTF-8, no rows at all.
    """
    files = input_files(spec)
    root = Path(spec).expanduser() if Path(spec).expanduser().is_dir() else None
    many = len(files) > 1
    rows: list[BacklogRow] = []
    seen: set[str] = set()
    for f in files:
        source = (str(f.relative_to(root)) if root else str(f)) if many else None
        for row in _reader(f, columns)(f, source):
            if row.key not in seen:
                seen.add(row.key)
                rows.append(row)
    if not rows:
        raise InputError(f"the input {spec} holds no tickets")
    return rows


def _reader(path: Path, columns: ColumnMap | None) -> Callable[[Path, str | None], Iterator[BacklogRow]]:
    from triage.intake.columns import ColumnMap, is_export

    default_parquet = path.suffix.lower() == ".parquet" and not (columns and columns.explicit)
    if is_export(str(path), columns or ColumnMap()) and not default_parquet:
        export_columns = columns or ColumnMap()
        return lambda f, source: _export_rows(f, source, export_columns)
    return _parquet_rows if path.suffix.lower() == ".parquet" else _jsonl_rows


def _export_rows(path: Path, source: str | None, columns: ColumnMap) -> Iterator[BacklogRow]:
    from triage.intake.columns import export_tickets

    prefix = f"{source} " if source else ""
    for t in export_tickets(str(path), columns):
        tid = _fallback_id(t.id or f"row-{t.n}", t.n, source, t.id is not None, "row")
        if t.error is not None:
            yield BacklogRow(row_key(source, t.n), tid, None, t.n, source, error=f"{prefix}{t.error}")
            continue
        yield _make(t.n, tid, t.text, source, f"{prefix}{t.where}")


def _make(
    line: int, tid: str | None, text: object, source: str | None, where: str, messages: object = None
) -> BacklogRow:
    import json

    from triage.domain.ticket import make_ticket

    if messages is not None:
        try:
            ticket = make_ticket(None, tid, messages)
        except InputError as exc:
            return BacklogRow(row_key(source, line), tid, None, line, source, error=f"{where}: {exc.message}")
        thread = json.dumps([{"role": m.role, "text": m.text} for m in ticket.thread], ensure_ascii=False)
        return BacklogRow(
            ticket_key(ticket.id, ticket.sha256), ticket.id, None, line, source, ticket.sha256, messages=thread
        )
    if not isinstance(text, str):
        return BacklogRow(
            row_key(source, line),
            tid,
            None,
            line,
            source,
            error=f"{where} (id {tid}): field 'text' is missing or not a string",
        )
    try:
        ticket = make_ticket(text, tid)
    except InputError as exc:
        return BacklogRow(row_key(source, line), tid, None, line, source, error=f"{where}: {exc.message}")
    return BacklogRow(ticket_key(ticket.id, ticket.sha256), ticket.id, text, line, source, ticket.sha256)


def _fallback_id(tid: str, line: int, source: str | None, explicit: bool, word: str) -> str:
    # ``line-N`` (triage score's id for a row without one) is ambiguous across files.
    return tid if explicit or source is None else f"{source}:{word}-{line}"


def _jsonl_rows(path: Path, source: str | None) -> Iterator[BacklogRow]:
    from triage.domain.thread import row_body
    from triage.domain.ticket import jsonl_lines, read_text_file

    prefix = f"{source} " if source else ""
    for item in jsonl_lines(read_text_file(path, "input file")):
        n = item.line
        if item.obj is None:
            yield BacklogRow(row_key(source, n), None, None, n, source, error=f"{prefix}line {n}: {item.error}")
            continue
        explicit = item.obj.get("id") is not None and bool(str(item.obj.get("id")).strip())
        tid = _fallback_id(item.row_id(), n, source, explicit, "line")
        where = f"{prefix}line {n}"
        try:
            text, messages = row_body(item.obj)
        except InputError as exc:
            yield BacklogRow(row_key(source, n), tid, None, n, source, error=f"{where} (id {tid}): {exc.message}")
            continue
        yield _make(n, tid, text, source, where, messages)


def _parquet_rows(path: Path, source: str | None) -> Iterator[BacklogRow]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"reading {path} needs pyarrow", hint="pip install 'triage[ray]'") from None
    try:
        with gate.open_binary(path, "export") as fh:  # a FIFO, device or folder is refused, never waited on
            table = pq.read_table(fh)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise InputError(f"cannot read {path} as Parquet: {exc}") from None
    names = table.column_names
    if "text" not in names and "messages" not in names:
        raise InputError(f"{path} has no 'text' or 'messages' column (columns: {', '.join(names)})")
    ids = table.column("id").to_pylist() if "id" in names else [None] * table.num_rows
    texts = table.column("text").to_pylist() if "text" in names else [None] * table.num_rows
    threads = table.column("messages").to_pylist() if "messages" in names else [None] * table.num_rows
    prefix = f"{source} " if source else ""
    for n, (rid, text, messages) in enumerate(zip(ids, texts, threads, strict=True), 1):
        explicit = rid is not None and bool(str(rid).strip())
        tid = _fallback_id(str(rid) if explicit else f"row-{n}", n, source, explicit, "row")
        where = f"{prefix}row {n}"
        if text is not None and messages is not None:
            yield BacklogRow(row_key(source, n), tid, None, n, source, error=f"{where}: has both 'text' and 'messages'")
            continue
        yield _make(n, tid, text, source, where, messages)


def thread_blocks(rows: list[BacklogRow], size: int) -> list[list[BacklogRow]]:
    """``rows`` in blocks of about ``size``, every row of one ticket id in the same block, in input order.

    A thread's turns (the same id with more messages) then go to one worker, one after
    the other, so each re-score reuses the state the worker kept from the turn before.
    Ids keep the order of their first row; a block is closed once it holds ``size`` rows
    and its last id is complete, so a long thread may make a block larger.
    """
    by_id: dict[str, list[BacklogRow]] = {}
    for r in rows:
        by_id.setdefault(r.ticket_id or r.key, []).append(r)
    blocks: list[list[BacklogRow]] = [[]]
    for group in by_id.values():
        if len(blocks[-1]) >= size:
            blocks.append([])
        blocks[-1].extend(group)
    return [b for b in blocks if b]
