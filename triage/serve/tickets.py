"""The history as ``triage serve``'s ticket routes see it: the newest tickets, and labels recorded.

:func:`recent_tickets` answers ``GET /v1/tickets`` (each ticket's messages, the status of its
newest score, its newest finished result, its labels now); :func:`record_labels` records an
agent's answers as ``triage label`` does (origin ``serve``), with the same checks and errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from triage.errors import TriageError
from triage.serve.requests import Invalid


def record_labels(history_path: Path | None, ticket_id: str, labels: dict[str, str]) -> list[dict[str, Any]]:
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


def recent_tickets(history_path: Path | None, limit: int) -> dict[str, Any]:
    """``GET /v1/tickets``: the history's newest tickets (by their last change), each with its messages, the
    status of its newest score, its newest finished result and its labels now (each with ``given_at``: the
    message count it was given on, None where it does not stand for that result).

    Raises:
        TriageError: the history cannot be used (a newer schema; locked when it was opened).
        sqlite3.OperationalError: it is locked.
    """
    from triage.errors import InputError
    from triage.store import labels as lab
    from triage.store.history import History
    from triage.store.label_marks import standing_for

    history = History.open(history_path)
    if history.path is None:
        history.close()
        raise TriageError(f"the history cannot be read: {history.notice}")
    with history:
        rows = history.conn.execute(
            "SELECT id FROM tickets ORDER BY updated_at DESC, id DESC LIMIT ?", (limit,)
        ).fetchall()
        out = []
        for (row,) in rows:
            saved = history.load_ticket(int(row))
            try:
                newest = lab.scored_ticket(history, int(row)).result
            except InputError:  # never scored to the end
                newest = None
            result = newest.to_dict() if newest is not None else None
            # the message count each standing label was given on (a reply since: the card says so)
            given = {c: s.given_at for c, s in standing_for(history, int(row), newest).items()} if newest else {}
            out.append(
                {
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
                        for c, a in lab.current(history, int(row)).items()
                    },
                }
            )
    return {"history": str(history.path), "tickets": out}
