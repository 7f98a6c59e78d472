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

A label keeps its **meaning** over the thread: its ``kind`` is what it was when given (a ``correction``
of the decision shown then, ``shown``, or a ``confirmation`` of it), never re-read against a newer
decision. A correction to ``medium`` stays ``you: medium`` after a reply made the model say ``medium``
too; a confirmation of ``high`` stays ``confirmed high`` after the model moved to ``medium``
(:meth:`Standing.verdict`).

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
    score it stands for (given before the newer messages). ``kind``: ``correction`` or ``confirmation``
    of ``shown``, the decision shown when it was given (None: unknown, an old label).
    """

    criterion: str
    option: str
    given_at: int
    carried: bool
    kind: str = "confirmation"
    shown: str | None = None

    @property
    def corrected(self) -> bool:
        """The agent chose another option than the decision shown when answering."""
        return self.kind == "correction"

    def verdict(self, *, on_thread: bool = False) -> str:
        """The label in a few words, as given: ``you: medium`` (a correction) or ``confirmed`` (``confirmed
        high`` once carried: the decision now may differ), with ``(msg N)`` when carried or ``on_thread``."""
        if self.corrected:
            words = f"you: {self.option}"
        else:
            words = f"confirmed {self.option}" if self.carried else "confirmed"
        return words + (f" (msg {self.given_at})" if self.carried or on_thread else "")


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
        kind = label.kind if label.kind in ("confirmation", "correction") else "confirmation"
        if label.shown_option is not None:  # what it was when given: against the decision shown then
            kind = "confirmation" if label.option == label.shown_option else "correction"
        out[criterion] = Standing(criterion, label.option, at, carried=at < on, kind=kind, shown=label.shown_option)
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


def standing_on_entries(
    history: History, entries: Iterable[tuple[int, int | None, str | None, int]]
) -> dict[tuple[int, int | None], dict[str, Standing]]:
    """For the history list: per ``(ticket_row, score_id, pack_name, scored)`` entry (``scored``: the messages
    the score decided on; ``pack_name``: its pack's name), the ticket's labels that stand for that score, by
    criterion, keyed ``(ticket_row, score_id)``. The list has no results, so the pack is compared by name and
    the option is not checked against the score's (a label always names an option of its pack)."""
    wanted = list(entries)
    rows = sorted({e[0] for e in wanted})
    newest: dict[int, dict[str, tuple[str, str, str | None, str | None, int]]] = {}
    for start in range(0, len(rows), 500):  # SQLite caps the number of parameters
        chunk = rows[start : start + 500]
        marks = ",".join("?" * len(chunk))
        found = history.conn.execute(
            f"""SELECT l.ticket, l.criterion, l.option, l.kind, l.shown_option, l.pack_name,
                       coalesce(s.messages, 1)
                FROM labels l LEFT JOIN scores s ON s.id = l.score
                WHERE l.id IN (SELECT max(id) FROM labels WHERE ticket IN ({marks}) GROUP BY ticket, criterion)""",
            chunk,
        )
        for ticket, criterion, option, kind, shown, pack_name, at in found.fetchall():
            newest.setdefault(int(ticket), {})[criterion] = (option, kind, shown, pack_name, int(at))
    out: dict[tuple[int, int | None], dict[str, Standing]] = {}
    for row, score_id, pack_name, scored in wanted:
        stands: dict[str, Standing] = {}
        for criterion, (option, kind, shown, label_pack, at) in newest.get(row, {}).items():
            if at > max(1, scored) or (label_pack and pack_name and label_pack != pack_name):
                continue
            if shown is not None:
                kind = "confirmation" if option == shown else "correction"
            stands[criterion] = Standing(criterion, option, at, at < max(1, scored), kind, shown)
        if stands:
            out[(row, score_id)] = stands
    return out
