"""What the screens mark about labels: which of a ticket's labels stand for one of its scores, and how many
criteria each ticket has labelled.

Labels belong to a ticket (a history row: a thread is one row, whatever its replies), not to one score
(:mod:`triage.store.labels`). A label **stands** for a score of its ticket when all of these hold:

* it is the newest answer for its criterion (:func:`triage.store.labels.current`);
* it was given with the score's pack (same pack hash; a label without one is taken as the same pack),
  and the score's result has the criterion and the label's option;
* the score decided on at least as many of the thread's messages as the score the label answered: an
  answer given after message 3 is not put on a decision made after message 1, before the agent's reading.

A standing label given on fewer messages than the score is **carried**: the thread grew (a reply was
added) and nobody answered again, so the answer is still the agent's. The screen shows it as the
agent's answer, with the message count it was given at; where the new decision differs from it, the
card shows both (the model's new choice and ``you: X``).

This module is core: it must not import Textual.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from triage.domain.result import TicketResult
from triage.store.history import History
from triage.store.labels import Label, current


@dataclass(frozen=True)
class Standing:
    """A label that stands for a score: the agent's ``option`` for ``criterion``.

    ``given_at``: how many messages the score it answered had decided on; ``carried``: fewer than the
    score it stands for (given before the newer messages).
    """

    criterion: str
    option: str
    given_at: int
    carried: bool


def standing(labels: Mapping[str, Label], result: TicketResult, given_at: Mapping[int, int]) -> dict[str, Standing]:
    """The labels (newest per criterion, as :func:`current` gives them) that stand for ``result``, by criterion.

    ``given_at``: per score id, how many messages that score decided on (a label whose score is absent,
    or has no score, was given on 1 message). See the module docstring for the rule.
    """
    on = max(1, result.thread.messages)
    pack_hash = result.pack.get("hash")
    by_id = {c.id: c for c in result.criteria}
    out: dict[str, Standing] = {}
    for criterion, label in labels.items():
        crit = by_id.get(criterion)
        if crit is None or label.option not in {o.id for o in crit.options}:
            continue
        if label.pack_hash is not None and pack_hash is not None and label.pack_hash != pack_hash:
            continue
        at = given_at.get(label.score_id, 1) if label.score_id is not None else 1
        if at > on:
            continue
        out[criterion] = Standing(criterion, label.option, at, carried=at < on)
    return out


def standing_for(history: History, ticket_row: int, result: TicketResult) -> dict[str, Standing]:
    """The labels of the ticket in ``ticket_row`` that stand for ``result`` (one of its scores), by criterion."""
    labels = current(history, ticket_row)
    ids = sorted({lab.score_id for lab in labels.values() if lab.score_id is not None})
    given_at: dict[int, int] = {}
    if ids:
        marks = ",".join("?" * len(ids))
        rows = history.conn.execute(f"SELECT id, coalesce(messages, 1) FROM scores WHERE id IN ({marks})", ids)
        given_at = {int(sid): int(n) for sid, n in rows.fetchall()}
    return standing(labels, result, given_at)


def labelled_criteria(history: History, ticket_rows: Iterable[int]) -> dict[int, int]:
    """Per ticket row, how many criteria have a label (rows without labels are left out)."""
    rows = sorted(set(ticket_rows))
    out: dict[int, int] = {}
    for start in range(0, len(rows), 500):  # SQLite caps the number of parameters
        chunk = rows[start : start + 500]
        marks = ",".join("?" * len(chunk))
        found = history.conn.execute(
            f"SELECT ticket, count(DISTINCT criterion) FROM labels WHERE ticket IN ({marks}) GROUP BY ticket", chunk
        )
        out.update({int(t): int(n) for t, n in found.fetchall()})
    return out
