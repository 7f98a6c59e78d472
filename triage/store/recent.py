"""The history's recent tickets with their decisions and labels, filtered: what ``triage history`` lists.

:func:`recent` reads, newest activity first (the ticket's newest score, else when it was saved),
one :class:`RecentTicket` per ticket row: its id, first line, how many messages it holds, the
decisions of its newest score that left a result (each criterion's choice, probability and what
decided it) and its labels now (:func:`triage.store.labels.current`: the newest answer per criterion).
Filters: ``grep`` (every word must occur in the ticket's id or text, case-insensitively),
``labelled`` (True: only tickets with a label; False: only those without), ``limit``.

It only reads. This module is core: it must not import Textual.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from triage.store import labels as lab
from triage.store import times
from triage.store.history import History, _result

FIRST_LINE_CHARS = 200


@dataclass(frozen=True)
class Decision:
    """One criterion's decision in a stored result."""

    criterion: str
    choice: str
    probability: float
    source: str


@dataclass(frozen=True)
class RecentTicket:
    """One ticket of the history as ``triage history`` shows it."""

    row: int
    ticket_id: str
    when: object  # its newest score's start, else when the ticket was saved, as stored (see triage.store.times)
    first_line: str  # the first non-empty line of its text, at most FIRST_LINE_CHARS characters
    messages: int  # a thread's messages (1 for a plain ticket)
    status: str  # the newest score's status (done, cancelled, failed, running), "" when never scored
    pack: str | None  # the pack of the decisions shown, "name vVERSION"
    decisions: tuple[Decision, ...]  # of the newest score with a result (() when none)
    labels: dict[str, lab.Label]  # criterion -> the newest answer

    def to_dict(self) -> dict[str, object]:
        """The ticket as one JSON object (``triage history --json``)."""
        out = {
            "id": self.ticket_id,
            "row": self.row,
            "time": times.iso(self.when),  # null when the stored time is no time (then "time_raw" holds it)
            "first_line": self.first_line,
            "messages": self.messages,
            "status": self.status,
            "pack": self.pack,
            "decisions": {
                d.criterion: {"choice": d.choice, "probability": round(d.probability, 6), "source": d.source}
                for d in self.decisions
            },
            "labels": {
                c: {"option": la.option, "kind": la.kind, "shown": la.shown_option, "origin": la.origin}
                for c, la in self.labels.items()
            },
        }
        if out["time"] is None:
            out["time_raw"] = times.raw(self.when)
        return out


def first_line(text: str, limit: int = FIRST_LINE_CHARS) -> str:
    """The first line of ``text`` that holds anything, spaces collapsed, cut to ``limit`` characters."""
    line = next((s for s in (" ".join(x.split()) for x in text.splitlines()) if s), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _matches(words: list[str], ticket_id: str, text: str) -> bool:
    hay = f"{ticket_id}\n{text}".casefold()
    return all(w in hay for w in words)


def _rows(history: History) -> Iterator[tuple[int, str, str, object]]:
    """Every ticket row, newest activity first: (row, ticket id, text, when)."""
    yield from history.conn.execute(
        """SELECT t.id, t.ticket_id, t.text,
                  coalesce((SELECT max(s.started_at) FROM scores s WHERE s.ticket = t.id), t.updated_at) AS w
           FROM tickets t ORDER BY w DESC, t.id DESC"""
    )


def recent(
    history: History, *, grep: str = "", labelled: bool | None = None, limit: int | None = 20
) -> list[RecentTicket]:
    """The newest tickets that pass the filters, newest first (``limit`` None: all of them)."""
    words = [w.casefold() for w in grep.split()]
    labelled_rows = {int(r) for (r,) in history.conn.execute("SELECT DISTINCT ticket FROM labels")}
    out: list[RecentTicket] = []
    for row, ticket_id, text, when in _rows(history):
        if limit is not None and len(out) >= limit:
            break
        if labelled is not None and (row in labelled_rows) != labelled:
            continue
        if words and not _matches(words, ticket_id, text):
            continue
        out.append(_ticket(history, int(row), ticket_id, text, when))
    return out


def _ticket(history: History, row: int, ticket_id: str, text: str, when: object) -> RecentTicket:
    conn = history.conn
    newest = conn.execute(
        "SELECT status FROM scores WHERE ticket = ? ORDER BY started_at DESC, id DESC LIMIT 1", (row,)
    ).fetchone()
    shown = conn.execute(
        """SELECT result_json, pack_name, pack_version FROM scores WHERE ticket = ? AND result_json IS NOT NULL
           ORDER BY started_at DESC, id DESC LIMIT 1""",
        (row,),
    ).fetchone()
    result = _result(shown[0]) if shown else None
    decisions = (
        tuple(Decision(c.id, c.choice, c.probability(c.choice), c.source) for c in result.criteria)
        if result is not None
        else ()
    )
    messages = int(conn.execute("SELECT count(*) FROM messages WHERE ticket = ?", (row,)).fetchone()[0])
    return RecentTicket(
        row=row,
        ticket_id=ticket_id,
        when=when,
        first_line=first_line(text),
        messages=max(1, messages),
        status=newest[0] if newest else "",
        pack=f"{shown[1]} v{shown[2]}" if shown and shown[1] else None,
        decisions=decisions,
        labels=lab.current(history, row),
    )
