"""``triage serve``'s first start without a starter head: it answers at once, zero-shot, and fits the head behind.

The built-in pack's starter head (:mod:`triage.learning.starter`) is fitted on the engine thread *between*
requests (:meth:`~triage.serve.worker.EngineWorker.run_first`): after each of the starter set's rows, every
request waiting is scored first, so a request waits at most one row. The numpy fit that follows the rows runs
on a thread of its own, the engine free for requests all the while. Until the head is stored, decisions say
``zero-shot`` (or ``calibrated``); the next request after it says ``starter`` (the fit policy is asked again
for every request).

:class:`StarterFit` keeps how far it is for ``GET /v1/health`` (``starter``: state, rows done of all, the rate
measured on this machine and the time left from it; then the head's fit, criteria done of all) and says so on
stderr in plain lines (a line at the start, then every tenth of the rows or ten seconds, each criterion's fit,
and the end). Stopping the server stops the fit at its next row (the rows scored so far stay in eval's readout
cache, so the next start resumes there).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console

from triage.domain.pack import Pack
from triage.evaluation.progress import PlainProgress, SmoothRate, duration

if TYPE_CHECKING:
    from triage.scoring.protocol import ScoringEngine

STATES = ("fitting", "fitting head", "done", "failed", "stopped")


class StarterFit:
    """The starter head's fit in the background of one server; :meth:`run` is the engine thread's chore."""

    def __init__(
        self, engine: ScoringEngine, pack: Pack, *, say: Callable[[str], None], console: Console | None = None
    ) -> None:
        from triage.learning.starter import CriterionClock, starter_rows

        self.engine = engine
        self.pack = pack
        self.say = say
        self.console = console if console is not None else Console(stderr=True)
        self.total = len(starter_rows(pack))
        self.done = 0
        self.state = "fitting"
        self.error: str | None = None
        self.started = time.monotonic()
        self.ended: float | None = None
        self.rate = SmoothRate()
        self.clock = CriterionClock(len(pack.criteria), say)  # the head's fit after the rows, criterion by criterion
        self._fitter: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, between: Callable[[], None]) -> None:
        """Score the starter rows, ``between()`` after each (requests are served there; it raises when the
        server stops), then fit and store the head on a thread of its own."""
        from triage.errors import TriageError
        from triage.learning.starter import score_starter_rows

        self.say(
            f"fitting the starter head for {self.engine.name} on triage's {self.total} example tickets in the "
            "background: decisions are zero-shot until it is in; GET /v1/health says how far it is (once per "
            "model; TRIAGE_STARTER=0 or `starter = false` in the config turns it off)"
        )
        self.started = time.monotonic()
        lines = PlainProgress(self.console)
        task = lines.add_task("starter head", total=self.total)

        def progress(done: int, total: int) -> None:
            with self._lock:
                self.done = done
                self.rate.add(time.monotonic(), done)
            lines.update(task, advance=1)
            between()

        self.rate.add(time.monotonic(), 0)
        try:
            with lines:
                scored = score_starter_rows(self.engine, self.pack, progress=progress)
        except (TriageError, OSError) as exc:
            self._end("failed", getattr(exc, "message", None) or str(exc))
            return
        except BaseException:
            self._end("stopped")
            raise
        with self._lock:
            self.state = "fitting head"
        self._fitter = threading.Thread(target=self._fit, args=(scored,), name="triage-starter-fit", daemon=True)
        self._fitter.start()

    def _fit(self, scored: Any) -> None:
        from triage.errors import TriageError
        from triage.learning.starter import UNKEPT_HINT, fit_starter_head, keep_head

        try:
            head, _ = fit_starter_head(self.engine, self.pack, scored.rows, scored.outcomes, on_criterion=self.clock)
        except (TriageError, OSError, ValueError) as exc:
            self._end("failed", getattr(exc, "message", None) or str(exc))
            return
        unkept = keep_head(head)  # a full disk never costs the fit: the head is then applied from memory
        self._end("done")
        if unkept:
            self.say(f"warning: {'; '.join(unkept)}; {UNKEPT_HINT}")
        self.say(
            f"starter head fitted in {duration(time.monotonic() - self.started)}: {', '.join(head.criteria)} "
            "now decided by it, from the next request on"
        )

    def _end(self, state: str, error: str | None = None) -> None:
        with self._lock:
            self.state, self.error, self.ended = state, error, time.monotonic()
        if state == "failed":
            self.say(f"the starter head could not be fitted ({error}); scoring stays zero-shot")

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the numpy fit, if it started; True when nothing of the fit runs any more."""
        fitter = self._fitter
        if fitter is not None:
            fitter.join(timeout)
            return not fitter.is_alive()
        return True

    def as_dict(self) -> dict[str, object]:
        """``GET /v1/health``'s ``starter``: the state, rows done of all, the measured rate and the time left."""
        with self._lock:
            now = self.ended if self.ended is not None else time.monotonic()
            rate = self.rate.rate
            left = (
                self.rate.left(self.total - self.done)
                if self.state == "fitting"
                else self.clock.left()
                if self.state == "fitting head"
                else None
            )
            return {
                "state": self.state,
                "rows_done": self.done,
                "rows": self.total,
                "rows_per_s": round(rate, 3) if rate else None,
                "eta_s": round(left, 1) if left is not None else None,
                "criteria_done": self.clock.done if self.state == "fitting head" else None,
                "criteria": self.clock.criteria,
                "elapsed_s": round(now - self.started, 1),
                "error": self.error,
            }
