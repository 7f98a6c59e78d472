"""One press of F5: the ticket, what it is scored with, and its place in history."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from triage.scoring.options import DEFAULT_READOUT
from triage.scoring.pack import Pack
from triage.scoring.result import Tokens
from triage.scoring.ticket import Ticket


@dataclass
class Submission:
    """A ticket submitted for scoring.

    ``id`` grows with every submit; messages of an older submission are stale.
    ``cancel`` is what the engine's cancel callback checks between tails.
    """

    id: int
    ticket: Ticket
    pack: Pack
    mode: str
    orderings: str
    readout: str = DEFAULT_READOUT
    submitted_at: float = field(default_factory=time.monotonic)
    ticket_row: int | None = None  # history rows, None when history could not be written
    score_id: int | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    started: bool = False
    finished: bool = False
    decided: int = 0
    tokens: Tokens | None = None
    prefill_ms: float | None = None
