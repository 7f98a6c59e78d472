"""Which columns of an export are a ticket's text, its id and its labels (``--text``, ``--id``, ``--label``).

``--text subject,description`` joins the columns' values with a blank line (empty values are
left out, HTML becomes plain text). A column name may be a dotted path into nested JSON or a
Parquet struct (``ticket.description``); a name that is a key as it stands (a CSV header
``ticket.description``) wins over the path. The defaults read triage's own JSON Lines shape:
``text``, ``id`` and, for each criterion, ``labels.<criterion>`` (or a column named like the
criterion).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from triage import gate
from triage.errors import InputError
from triage.intake.html import html_to_text

if TYPE_CHECKING:
    from triage.intake.readers import Export

Unmapped = Literal["skip", "error"]
TEXT_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class ColumnMap:
    """The columns to read: text columns (joined), the id column, and a column per criterion.

    ``labels`` empty means the default: ``labels.<criterion>``, else ``<criterion>``, for each
    criterion of the pack that has such a column. ``unmapped``: what a label value that matches
    no option does (``skip`` its row's label, or ``error``: stop).
    """

    text: tuple[str, ...] = ("text",)
    id: str | None = "id"
    labels: dict[str, str] = field(default_factory=dict)
    unmapped: Unmapped = "skip"
    explicit: bool = False  # any of --text/--id/--label given
    html: bool = True  # a value with HTML elements becomes plain text (--keep-html: left as it is)

    @staticmethod
    def parse(
        text: str | None = None,
        id_column: str | None = None,
        labels: Sequence[str] = (),
        unmapped: str = "skip",
        *,
        keep_html: bool = False,
    ) -> ColumnMap:
        """From the command-line values (``--text a,b``, ``--id c``, ``--label crit=col`` repeated).

        Raises:
            InputError: an empty column list, or a ``--label`` that is not ``CRITERION=COLUMN``.
        """
        cols: tuple[str, ...] = ("text",)
        if text is not None:
            cols = tuple(c.strip() for c in text.split(",") if c.strip())
            if not cols:
                raise InputError(f"--text names no column: {text!r}", hint="e.g. --text Subject,Description")
        by: dict[str, str] = {}
        for item in labels:
            crit, eq, col = item.partition("=")
            if not eq or not crit.strip() or not col.strip():
                raise InputError(
                    f"--label wants CRITERION=COLUMN, got {item!r}",
                    hint="e.g. --label queue=Group --label priority=Priority",
                )
            by[crit.strip()] = col.strip()
        if unmapped not in ("skip", "error"):
            raise InputError(f"--unmapped is skip or error, got {unmapped!r}")
        explicit = text is not None or id_column is not None or bool(labels)
        id_col = id_column.strip() if id_column else "id"
        mode: Unmapped = "skip" if unmapped == "skip" else "error"
        return ColumnMap(cols, id_col, by, mode, explicit, not keep_html)

    def label_columns(self, criteria: Sequence[str], columns: Sequence[str]) -> dict[str, str]:
        """Criterion id -> column, for the criteria this export labels.

        Raises:
            InputError: a ``--label`` criterion that is not in ``criteria``.
        """
        if self.labels:
            unknown = [c for c in self.labels if c not in criteria]
            if unknown:
                raise InputError(
                    f"--label names criterion {', '.join(map(repr, unknown))}, which the pack does not have; "
                    f"its criteria are {', '.join(criteria)}"
                )
            return dict(self.labels)
        have = set(columns)
        out = {}
        for cid in criteria:
            for col in (f"labels.{cid}", cid):
                if col in have:
                    out[cid] = col
                    break
        return out


def check_columns(wanted: Mapping[str, Sequence[str]], columns: Sequence[str], source: str) -> None:
    """Every named column exists in the export, or an error names it and lists those that do.

    ``wanted``: flag -> column names (``{"--text": ["Subject"], ...}``).

    Raises:
        InputError: a column the export does not have.
    """
    have = set(columns)
    for flag, names in wanted.items():
        for name in names:
            if name not in have:
                shown = ", ".join(repr(c) for c in columns[:40]) + (
                    f" and {len(columns) - 40} more" if len(columns) > 40 else ""
                )
                raise InputError(
                    f"{source} has no column {name!r} (given by {flag}); its columns are {shown or 'none'}",
                    hint="name a column of the export "
                    "(a dotted path such as ticket.description reaches into nested JSON)",
                )


def get_value(data: dict[str, object], name: str) -> object:
    """The value of column ``name`` in a record: the key as it stands, else the dotted path; None when absent."""
    if name in data:
        return data[name]
    node: object = data
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def cell_problem(value: object, name: str, what: str = "text") -> str | None:
    """Why a cell cannot be read as ``what`` (a list, an object, bytes that are not UTF-8), or None."""
    if isinstance(value, (list, tuple, dict)):
        kind = "an object" if isinstance(value, dict) else "a list"
        return f"column {name!r} holds {kind}, not {what}; name a column of {what}"
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            return (
                f"column {name!r} holds binary data that is not UTF-8 text (byte 0x{bytes(value)[exc.start]:02x} "
                f"at offset {exc.start}); store it as a string column"
            )
    return None


def is_missing(value: object) -> bool:
    """Whether a cell is a missing value, as exports write one: None (JSON ``null``, a Parquet null) or a
    not-a-number (pandas' missing number: ``NaN`` in Parquet or JSON Lines, ``float("nan")``, numpy's too).
    An empty CSV cell is the empty string, missing by being empty. A string such as ``"NaN"`` is text."""
    if value is None:
        return True
    if isinstance(value, (str, bytes, bytearray, memoryview, bool, int)):
        return False
    try:
        return bool(value != value)  # NaN is the one value unequal to itself
    except (TypeError, ValueError):  # pandas' NA, an array: not a number cell
        return type(value).__name__ in ("NAType", "NaTType")


def as_text(value: object) -> str:
    """A cell as text: strings as they are, UTF-8 bytes (a Parquet ``binary`` column) decoded, numbers and
    booleans written out, nothing for a missing value (:func:`is_missing`: None, NaN). Check
    :func:`cell_problem` first for bytes and lists."""
    if is_missing(value):
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return str(value)


_INTEGRAL = re.compile(r"[+-]?[0-9]+\.0+")


def label_text(value: object) -> str:
    """A label cell as text, one value alike in every format: :func:`as_text` (a missing value is ``""``), and
    a whole number written as a decimal (``"2.0"``: pandas writes a number column with missing values as
    floats, in CSV too) as the whole number (``"2"``), as a Parquet or JSON ``2.0`` is read."""
    text = " ".join(as_text(value).split())
    return text.split(".", 1)[0].lstrip("+") if _INTEGRAL.fullmatch(text) else text


def ticket_text(data: dict[str, object], columns: Sequence[str], *, html: bool = True) -> tuple[str | None, str | None]:
    """(text, None) from the text columns joined by a blank line, or (None, why) when there is none.

    ``html``: a value holding HTML elements becomes plain text (:func:`~triage.intake.html.html_to_text`).

    Non-string values (a list, an object, bytes that are not UTF-8) are refused, naming the column,
    rather than printed as Python; UTF-8 bytes (a Parquet ``binary`` column) are decoded.
    """
    parts = []
    for name in columns:
        value = get_value(data, name)
        problem = cell_problem(value, name)
        if problem is not None:
            return None, problem
        text = (html_to_text(as_text(value)) if html else as_text(value)).strip()
        if text:
            parts.append(text)
    if not parts:
        return None, f"no text in column(s) {', '.join(map(repr, columns))}"
    return TEXT_SEPARATOR.join(parts), None


@dataclass(frozen=True)
class ExportTicket:
    """One record of an export as a ticket to score: its text and id, or why it is not one."""

    n: int
    where: str
    id: str | None
    text: str | None
    error: str | None = None


EXPORT_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq")


def is_export(path: str, columns: ColumnMap) -> bool:
    """Whether ``triage score`` reads ``path`` as an export: columns named, a .csv/.tsv/.parquet name,
    or a .json file that holds an array (a plain-text ticket file is never sniffed as CSV)."""
    from pathlib import Path

    suffix = Path(path).suffix.lower()
    if columns.explicit or suffix in EXPORT_SUFFIXES:
        return True
    if suffix == ".json":
        try:
            with gate.open_binary(path, "export") as fh:  # a FIFO is not an export (nor waited on)
                return fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"[")
        except OSError:
            return False
    return False


def export_tickets(path: str, columns: ColumnMap) -> Iterator[ExportTicket]:
    """The records of an export as :class:`ExportTicket` s, streamed (for ``triage score``).

    Raises:
        InputError: the file is not an export, is empty, or lacks a named column (listing those it has).
    """
    from triage.intake.readers import open_export

    export = open_export(path, "input file")
    names = export.columns
    wanted: dict[str, list[str]] = {"--text-columns": list(columns.text)}
    if columns.explicit and columns.id not in (None, "id"):
        wanted["--id-column"] = [columns.id or ""]
    check_columns(wanted, names, str(path))
    id_col = columns.id if columns.id in names else None
    return _tickets(export, columns, id_col)


def _tickets(export: Export, columns: ColumnMap, id_col: str | None) -> Iterator[ExportTicket]:
    for rec in export.records():
        if rec.data is None:
            yield ExportTicket(rec.n, rec.where, None, None, f"{rec.where}: {rec.error}")
            continue
        raw_id = get_value(rec.data, id_col) if id_col else None
        bad_id = cell_problem(raw_id, id_col or "", "an id") if id_col else None
        if bad_id is not None:
            yield ExportTicket(rec.n, rec.where, None, None, f"{rec.where}: {bad_id}")
            continue
        rid = as_text(raw_id).strip()
        text, why = ticket_text(rec.data, columns.text, html=columns.html)
        yield ExportTicket(rec.n, rec.where, rid or None, text, None if text is not None else f"{rec.where}: {why}")
