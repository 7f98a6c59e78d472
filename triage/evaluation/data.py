"""Labelled tickets: JSONL rows ``{"id", "text", "labels": {criterion_id: option_id}}``.

Bad rows are never dropped silently: each one becomes a :class:`BadRow` naming
its line and what is wrong, and callers print them and count them.

The dev/train split is by a hash of each row's id (:func:`split_by_id`): a row
lands on the same side whatever the file order, and adding rows moves no other.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from triage.errors import InputError
from triage.scoring.pack import Pack
from triage.scoring.ticket import JsonLine, Ticket, jsonl_lines, make_ticket, read_text_file

SPLIT_SALT = "triage-split/1"


@dataclass(frozen=True)
class LabelledRow:
    """One usable row: the cleaned ticket and its gold option id per criterion of the pack."""

    line: int
    ticket: Ticket
    labels: dict[str, str]

    @property
    def id(self) -> str:
        """The row's id (the ticket id)."""
        return self.ticket.id


@dataclass(frozen=True)
class BadRow:
    """A row that was skipped, and why (the message names file and line)."""

    line: int
    message: str


@dataclass
class LabelledSet:
    """The rows of one file that can be used, and the ones that could not."""

    source: str
    rows: list[LabelledRow]
    bad: list[BadRow] = field(default_factory=list)
    ignored_criteria: dict[str, int] = field(default_factory=dict)  # labels for criteria not in the pack

    def limit(self, n: int | None) -> LabelledSet:
        """The first ``n`` usable rows (file order), keeping the bad-row report."""
        if n is None or n >= len(self.rows):
            return self
        return LabelledSet(self.source, self.rows[:n], self.bad, self.ignored_criteria)


def parse_row(item: JsonLine, source: str, pack: Pack, *, partial: bool = False) -> tuple[LabelledRow | None, str | None, list[str]]:
    """Validate one JSON Lines object (``item.obj`` is not None) against ``pack``.

    With ``partial``, a row may leave criteria unlabelled (a team's history labels
    some decisions only); it still needs at least one of the pack's criteria.

    Returns:
        (row, None, ignored criterion ids) when usable, else (None, error message, []).
    """
    obj, line = item.obj or {}, item.line
    rid = item.row_id()
    where = f"{source} line {line} (id {rid})"
    text = obj.get("text")
    if not isinstance(text, str):
        return None, f"{where}: field 'text' is missing or not a string", []
    labels = obj.get("labels")
    if not isinstance(labels, dict):
        return None, f"{where}: field 'labels' is missing or not an object {{criterion_id: option_id}}", []
    gold: dict[str, str] = {}
    for crit in pack.criteria:
        if crit.id not in labels:
            if partial:
                continue
            return None, f"{where}: no label for criterion {crit.id!r}", []
        value = labels[crit.id]
        valid = [o.id for o in crit.options]
        if not isinstance(value, str) or value not in valid:
            return None, f"{where}: label {crit.id}={value!r} is not an option of {crit.id!r} (options: {', '.join(valid)})", []
        gold[crit.id] = value
    if not gold:
        return None, f"{where}: no label for any criterion of the pack ({', '.join(c.id for c in pack.criteria)})", []
    try:
        ticket = make_ticket(text, rid)
    except InputError as exc:
        return None, f"{where}: {exc.message}", []
    ignored = [str(k) for k in labels if k not in gold]
    return LabelledRow(line, ticket, gold), None, ignored


def read_labelled(path: str | Path, pack: Pack, *, partial: bool = False) -> LabelledSet:
    """Read a labelled JSONL file, checking every row against ``pack``.

    ``partial``: rows may label some criteria only (see :func:`parse_row`).

    Raises:
        InputError: the file is missing, unreadable, or has no usable row at all.
    """
    path = Path(path)
    text = read_text_file(path, "labelled ticket file")
    out = LabelledSet(str(path), [])
    for item in jsonl_lines(text, '{"id", "text", "labels"}'):
        n = item.line
        if item.obj is None:
            out.bad.append(BadRow(n, f"{path} line {n}: {item.error}"))
            continue
        row, error, ignored = parse_row(item, str(path), pack, partial=partial)
        if row is None:
            out.bad.append(BadRow(n, error or f"{path} line {n}: unusable"))
            continue
        for cid in ignored:
            out.ignored_criteria[cid] = out.ignored_criteria.get(cid, 0) + 1
        out.rows.append(row)
    if not out.rows:
        detail = f"; {len(out.bad)} bad row(s), first: {out.bad[0].message}" if out.bad else ""
        raise InputError(f"{path} holds no usable labelled rows{detail}")
    return out


def split_bucket(row_id: str, salt: str = SPLIT_SALT) -> float:
    """A number in [0, 1) fixed by the row id alone (sha256 of ``salt:id``)."""
    digest = hashlib.sha256(f"{salt}:{row_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_by_id(rows: LabelledSet, train_fraction: float) -> tuple[LabelledSet, LabelledSet]:
    """Split deterministically: rows whose :func:`split_bucket` < ``train_fraction`` train.

    Returns:
        (dev, train), each in file order.
    """
    if not 0.0 < train_fraction < 1.0:
        raise InputError(f"--split wants a training fraction between 0 and 1, got {train_fraction}")
    train = [r for r in rows.rows if split_bucket(r.id) < train_fraction]
    dev = [r for r in rows.rows if split_bucket(r.id) >= train_fraction]
    return (
        LabelledSet(f"{rows.source} (dev split)", dev, rows.bad, rows.ignored_criteria),
        LabelledSet(f"{rows.source} (train split)", train, [], {}),
    )


def write_jsonl(rows: list[LabelledRow], path: Path) -> None:
    """Write rows back as labelled JSONL (the raw text, as given)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps({"id": r.id, "text": r.ticket.raw, "labels": r.labels}, ensure_ascii=False) + "\n")
