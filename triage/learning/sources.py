"""Labelled rows from several sources at once: files (in the order given) and the history.

``triage learn`` reads any number of labelled files and, with ``--history``, the labels
agents gave in the app or with ``triage label``. A ticket text that comes more than once
is learned once: its labels are merged criterion by criterion, a later source winning
(files in the order given, then the history), and the count is said. A history row whose
score kept the head's inputs for this model, format and pack comes with a ready
:class:`~triage.learning.cache.Outcome`, so it is not scored again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from triage.domain.ticket import make_ticket
from triage.learning.cache import Outcome
from triage.learning.labelled import LabelledRow, LabelledSet
from triage.store.training import HistoryTraining


@dataclass
class Sources:
    """The merged rows, the outcomes already known (by ticket sha256), and what merging said."""

    rows: LabelledSet
    known: dict[str, Outcome] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def kept_outcome(kept: dict, warnings: list[str]) -> Outcome:
    """An outcome (what eval and learn read of a score) from a history row's kept inputs."""
    n = {cid: len(k.raw) for cid, k in kept.items()}
    readouts = {cid: [(tuple(range(n[cid])), k.raw, k.coverage)] for cid, k in kept.items()}
    return Outcome(readouts, list(warnings), 0.0, {cid: k.features for cid, k in kept.items()})


def merge(sets: Sequence[LabelledSet], history: HistoryTraining | None = None) -> Sources:
    """One set of rows from ``sets`` and the ``history`` (see the module docstring)."""
    order: list[str] = []
    rows: dict[str, LabelledRow] = {}
    known: dict[str, Outcome] = {}
    repeats = 0
    bad = [b for s in sets for b in s.bad]
    ignored: dict[str, int] = {}
    notes = [n for s in sets for n in s.notes]
    for s in sets:
        for cid, k in s.ignored_criteria.items():
            ignored[cid] = ignored.get(cid, 0) + k

    def add(row: LabelledRow, outcome: Outcome | None = None) -> None:
        nonlocal repeats
        sha = row.ticket.sha256
        if sha in rows:
            repeats += 1
            old = rows[sha]
            rows[sha] = LabelledRow(old.line, old.ticket, {**old.labels, **row.labels})
        else:
            order.append(sha)
            rows[sha] = row
        if outcome is not None and set(rows[sha].labels) <= set(outcome.readouts):
            known[sha] = outcome
        else:
            known.pop(sha, None)  # labels the kept inputs do not cover: score it

    for s in sets:
        for r in s.rows:
            add(r)
    if history is not None:
        for h in history.rows:
            ticket = make_ticket(h.text, h.ticket_id)
            add(LabelledRow(0, ticket, dict(h.labels)), None if h.needs_scoring else kept_outcome(h.kept, h.warnings))
        notes += history.notes()
    if repeats:
        notes.append(f"{repeats} repeated ticket text(s) learned once, labels merged (a later source wins)")
    source = " + ".join([s.source for s in sets] + (["the history"] if history is not None else []))
    return Sources(LabelledSet(source, [rows[k] for k in order], bad, ignored, notes), known, notes)
