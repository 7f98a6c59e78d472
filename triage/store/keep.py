"""Keeping scored tickets in the history, as the app does: the ticket, its result, and what a head reads.

``triage score --history`` (and the server) keep each ticket through one :class:`ScoreKeeper`:
the ticket is saved when its score starts, the result (or the error) when it ends, each in its
own transaction, and the head's inputs of every criterion (:mod:`triage.store.features`) with
the result, so that labels on it can be learned from without scoring again.

This module is core: it must not import Textual.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triage.store import features as feat
from triage.store.history import History


@dataclass
class Keeping:
    """One ticket being kept: its rows in the history."""

    keeper: ScoreKeeper
    ticket_row: int
    score_id: int

    def finished(self, done: Any) -> int:
        """Store the final event of a score (``TicketScored``); returns 1 when it was kept."""
        result = done.result
        self.keeper.history.finish_score(self.score_id, result)
        kept = feat.from_scored(done.readouts, done.features)
        if kept:
            ident = feat.Identity(result.model.get("sha256", ""), result.prompt_format, result.pack.get("hash", ""))
            feat.save(self.keeper.history, self.score_id, ident, kept, keep=self.keeper.keep)
        return 1

    def failed(self, error: str) -> None:
        """The score stopped with an error: say so in the history."""
        self.keeper.history.fail_score(self.score_id, error)


@dataclass
class ScoreKeeper:
    """Keeps scores in one history file (see the module docstring)."""

    history: History
    keep: int = feat.DEFAULT_KEEP

    @classmethod
    def open(cls, path: Path | None = None, *, keep: int = feat.DEFAULT_KEEP) -> ScoreKeeper:
        """Open the history for writing.

        Raises:
            TriageError: it cannot be written (a newer schema, locked, unusable).
        """
        return cls(History.open_writable(path), keep)

    @property
    def path(self) -> Path | None:
        return self.history.path

    def begin(self, ticket: Any, engine: Any, pack: Any, options: Any) -> Keeping:
        """Save the ticket and that its score has started."""
        row = self.history.save_ticket(ticket)
        sid = self.history.start_score(
            row,
            model=engine.model_info,
            pack={"name": pack.name, "version": pack.version, "hash": pack.hash},
            orderings=options.effective_orderings,
            messages=len(ticket.thread),
        )
        return Keeping(self, row, sid)

    def close(self) -> None:
        self.history.close()
