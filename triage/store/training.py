"""The training rows a history holds: labelled tickets, with the head's inputs where the score kept them.

``triage learn --history`` (and the app's re-learning) fit on these. A row is a
ticket with its current labels (the newest answer per criterion, see
:mod:`triage.store.labels`) given under the pack being learned (the same pack hash: an
option id means what its pack's version says; labels given under another pack or another
version of it are passed over and counted in :attr:`HistoryTraining.skipped`).
Where the ticket's newest score for the same model, prompt format and pack kept
its features (:mod:`triage.store.features`), they come with it and the ticket is
not scored again; otherwise the caller re-scores it and says how many.

This module is core: it must not import Textual.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from triage.store import features as feat
from triage.store import labels as lab
from triage.store.history import History

if TYPE_CHECKING:
    from triage.domain.pack import Pack


@dataclass
class HistoryRow:
    """One labelled ticket of the history."""

    ticket_row: int
    ticket_id: str
    text: str
    labels: dict[str, str]  # criterion id -> option id, in the pack
    kept: dict[str, feat.Kept] = field(default_factory=dict)  # the labelled criteria's kept inputs, when all are
    warnings: list[str] = field(default_factory=list)  # the kept score's warnings (a cut ticket says so)

    @property
    def needs_scoring(self) -> bool:
        """True when some labelled criterion has no kept inputs for this model, format and pack."""
        return any(c not in self.kept for c in self.labels)


@dataclass
class HistoryTraining:
    """The rows, and what was left out and why (criterion or option not in the pack)."""

    rows: list[HistoryRow]
    skipped: Counter[str] = field(default_factory=Counter)

    @property
    def kept(self) -> int:
        return sum(not r.needs_scoring for r in self.rows)

    @property
    def to_score(self) -> int:
        return sum(r.needs_scoring for r in self.rows)

    def notes(self) -> list[str]:
        """One line per reason labels were left out, most frequent first."""
        return [f"{n} label(s) left out: {why}" for why, n in self.skipped.most_common()]


def _warnings(history: History, score_id: int) -> list[str]:
    import json

    (raw,) = history.conn.execute("SELECT result_json FROM scores WHERE id = ?", (score_id,)).fetchone()
    try:
        return [str(w) for w in json.loads(raw or "{}").get("warnings", [])]
    except (ValueError, AttributeError):
        return []


def training_rows(history: History, pack: Pack, identity: feat.Identity) -> HistoryTraining:
    """Every labelled ticket of ``history`` as training rows for ``pack`` (oldest first answer first)."""
    by_crit = {c.id: {o.id for o in c.options} for c in pack.criteria}
    rows: dict[int, HistoryRow] = {}
    skipped: Counter[str] = Counter()
    for j in lab.judged(history):
        if j.answered_pack_hash != pack.hash:  # an option id means what its pack says: another pack's is not this
            other = "another version of" if j.pack_name == pack.name else "another pack than"
            skipped[
                f"given under {other} pack {pack.name!r} (pack hash {str(j.answered_pack_hash or 'unknown')[:12]}, "
                f"this one is {pack.hash[:12]})"
            ] += 1
            continue
        if j.criterion not in by_crit:
            skipped[f"criterion {j.criterion!r} is not in pack {pack.name!r}"] += 1
            continue
        if j.option not in by_crit[j.criterion]:
            skipped[f"option {j.option!r} is no option of {j.criterion!r} in pack {pack.name!r}"] += 1
            continue
        row = rows.setdefault(j.ticket_row, HistoryRow(j.ticket_row, j.ticket_id, j.text, {}))
        row.labels[j.criterion] = j.option
    for row in rows.values():
        score = feat.newest_with(history, row.ticket_row, identity)
        if score is None:
            continue
        kept = feat.load(history, score, identity)
        if all(c in kept for c in row.labels):
            row.kept = {c: kept[c] for c in row.labels}
            row.warnings = _warnings(history, score)
    return HistoryTraining(list(rows.values()), skipped)
