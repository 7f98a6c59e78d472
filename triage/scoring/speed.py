"""How fast this engine decodes on this machine now: tokens per second over its last decodes.

Measured, never assumed: every finished score adds the tokens it evaluated and the time its
decodes took (a stable block computed, apart), and the rate is the tokens of the last few over
their time. The app turns a ticket's token count into "about N s" with it before scoring
(:meth:`Speed.seconds`); until something was decoded it knows nothing and says nothing.
"""

from __future__ import annotations

import threading
from collections import deque

KEEP = 8  # decodes the rate is taken over: recent enough to follow a machine that got busy


class Speed:
    """Tokens per second over the last :data:`KEEP` decodes (safe to read from another thread)."""

    def __init__(self, keep: int = KEEP) -> None:
        self._last: deque[tuple[int, float]] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def record(self, tokens: int, ms: float) -> None:
        """``tokens`` were decoded in ``ms`` milliseconds (nothing, or no time: not recorded)."""
        if tokens > 0 and ms > 0:
            with self._lock:
                self._last.append((tokens, ms))

    @property
    def tokens_per_s(self) -> float | None:
        """The measured rate, or None before anything was decoded."""
        with self._lock:
            tokens = sum(t for t, _ in self._last)
            ms = sum(m for _, m in self._last)
        return tokens / ms * 1000 if ms > 0 else None

    def seconds(self, tokens: int) -> float | None:
        """How long ``tokens`` would take at the measured rate (None: nothing measured yet)."""
        rate = self.tokens_per_s
        return tokens / rate if rate else None
