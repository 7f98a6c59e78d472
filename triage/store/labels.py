"""Agents' answers: a confirmed or corrected decision on one criterion of a ticket in the history.

A label is kept in the history file (table ``labels``, migration 3 of
:mod:`triage.store.history`) with what the agent was shown at the time: the
decision, its probability, what made it (``learned`` with the head's name,
``calibrated`` or ``zero-shot``), and the pack and model that computed it. An
answer equal to the shown decision is a *confirmation*, any other a *correction*.
A decision nobody answered is no label.

Rows are never updated. Changing an answer adds a row; the newest row of a
(ticket, criterion) is its label, and the oldest keeps the decision shown before
anyone answered, which is what agreement is measured on (prequential: no head
was fitted on a label before it existed). Each call that records labels is one
transaction, validated in full first: either every label of the call is stored,
or none is and the error names the first bad one.

This module is core: it must not import Textual.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from triage.domain.pack import value_key
from triage.domain.result import OptionScore, TicketResult
from triage.errors import InputError
from triage.store.history import History

KINDS = ("confirmation", "correction")
ORIGINS = ("app", "cli", "file", "serve")


@dataclass(frozen=True)
class Label:
    """One answer, as stored."""

    id: int
    ticket_row: int
    score_id: int | None
    criterion: str
    option: str
    kind: str
    shown_option: str | None
    shown_probability: float | None
    shown_source: str | None
    shown_head: str | None
    pack_name: str | None
    pack_hash: str | None
    origin: str
    created_at: float


@dataclass(frozen=True)
class Answer:
    """A label to record: the option an agent chose for one criterion."""

    criterion: str
    option: str


@dataclass(frozen=True)
class ScoredTicket:
    """A ticket of the history with the newest finished result that labels are checked against."""

    ticket_row: int
    ticket_id: str
    text: str
    score_id: int
    result: TicketResult


def find_ticket(history: History, ticket_id: str, *, ids: str = "tickets") -> ScoredTicket:
    """The ticket with this id and its newest finished score.

    When the newest row with the id is a thread, that row is the ticket: a thread whose first message was
    edited is kept as a row of its own (its earlier entry, a thread or the one message it began as, stays),
    and a label on the thread's id lands on its newest entry. Plain tickets of different texts under one id
    are different tickets: refused, naming how to tell them apart.

    ``ids``: the table to look the id up in (``tickets``, or :func:`record_rows`' indexed TEMP copy of
    its ids: ``tickets`` has no index on ``ticket_id``, and a file of 100,000 rows would scan it each time).

    Raises:
        InputError: no such id; several plain tickets share it; it was never scored to the end.
    """
    rows = history.conn.execute(
        f"SELECT id, sha256 LIKE 'thread:%' FROM {ids} WHERE ticket_id = ? ORDER BY updated_at DESC, id DESC",
        (ticket_id,),
    ).fetchall()
    if not rows:
        raise InputError(
            f"no ticket {ticket_id!r} in the history {history.path or '(in memory)'}",
            hint="score it with the app or `triage score ... --history` first; "
            "`triage history` lists the tickets the history holds, with their ids",
        )
    if len(rows) > 1 and not rows[0][1]:  # the newest is a thread: the id is that thread's now
        import shlex

        raise InputError(
            f"{len(rows)} tickets in the history have the id {ticket_id!r} (different texts)",
            hint=f"label them in the app (F2 opens each), or re-score them with distinct ids; "
            f"`triage history --grep {shlex.quote(ticket_id)}` lists them",
        )
    return scored_ticket(history, int(rows[0][0]), ticket_id)


def scored_ticket(history: History, ticket_row: int, ticket_id: str | None = None) -> ScoredTicket:
    """A ticket (by row) with its newest finished score.

    Raises:
        InputError: the ticket has no finished score.
    """
    from triage.store.history import _result

    row = history.conn.execute(
        """SELECT t.ticket_id, t.text, s.id, s.result_json FROM tickets t
           JOIN scores s ON s.ticket = t.id
           WHERE t.id = ? AND s.status = 'done' AND s.result_json IS NOT NULL
           ORDER BY s.started_at DESC, s.id DESC LIMIT 1""",
        (ticket_row,),
    ).fetchone()
    if row is None:
        name = ticket_id if ticket_id is not None else f"row {ticket_row}"
        raise InputError(
            f"ticket {name!r} has no finished score to label",
            hint="score it again (its last score was cancelled or failed)",
        )
    result = _result(row[3])
    if result is None:
        raise InputError(f"ticket {row[0]!r}: its stored result cannot be read by this triage; score it again")
    return ScoredTicket(ticket_row, row[0], row[1], int(row[2]), result)


def check_answers(scored: ScoredTicket, answers: Iterable[Answer]) -> list[Answer]:
    """The answers, checked against the criteria and options of the ticket's result.

    Raises:
        InputError: an unknown criterion or option, named with the ones that exist.
    """
    by_id = {c.id: c for c in scored.result.criteria}
    out: list[Answer] = []
    seen: dict[str, str] = {}
    for a in answers:
        crit = by_id.get(a.criterion)
        if crit is None:
            raise InputError(
                f"ticket {scored.ticket_id!r}: no criterion {a.criterion!r} in its result",
                hint=f"its criteria: {', '.join(by_id)}",
            )
        ids = [o.id for o in crit.options]
        option = _match_option(a.option, crit.options)
        if option is None:
            raise InputError(
                f"ticket {scored.ticket_id!r}, criterion {a.criterion!r}: no option {a.option!r}",
                hint=f"its options: {', '.join(ids)}",
            )
        if a.criterion in seen and seen[a.criterion] != option:
            raise InputError(f"ticket {scored.ticket_id!r}: criterion {a.criterion!r} is given twice, differently")
        seen[a.criterion] = option
        out.append(Answer(a.criterion, option))
    return list({a.criterion: a for a in out}.values())


def _match_option(value: str, options: Iterable[OptionScore]) -> str | None:
    """An option id by id or label, compared as export values are (:func:`triage.domain.pack.value_key`)."""
    want = value_key(value)
    return next((str(o.id) for o in options if want in (value_key(o.id), value_key(o.label))), None)


def record(history: History, scored: ScoredTicket, answers: Iterable[Answer], *, origin: str) -> list[Label]:
    """Store answers on one scored ticket, in one transaction (checked first). Returns the stored labels."""
    return record_many(history, [(scored, list(answers))], origin=origin)


def record_many(history: History, batch: Iterable[tuple[ScoredTicket, list[Answer]]], *, origin: str) -> list[Label]:
    """Store the answers of several tickets in one transaction: all of them, or (on any error) none.

    Raises:
        InputError: an unknown criterion or option (nothing is stored).
    """
    if origin not in ORIGINS:
        raise ValueError(f"unknown label origin {origin!r}")
    checked = [(s, check_answers(s, answers)) for s, answers in batch]
    now = time.time()
    stored: list[Label] = []
    with history.transaction() as conn:
        for s, answers in checked:
            for a in answers:
                stored.append(_insert(conn, s, a, origin, now))
    return stored


def _insert(conn: sqlite3.Connection, s: ScoredTicket, a: Answer, origin: str, now: float) -> Label:
    """Insert one checked answer; returns it as stored."""
    crit = next(c for c in s.result.criteria if c.id == a.criterion)
    kind = "confirmation" if a.option == crit.choice else "correction"
    values = (
        s.ticket_row,
        s.score_id,
        a.criterion,
        a.option,
        kind,
        crit.choice,
        crit.probability(crit.choice),
        crit.source,
        s.result.head if crit.source in ("learned", "starter") else None,
        s.result.pack.get("name"),
        s.result.pack.get("hash"),
        s.result.model.get("sha256"),
        s.result.prompt_format,
        origin,
        now,
    )
    cur = conn.execute(
        """INSERT INTO labels (ticket, score, criterion, option, kind, shown_option, shown_probability,
                              shown_source, shown_head, pack_name, pack_hash, model_sha256, prompt_format,
                              origin, created_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        values,
    )
    return Label(int(cur.lastrowid or 0), *values[:11], origin, now)


@dataclass(frozen=True)
class LabelRow:
    """One row of a label file: ``where`` it is (``FILE:LINE``), and its ticket id and answers, or its error."""

    where: str
    ticket_id: str | None = None
    answers: list[Answer] | None = None
    error: str | None = None


@dataclass(frozen=True)
class Recorded:
    """What :func:`record_rows` stored."""

    stored: int
    corrections: int
    tickets: int
    repeated: int  # answers given again, identically, in the same file: stored once


SHOW_PROBLEMS = 20
_CACHE = 256  # scored tickets kept while a file is read (ids that come back close together)


def record_rows(history: History, rows: Iterable[LabelRow], *, origin: str, source: str) -> Recorded:
    """Store the answers of a stream of rows (a label file) in one transaction, in bounded memory.

    Each row is checked and inserted as it is read; what the file gave so far is kept in a TEMP
    table (ticket, criterion, option, where), not in memory. One ticket given two different
    answers for one criterion in the file is refused, as the pair form refuses it; the same
    answer given again is stored once. Any bad row (the first :data:`SHOW_PROBLEMS` are named)
    rolls the whole transaction back: nothing is stored.

    Raises:
        InputError: bad rows (nothing stored), or no labels at all.
        HistoryFault: the history cannot be written (locked, read-only, a full disk).
    """
    from collections import OrderedDict

    if origin not in ORIGINS:
        raise ValueError(f"unknown label origin {origin!r}")
    problems: list[str] = []
    bad = stored = corrections = repeated = 0
    cache: OrderedDict[str, ScoredTicket] = OrderedDict()
    now = time.time()

    def problem(where: str, message: str) -> None:
        nonlocal bad
        bad += 1
        if len(problems) < SHOW_PROBLEMS:
            problems.append(message if message.startswith(where) else f"{where}: {message}")

    with history.transaction() as conn:
        conn.execute("DROP TABLE IF EXISTS temp.given")
        conn.execute(
            "CREATE TEMP TABLE given (ticket INTEGER, criterion TEXT, option TEXT, at TEXT, "
            "PRIMARY KEY (ticket, criterion))"
        )
        conn.execute("DROP TABLE IF EXISTS temp.ticket_ids")
        conn.execute("CREATE TEMP TABLE ticket_ids AS SELECT id, ticket_id, updated_at, sha256 FROM tickets")
        conn.execute("CREATE INDEX temp.ticket_ids_by_id ON ticket_ids(ticket_id)")
        try:
            for row in rows:
                if row.error is not None or row.ticket_id is None or row.answers is None:
                    problem(row.where, row.error or "no labels")
                    continue
                try:
                    scored = cache.get(row.ticket_id)
                    if scored is None:
                        scored = find_ticket(history, row.ticket_id, ids="temp.ticket_ids")
                        cache[row.ticket_id] = scored
                        if len(cache) > _CACHE:
                            cache.popitem(last=False)
                    checked = check_answers(scored, row.answers)
                except InputError as exc:
                    problem(row.where, exc.message)
                    continue
                for a in checked:
                    before = conn.execute(
                        "SELECT option, at FROM temp.given WHERE ticket = ? AND criterion = ?",
                        (scored.ticket_row, a.criterion),
                    ).fetchone()
                    if before is not None:
                        if before[0] == a.option:
                            repeated += 1
                        else:
                            problem(
                                row.where,
                                f"ticket {scored.ticket_id!r}: criterion {a.criterion!r} is {a.option!r} here and "
                                f"{before[0]!r} at {before[1]}: one file gives one answer per criterion",
                            )
                        continue
                    conn.execute(
                        "INSERT INTO temp.given (ticket, criterion, option, at) VALUES (?, ?, ?, ?)",
                        (scored.ticket_row, a.criterion, a.option, row.where),
                    )
                    if bad:
                        continue  # nothing will be stored: only the checks go on
                    label = _insert(conn, scored, a, origin, now)
                    stored += 1
                    corrections += label.kind == "correction"
            tickets = int(conn.execute("SELECT count(DISTINCT ticket) FROM temp.given").fetchone()[0])
        finally:
            conn.execute("DROP TABLE IF EXISTS temp.given")
            conn.execute("DROP TABLE IF EXISTS temp.ticket_ids")
        if bad:
            more = f"\n  ... and {bad - len(problems)} more" if bad > len(problems) else ""
            raise InputError(
                f"{bad} bad row(s) in {source}; nothing was stored:\n  " + "\n  ".join(problems) + more,
                hint="fix or remove those rows and run again",
            )
        if not stored and not repeated:
            raise InputError(f"{source} holds no labels")
    return Recorded(stored, corrections, tickets, repeated)


_COLUMNS = """id, ticket, score, criterion, option, kind, shown_option, shown_probability, shown_source, shown_head,
              pack_name, pack_hash, origin, created_at"""


def current(history: History, ticket_row: int) -> dict[str, Label]:
    """The labels of one ticket now: the newest answer per criterion."""
    rows = history.conn.execute(f"SELECT {_COLUMNS} FROM labels WHERE ticket = ? ORDER BY id", (ticket_row,))
    return {lab.criterion: lab for lab in (Label(*r) for r in rows.fetchall())}


@dataclass(frozen=True)
class Judged:
    """One (ticket, criterion) that has a label: what was shown before anyone answered, and the answer now."""

    ticket_row: int
    ticket_id: str
    text: str
    criterion: str
    pack_name: str | None
    pack_hash: str | None
    shown_option: str | None
    shown_source: str | None
    shown_head: str | None
    option: str
    first_at: float
    changed: int  # how many times the answer was given (1 = never changed)
    answered_pack_hash: str | None = None  # the pack the newest answer was given under


def judged(history: History) -> list[Judged]:
    """Every labelled (ticket, pack, criterion), oldest first answer first.

    The shown decision is the one of the *first* answer (what the agent saw before
    answering at all); the option is the newest answer. A ticket labelled under two packs
    that share a criterion id has one entry per pack (by pack name: a pack's versions are one
    pack): an option id means what its pack says, so neither answer replaces the other.
    """
    rows = history.conn.execute(
        """SELECT f.ticket, t.ticket_id, t.text, f.criterion, f.pack_name, f.pack_hash, f.shown_option,
                  f.shown_source, f.shown_head, n.option, f.created_at, g.n, n.pack_hash
           FROM (SELECT ticket, criterion, min(id) AS first, max(id) AS last, count(*) AS n
                 FROM labels GROUP BY ticket, coalesce(pack_name, ''), criterion) g
           JOIN labels f ON f.id = g.first
           JOIN labels n ON n.id = g.last
           JOIN tickets t ON t.id = f.ticket
           ORDER BY f.created_at, f.id"""
    ).fetchall()
    return [Judged(*r) for r in rows]


def count(history: History) -> int:
    """How many label rows the history holds (every answer, changed ones too)."""
    return int(history.conn.execute("SELECT count(*) FROM labels").fetchone()[0])


def count_since(history: History, pack_hash: str, since: float) -> int:
    """How many answers for the pack ``pack_hash`` were given after ``since`` (a time.time() value)."""
    row = history.conn.execute(
        "SELECT count(*) FROM labels WHERE pack_hash = ? AND created_at > ?", (pack_hash, since)
    ).fetchone()
    return int(row[0])


class ExportRow(TypedDict):
    """One row of ``triage label --export``: a ticket and its newest answers under one pack."""

    id: str
    text: str
    pack: str | None
    labels: dict[str, str]  # criterion id -> option id


def export_rows(history: History) -> list[ExportRow]:
    """The history's labels in ``triage learn``'s input format: one row per (ticket, pack), newest answers.

    Rows are ``{"id", "text", "pack", "labels": {criterion: option}}`` (``pack``: the name of the pack the labels
    were given under, None when unknown), in the order tickets were first labelled under each pack. ``triage
    learn FILE`` reads the rows of the pack it learns and leaves the others out (saying how many).
    """
    rows: dict[tuple[int, str | None], ExportRow] = {}
    for j in judged(history):
        key = (j.ticket_row, j.pack_name)
        row = rows.setdefault(key, {"id": j.ticket_id, "text": j.text, "pack": j.pack_name, "labels": {}})
        row["labels"][j.criterion] = j.option
    return list(rows.values())


def parse_pairs(pairs: Iterable[str]) -> list[Answer]:
    """``criterion=option`` arguments as answers.

    Raises:
        InputError: a pair without ``=`` or with an empty side.
    """
    out = []
    for p in pairs:
        crit, sep, option = p.partition("=")
        if not sep or not crit.strip() or not option.strip():
            raise InputError(
                f"{p!r} is not CRITERION=OPTION", hint="e.g. triage label T-17 queue=shipping urgency=high"
            )
        out.append(Answer(crit.strip(), option.strip()))
    return out


def answers_from_mapping(labels: Mapping[str, object], where: str) -> list[Answer]:
    """A JSON object ``{criterion: option}`` as answers.

    Raises:
        InputError: not an object, or a value that is not a non-empty string.
    """
    if not isinstance(labels, Mapping) or not labels:
        raise InputError(f'{where}: "labels" must be a non-empty object {{criterion: option}}')
    out = []
    for crit, option in labels.items():
        if not isinstance(option, str) or not option.strip():
            raise InputError(f"{where}: label {crit!r} must be an option id (a non-empty string), not {option!r}")
        out.append(Answer(str(crit), option.strip()))
    return out
