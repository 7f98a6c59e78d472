"""The history as ``triage serve``'s ticket routes see it: the newest tickets, and labels recorded.

:func:`recent_tickets` answers ``GET /v1/tickets`` (each ticket's messages, the status of its
newest score, its newest finished result, its labels now; :mod:`triage.serve.listing` bounds the
response), :func:`one_ticket` ``GET /v1/tickets/{id}`` (one whole); :func:`record_labels` records an
agent's answers as ``triage label`` does (origin ``serve``), with the same checks and errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from triage.serve.requests import Invalid

if TYPE_CHECKING:
    from triage.store.history import History


def record_labels(history_path: Path | None, ticket_id: str, labels: dict[str, str]) -> list[dict[str, object]]:
    """Record labels as ``triage label`` does (origin ``serve``); the same checks and errors.

    Raises:
        Invalid: an unknown ticket (field ``id``), criterion or option (field ``labels``).
        TriageError: the history cannot be written.
    """
    from triage.errors import InputError
    from triage.store import labels as lab
    from triage.store.history import History

    history = History.open_writable(history_path)
    with history:
        try:
            scored = lab.find_ticket(history, ticket_id)
        except InputError as exc:
            raise Invalid("id", exc.message, hint=exc.hint) from None
        answers = [lab.Answer(c, o) for c, o in labels.items()]
        try:
            stored = lab.record(history, scored, answers, origin="serve")
        except InputError as exc:
            raise Invalid("labels", exc.message, hint=exc.hint) from None
    return [
        {"criterion": s.criterion, "option": s.option, "kind": s.kind, "shown_option": s.shown_option} for s in stored
    ]


def recent_tickets(history_path: Path | None, limit: int) -> dict[str, object]:
    """``GET /v1/tickets``: the history's newest tickets (by their last change), each with its messages, the
    status of its newest score, its newest finished result and its labels now (each with ``given_at``: the
    message count it was given on, None where it does not stand for that result).

    The history is only read (SQLite ``mode=ro``, as ``triage stats`` reads): nothing is created, migrated or
    moved; a read-only or write-locked history is read as it is; none yet is an empty list.

    Raises:
        TriageError: the history cannot be read (a newer schema, damaged: refused, never moved aside; not a
            history), as a :class:`~triage.store.history_faults.HistoryFault`.
    """
    from triage.store.history import History
    from triage.store.history_open import history_path as named

    shown = named(history_path)
    history = History.open_readonly(history_path)  # a listing: nothing is created, migrated or moved aside
    if history.path is None:  # no history yet: nothing kept so far
        history.close()
        return {"history": str(shown), "tickets": []}
    with history, history.guard():
        rows = history.conn.execute(
            "SELECT id FROM tickets ORDER BY updated_at DESC, id DESC LIMIT ?", (limit,)
        ).fetchall()
        out = [_entry(history, int(row)) for (row,) in rows]
    return {"history": str(history.path), "tickets": out}


def _entry(history: History, row: int) -> dict[str, object]:
    """One ticket of the history, whole: its messages, the status of its newest score, its newest finished
    result, its labels now."""
    from triage.errors import InputError
    from triage.store import labels as lab
    from triage.store.label_marks import standing_for

    saved = history.load_ticket(row)
    try:
        newest = lab.scored_ticket(history, row).result
    except InputError:  # never scored to the end
        newest = None
    result = newest.to_dict() if newest is not None else None
    # the message count each standing label was given on (a reply since: the card says so)
    given = {c: s.given_at for c, s in standing_for(history, row, newest).items()} if newest else {}
    return {
        "id": saved.ticket_id,
        "text": saved.text,
        "messages": [{"role": m.role, "text": m.text} for m in saved.messages] if saved.is_thread else None,
        "status": saved.status,
        "result": result,
        "labels": {
            c: {
                "option": a.option,
                "kind": a.kind,
                "shown_option": a.shown_option,
                "origin": a.origin,
                "given_at": given.get(c),
            }
            for c, a in lab.current(history, row).items()
        },
    }


def one_ticket(history_path: Path | None, ticket_id: str) -> dict[str, object]:
    """``GET /v1/tickets/{id}``: one ticket of the history, whole (every message, uncut), as the listing
    shows it before :func:`triage.serve.listing.summarise`.

    Raises:
        Invalid: no ticket of that id (field ``id``).
        TriageError: the history cannot be used.
        sqlite3.OperationalError: it is locked.
    """
    from triage.store.history import History

    history = History.open_readonly(history_path)  # a read: nothing is created, migrated or moved aside
    if history.path is None:  # no history yet
        history.close()
        raise Invalid("id", "the history holds no ticket of that id", hint="GET /v1/tickets lists the ticket ids")
    with history, history.guard():
        found = history.conn.execute(
            "SELECT id FROM tickets WHERE ticket_id = ? ORDER BY updated_at DESC, id DESC LIMIT 1", (ticket_id,)
        ).fetchone()
        if found is None:
            raise Invalid("id", "the history holds no ticket of that id", hint="GET /v1/tickets lists the ticket ids")
        ticket = _entry(history, int(found[0]))
    return {"history": str(history.path), "ticket": ticket}
