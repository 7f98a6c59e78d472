"""Labelled tickets: JSONL rows ``{"id", "text", "labels": {criterion_id: option_id}}``, or a helpdesk export.

A team's export (CSV, JSON Lines, a JSON array or Parquet; :mod:`triage.intake`) is read
through a :class:`~triage.intake.columns.ColumnMap`: which columns are the text, the id and
each criterion's label, and label values mapped to options by id, label or alias. Without
one, triage's own JSON Lines shape is read exactly as it always was.

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

from triage.domain.pack import Pack
from triage.domain.ticket import JsonLine, Ticket, jsonl_lines, make_ticket, read_text_file
from triage.errors import InputError
from triage.intake.columns import ColumnMap

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
    notes: list[str] = field(default_factory=list)  # what reading decided: encoding, unmapped, duplicates, sample

    def limit(self, n: int | None) -> LabelledSet:
        """The first ``n`` usable rows (file order), keeping the bad-row report."""
        if n is None or n >= len(self.rows):
            return self
        return LabelledSet(self.source, self.rows[:n], self.bad, self.ignored_criteria, self.notes)


def parse_row(
    item: JsonLine, source: str, pack: Pack, *, partial: bool = False
) -> tuple[LabelledRow | None, str | None, list[str]]:
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
            return (
                None,
                f"{where}: label {crit.id}={value!r} is not an option of {crit.id!r} (options: {', '.join(valid)})",
                [],
            )
        gold[crit.id] = value
    if not gold:
        return None, f"{where}: no label for any criterion of the pack ({', '.join(c.id for c in pack.criteria)})", []
    try:
        ticket = make_ticket(text, rid)
    except InputError as exc:
        return None, f"{where}: {exc.message}", []
    ignored = [str(k) for k in labels if k not in gold]
    return LabelledRow(line, ticket, gold), None, ignored


def read_labelled(
    path: str | Path,
    pack: Pack,
    *,
    partial: bool = False,
    columns: ColumnMap | None = None,
    per_option: int | None = None,
) -> LabelledSet:
    """Read labelled tickets, checking every row against ``pack``.

    ``partial``: rows may label some criteria only (see :func:`parse_row`). ``columns``: how to
    read an export (:func:`read_export`); without it (or with only the defaults, on a JSON Lines
    file) the file is triage's own JSONL shape. ``per_option``: keep a stratified sample of at most
    this many rows per option (:mod:`triage.intake.sample`).

    Raises:
        InputError: the file is missing, unreadable, or has no usable row at all.
    """
    path = Path(path)
    if columns is not None and (columns.explicit or not _is_jsonl(path)):
        return read_export(path, pack, columns, partial=partial, per_option=per_option)
    out = _read_jsonl(path, pack, partial=partial)
    if per_option is not None and _most_per_option(out.rows) > per_option:  # else the sample is every row
        from triage.intake.sample import sample_rows

        n = len(out.rows)
        out.rows = sample_rows(out.rows, per_option)
        if len(out.rows) < n:  # said when the sample left rows out (learn samples by default)
            out.notes.append(f"sampled {len(out.rows)} of {n} row(s): at most {per_option} per option (--per-option)")
    return out


def _most_per_option(rows: list[LabelledRow]) -> int:
    """The largest number of rows any one option of any criterion has."""
    from collections import Counter

    counts = Counter(kv for r in rows for kv in r.labels.items())
    return max(counts.values(), default=0)


def _is_jsonl(path: Path) -> bool:
    """Whether ``path`` is triage's JSONL shape (decided by content: a first line that is an object)."""
    from triage.intake.readers import open_export

    try:
        return open_export(path, "labelled ticket file").format == "jsonl"
    except InputError:
        return False  # missing, empty, binary: the export reader names it


def _read_jsonl(path: Path, pack: Pack, *, partial: bool) -> LabelledSet:
    text = read_text_file(path, "labelled ticket file")
    out = LabelledSet(str(path), [])
    others: dict[str, int] = {}  # rows `label --export` wrote for another pack: its option ids are not this one's
    for item in jsonl_lines(text, '{"id", "text", "labels"}'):
        n = item.line
        if item.obj is None:
            out.bad.append(BadRow(n, f"{path} line {n}: {item.error}"))
            continue
        given = item.obj.get("pack")
        if isinstance(given, str) and given != pack.name:
            others[given] = others.get(given, 0) + 1
            continue
        row, error, ignored = parse_row(item, str(path), pack, partial=partial)
        if row is None:
            out.bad.append(BadRow(n, error or f"{path} line {n}: unusable"))
            continue
        for cid in ignored:
            out.ignored_criteria[cid] = out.ignored_criteria.get(cid, 0) + 1
        out.rows.append(row)
    if others:
        named = ", ".join(f"{k!r} ({v})" for k, v in sorted(others.items()))
        out.notes.append(
            f"{sum(others.values())} row(s) labelled under another pack than {pack.name!r} left out: {named}"
        )
    if not out.rows:
        detail = f"; {len(out.bad)} bad row(s), first: {out.bad[0].message}" if out.bad else ""
        if others:
            detail += f"; {out.notes[-1]} (pass --pack FILE to learn that pack)"
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
    """Write rows back as labelled JSONL (the raw text, as given), atomically (a device or FIFO: written through)."""
    from triage.store.outputs import write_output

    write_output(
        path,
        "".join(
            json.dumps({"id": r.id, "text": r.ticket.raw, "labels": r.labels}, ensure_ascii=False) + "\n" for r in rows
        ),
    )


def read_export(
    path: str | Path,
    pack: Pack,
    columns: ColumnMap,
    *,
    partial: bool = False,
    per_option: int | None = None,
) -> LabelledSet:
    """Read a helpdesk export's labelled rows through ``columns``, streaming it.

    Label values map to options by id, label or alias (:mod:`triage.intake.values`). A row
    whose value matches no option loses that label (``partial``) or is left out; with
    ``columns.unmapped == "error"`` the read stops instead. A later row with the id of an
    earlier one and other labels replaces it (said in :attr:`LabelledSet.notes`).

    Raises:
        InputError: a column the export does not have (naming those it has), an empty export,
            a label column empty in every row, no value that maps to an option, unmapped values
            under ``--unmapped error``, or no usable row.
    """
    from triage.intake.columns import as_text, cell_problem, check_columns, get_value, label_text, ticket_text
    from triage.intake.readers import open_export
    from triage.intake.sample import StratifiedSample
    from triage.intake.values import OptionMatcher, Unmapped

    path = Path(path)
    export = open_export(path, "labelled ticket file")
    names = export.columns
    crit_ids = [c.id for c in pack.criteria]
    label_cols = columns.label_columns(crit_ids, names)
    wanted: dict[str, list[str]] = {"--text": list(columns.text), "--label": list(label_cols.values())}
    if columns.explicit and columns.id is not None and columns.id != "id":
        wanted["--id"] = [columns.id]
    if names or export.format == "csv":
        check_columns(wanted, names, str(path))
    if not label_cols:
        raise InputError(
            f"{path} has no label column for any criterion of pack {pack.name!r} ({', '.join(crit_ids)})",
            hint="name them: --label CRITERION=COLUMN (e.g. --label queue=Group), once per criterion",
        )
    missing = [c for c in crit_ids if c not in label_cols]
    if missing and not partial:
        raise InputError(
            f"no label column for criterion {', '.join(map(repr, missing))} of pack {pack.name!r}; "
            "every criterion needs one here",
            hint="add --label CRITERION=COLUMN for it, or use a pack with only the criteria the export labels",
        )
    id_col = columns.id if columns.id in names else None
    matchers = {cid: OptionMatcher(pack.criterion(cid)) for cid in label_cols}
    unmapped = Unmapped()
    filled = dict.fromkeys(label_cols, 0)
    out = LabelledSet(str(path), [])
    if export.notice:
        out.notes.append(export.notice)
    kept: dict[str, LabelledRow] = {}
    sample: StratifiedSample[LabelledRow] | None = StratifiedSample(per_option) if per_option is not None else None
    seen_ids: set[str] = set()
    records = with_data = replaced = repeated = 0
    replaced_ids: list[str] = []
    for rec in export.records():
        records += 1
        where = f"{path} {rec.where}"
        if rec.data is None:
            out.bad.append(BadRow(rec.n, f"{where}: {rec.error}"))
            continue
        with_data += 1
        raw_id = get_value(rec.data, id_col) if id_col else None
        problem = cell_problem(raw_id, id_col, "an id") if id_col else None
        rid = as_text(raw_id).strip() if problem is None else ""
        rid = rid or f"row-{rec.n}"
        gold: dict[str, str] = {}
        for cid, col in label_cols.items():
            value = get_value(rec.data, col)
            bad = cell_problem(value, col, "a label")
            if bad is not None:  # a list column (tags) is no label: named, never read as empty
                raise InputError(
                    f"{where}: {bad}", hint="name a column with one value per row: --label CRITERION=COLUMN"
                )
            value = label_text(value)  # a missing value (None, NaN, an empty cell) is no label
            if not value:
                problem = problem or (None if partial else f"no label in column {col!r} (criterion {cid!r})")
                continue
            filled[cid] += 1
            oid = matchers[cid].match(value)
            if oid is None:
                unmapped.add(cid, value)
                unknown = f"label {value!r} in column {col!r} is not an option of {cid!r}"
                problem = problem or (None if partial else unknown)
                continue
            gold[cid] = oid
        if problem is None and not gold:
            problem = "no label that maps to an option of the pack"
        if problem is None and sample is not None and rid not in seen_ids and not sample.wants(rid, gold):
            sample.offered += 1  # counted, not kept: its text (HTML and all) is never read
            seen_ids.add(rid)
            continue
        text, why = ticket_text(rec.data, columns.text, html=columns.html) if problem is None else (None, problem)
        if text is None:
            problem = why
        if problem is not None:
            out.bad.append(BadRow(rec.n, f"{where} (id {rid}): {problem}"))
            continue
        try:
            ticket = make_ticket(text or "", rid)
        except InputError as exc:
            out.bad.append(BadRow(rec.n, f"{where}: {exc.message}"))
            continue
        row = LabelledRow(rec.n, ticket, gold)
        before = kept.get(rid) if sample is None else None
        if sample is None:
            if before is not None:
                if before.labels == gold and before.ticket.text == ticket.text:
                    repeated += 1
                    continue
                replaced += 1
                if len(replaced_ids) < 5:
                    replaced_ids.append(rid)
                del kept[rid]  # the later row wins, at its own place
            kept[rid] = row
        else:
            if rid in seen_ids:
                sample.remove(rid)  # the later row wins
                replaced += 1
                if len(replaced_ids) < 5:
                    replaced_ids.append(rid)
            seen_ids.add(rid)  # ids only: the sample holds the rows
            sample.offer(row)
    if records == 0:
        raise InputError(
            f"the export {path} holds no rows (only a header, or nothing)",
            hint="export the tickets again, with their rows",
        )
    for cid, n in filled.items():
        if n == 0 and with_data > 0:
            raise InputError(
                f"label column {label_cols[cid]!r} (criterion {cid!r}) is empty in all {records} row(s) of {path}",
                hint="name the column that holds this decision: --label CRITERION=COLUMN",
            )
    if unmapped and columns.unmapped == "error":
        lines = "; ".join(unmapped.describe(pack.criterion(c), label_cols[c]) for c in unmapped.counts)
        raise InputError(
            f"{path}: {lines}",
            hint='give those options aliases = ["..."] in the pack, or pass --unmapped skip to leave the rows out',
        )
    for cid in unmapped.counts:
        action = "labels left out (the rows still count for other criteria)" if partial else "rows left out"
        out.notes.append(f"{unmapped.describe(pack.criterion(cid), label_cols[cid])}; {action}")
    rows = sample.rows() if sample is not None else list(kept.values())
    if replaced:
        out.notes.append(
            f"{replaced} id(s) appear again with other labels or text; the later row wins "
            f"(e.g. {', '.join(replaced_ids)})"
        )
    if repeated:
        out.notes.append(f"{repeated} row(s) repeat an earlier row exactly (same id, text and labels); kept once")
    if sample is not None and len(rows) < sample.offered - replaced:  # said when the sample left rows out
        out.notes.append(
            f"sampled {len(rows)} of {sample.offered - replaced} row(s): at most {per_option} per option (--per-option)"
        )
    if not rows:
        if unmapped:
            lines = "; ".join(unmapped.describe(pack.criterion(c), label_cols[c]) for c in unmapped.counts)
            raise InputError(
                f"no row of {path} has a label that maps to an option: {lines}",
                hint='give the options aliases = ["..."] with the export\'s values, '
                "or write a pack from it: triage pack init",
            )
        detail = f"; {len(out.bad)} bad row(s), first: {out.bad[0].message}" if out.bad else ""
        raise InputError(f"{path} holds no usable labelled rows{detail}")
    out.rows = rows
    return out
