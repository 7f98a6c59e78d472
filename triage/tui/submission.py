"""One press of F5: the ticket, what it is scored with, and its place in history."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from triage.domain.pack import Pack
from triage.domain.result import Tokens
from triage.domain.ticket import Ticket
from triage.scoring.options import ScoreOptions


@dataclass
class Submission:
    """A ticket submitted for scoring.

    ``id`` grows with every submit; messages of an older submission are stale.
    ``cancel`` is what the engine's cancel callback checks between tails.

    Its worker may never run (F5 pressed again before the worker's thread started:
    Textual drops a cancelled worker that has not begun). So who ends its history row is
    decided once: the worker :meth:`claim` s it when it starts scoring, and then ends the
    row itself; the screen :meth:`abandon` s it when it is superseded or cancelled first,
    and then ends the row as cancelled. Exactly one of the two succeeds.
    """

    id: int
    ticket: Ticket
    pack: Pack
    options: ScoreOptions = field(default_factory=ScoreOptions)  # the product's, as `triage score`
    submitted_at: float = field(default_factory=time.monotonic)
    ticket_row: int | None = None  # history rows, None when history could not be written
    score_id: int | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    started: bool = False
    finished: bool = False
    decided: int = 0
    tokens: Tokens | None = None
    prefill_ms: float | None = None
    progress_from: tuple[str, float, int] | None = None  # (phase, when, tokens done) at its first progress
    read: tuple[int, int] | None = None  # (tokens read, of) at the ticket phase's last progress
    _owner: str = ""  # "worker" once claimed, "screen" once abandoned
    _owner_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def time_left(self, phase: str, done: int, total: int, now: float) -> float | None:
        """Seconds the decode still needs at the pace it has kept since this phase's first progress (None:
        too early to tell)."""
        if self.progress_from is None or self.progress_from[0] != phase:
            self.progress_from = (phase, now, done)
            return None
        _, t0, d0 = self.progress_from
        if done <= d0 or now <= t0:
            return None
        return (total - done) * (now - t0) / (done - d0)

    def claim(self) -> bool:
        """The worker starts scoring: True unless the screen abandoned the submission first."""
        return self._take("worker")

    def abandon(self) -> bool:
        """The screen gives the submission up: True when no worker had started scoring it."""
        return self._take("screen")

    def _take(self, who: str) -> bool:
        with self._owner_lock:
            if not self._owner:
                self._owner = who
            return self._owner == who
