"""The one engine of ``triage serve`` and its queue: first come, first served, bounded.

llama.cpp is not thread-safe, so one thread owns the engine and scores one ticket at a
time. Requests wait in a bounded queue (:class:`QueueFull` when it is full: the route
answers 503 with ``Retry-After``). Each job streams its events to the asyncio loop of the
request that made it. A job whose client went away is cancelled through the same
``cancel()`` callable the app's Esc uses: checked inside llama.cpp's decodes, so the engine
stops within a decode and leaves its cache clean; a job cancelled while it waits is never
started. :meth:`EngineWorker.shutdown` (SIGTERM, Ctrl-C) answers every waiting job at once with
the documented 503 and stops the running score inside its decode.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from triage.domain.pack import Pack
from triage.domain.result import CriterionResult
from triage.domain.ticket import Ticket
from triage.errors import EngineError, FitError, HistoryError, TriageError
from triage.scoring.options import ScoreOptions
from triage.session import Session
from triage.settings import DEFAULTS

if TYPE_CHECKING:
    from triage.serve.starter_fit import StarterFit

log = logging.getLogger("triage.serve")

# Requests that may wait for the engine: absorbs a burst of 50 at once (a page's session re-sent, a helpdesk
# backfill); each waiting request holds its ticket and a few KiB of bookkeeping (docs/serve.md).
DEFAULT_QUEUE_LIMIT = DEFAULTS.serve_queue_limit
TERMINAL = ("result", "error")
STOPPING = {
    "status": 503,
    "error": "the server is stopping; this request was not scored",
    "hint": "send it again once triage serve runs again",
}
STOPPED_MID_SCORE = {
    "status": 503,
    "error": "the server stopped while this ticket was being scored; it was not finished",
    "hint": "send it again once triage serve runs again",
}
CLIENT_GONE = {"status": 499, "error": "cancelled: the client went away"}


class ChoreStopped(Exception):
    """The server is stopping: a background task on the engine thread ends at its next pause."""


class Stopping(Exception):
    """The server is shutting down: no new job is taken (HTTP 503)."""


class QueueFull(Exception):
    """The queue holds its limit of waiting requests (HTTP 503)."""

    def __init__(self, waiting: int, retry_after: int) -> None:
        super().__init__(f"{waiting} request(s) are waiting, the most this server queues")
        self.waiting = waiting
        self.retry_after = retry_after


def criterion_dict(c: CriterionResult) -> dict[str, object]:
    """One criterion as it appears in ``criteria`` of the ``triage.result/3`` JSON (``TicketResult.to_dict``)."""
    d = asdict(c)
    d["choice_label"] = c.choice_label
    d.pop("index", None)
    return d


@dataclass
class Job:
    """One score request: the ticket, how to score it, and where its events go.

    ``events`` receives ``(kind, data)`` pairs on the request's loop: ``prefilled``, one
    ``criterion`` per criterion, then ``result`` (the whole result) or ``error``
    (``{"status", "error", "hint"}``).
    """

    ticket: Ticket
    pack: Pack
    options: ScoreOptions
    keep: bool
    loop: asyncio.AbstractEventLoop
    events: asyncio.Queue[tuple[str, Any]] = field(default_factory=asyncio.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)
    finished: bool = False
    submitted: float = field(default_factory=time.monotonic)
    started: float = 0.0  # when the engine took it (time.monotonic)
    reason: str = ""  # why it was cancelled: "client" (went away), "shutdown" or "superseded" (a newer prefill)
    kind: str = "score"  # what the engine thread does with it (EngineWorker._run's one dispatch)
    work: Callable[[Session], None] | None = None  # kind "prefill": run this on the engine thread

    def cancel(self, reason: str = "client") -> None:
        """Stop this job: it is never started if it still waits; a running score stops inside its decode."""
        if not self.cancelled.is_set():
            self.reason = reason
            self.cancelled.set()

    @property
    def cancel_error(self) -> dict[str, object]:
        """The error event of a job that was cancelled (before it started or mid-score)."""
        if self.reason == "shutdown":
            return STOPPED_MID_SCORE if self.started else STOPPING
        return CLIENT_GONE if self.started else {"status": 499, "error": "cancelled before it started"}

    def emit(self, kind: str, data: object) -> None:
        """Hand one event to the request's loop (from the engine thread)."""
        if kind in TERMINAL:
            self.finished = True
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, data))
        except RuntimeError:  # the loop is closed: the server is shutting down
            self.cancel()


@dataclass
class Stats:
    """What the server has done since it started (``GET /v1/health``)."""

    served: int = 0
    cancelled: int = 0
    failed: int = 0
    rejected: int = 0  # answered 503: the queue was full
    stable_tokens: int = 0
    stable_cached: int = 0
    input_tokens: int = 0
    prefix_cached: int = 0
    recent_ms: deque[float] = field(default_factory=lambda: deque(maxlen=20))

    def as_dict(self) -> dict[str, object]:
        return {
            "served": self.served,
            "cancelled": self.cancelled,
            "failed": self.failed,
            "rejected": self.rejected,
            "stable_hit_rate": round(self.stable_cached / self.stable_tokens, 6) if self.stable_tokens else None,
            "prefix_hit_rate": round(self.prefix_cached / self.input_tokens, 6) if self.input_tokens else None,
            "median_score_ms": round(sorted(self.recent_ms)[len(self.recent_ms) // 2], 1) if self.recent_ms else None,
        }


class EngineWorker:
    """Owns the engine and scores queued jobs one at a time on its own thread.

    Args:
        session: the :class:`~triage.session.Session` every job is scored and kept through: its engine (closed
            by :meth:`stop` when ``owns_engine``), the fit policy (asked again for every job, so a head or
            calibration stored while the server runs is applied from the next request on) and the history
            (opened in the engine thread on the first job with ``keep``).
        queue_limit: the most requests that may wait (the one being scored is not counted).
    """

    def __init__(self, session: Session, *, queue_limit: int = DEFAULT_QUEUE_LIMIT, owns_engine: bool = True) -> None:
        if queue_limit < 1:
            raise ValueError("queue_limit must be at least 1")
        self.session = session
        self.engine = session.scorer  # a worker scores: its session has an engine
        self.queue_limit = queue_limit
        self.owns_engine = owns_engine
        self.stats = Stats()
        self._waiting: deque[Job] = deque()
        self._cond = threading.Condition()
        self._running: Job | None = None
        self._stopping = False
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="triage-engine", daemon=True)
        self._chore: Callable[[Callable[[], None]], None] | None = None
        self.starter: StarterFit | None = None  # a StarterFit in the background, for /v1/health
        self._handlers: dict[str, Callable[[Job], None]] = {  # a job's kind: who runs it
            "score": self._score,
            "prefill": self._work,
        }

    def run_first(self, chore: Callable[[Callable[[], None]], None]) -> None:
        """Run ``chore(between)`` on the engine thread as soon as it starts (call before :meth:`start`), serving
        requests all the while: the chore calls ``between()`` whenever the engine is free (after each row of a
        fit), which scores every job waiting then, and raises :class:`ChoreStopped` once the server is stopping
        (the chore ends there). A chore that fails is logged; requests go on being served."""
        self._chore = chore

    # -- the request side (the event loop's thread) -----------------------------------------
    def start(self) -> None:
        self._thread.start()

    def submit(self, job: Job) -> int:
        """Queue ``job``; returns how many jobs are ahead of it (0: it is next).

        Raises:
            QueueFull: :attr:`queue_limit` jobs already wait.
        """
        with self._cond:
            if self._stopping:
                raise Stopping()
            if len(self._waiting) >= self.queue_limit:
                self.stats.rejected += 1
                raise QueueFull(len(self._waiting), self._retry_after(len(self._waiting)))
            ahead = len(self._waiting) + (self._running is not None)
            self._waiting.append(job)
            self._cond.notify()
            return ahead

    def _retry_after(self, waiting: int) -> int:
        """Seconds until a place is likely free: the queue ahead times the recent median score."""
        recent = sorted(self.stats.recent_ms)
        per = recent[len(recent) // 2] / 1000 if recent else 2.0
        return max(1, math.ceil(per * (waiting + 1)))

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def busy(self) -> bool:
        """Whether a job is being scored (one whose answer is out no longer counts)."""
        job = self._running
        return job is not None and not job.finished

    def shutdown(self, timeout: float = 30.0) -> None:
        """Take no new job; answer every waiting one at once (503, the server is stopping); stop the running
        score inside its decode (its history row ends ``cancelled``); wait for the engine thread, which closes
        the history. Safe to call again, and from any thread."""
        with self._cond:
            self._stopping = True
            waiting = list(self._waiting)
            self._waiting.clear()
            if self._running is not None:
                self._running.cancel("shutdown")
            self._cond.notify_all()
        for job in waiting:  # never started: nothing of theirs is in the history
            job.cancel("shutdown")
            self.stats.cancelled += 1
            job.emit("error", job.cancel_error)
        if self._thread.is_alive():
            self._thread.join(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """:meth:`shutdown`, then close the engine (when this worker owns it)."""
        self.shutdown(timeout)
        if self.owns_engine and not self._thread.is_alive() and not self._closed:
            self._closed = True
            self.engine.close()

    # -- the engine thread ---------------------------------------------------------------------
    def _loop(self) -> None:
        if self._chore is not None:
            try:
                self._chore(self._between)
            except ChoreStopped:
                pass
            except BaseException:  # a background task never takes the server down
                log.exception("the engine thread's background task failed")
        while True:
            with self._cond:
                while not self._waiting and not self._stopping:
                    self._cond.wait()
                if not self._waiting:  # stopping, nothing left
                    break
                job = self._waiting.popleft()
                self._running = job
            self._run(job)
        self.session.close()  # the history, opened in this thread

    def _between(self) -> None:
        """A chore's pause: every job waiting now is scored; :class:`ChoreStopped` once the server stops."""
        while True:
            with self._cond:
                if self._stopping:
                    raise ChoreStopped()
                if not self._waiting:
                    return
                job = self._waiting.popleft()
                self._running = job
            self._run(job)

    def _run(self, job: Job) -> None:
        try:
            if job.cancelled.is_set():
                self.stats.cancelled += 1
                job.emit("error", job.cancel_error)
            else:
                self._handlers[job.kind](job)
        except BaseException:  # never let one job end the thread
            log.exception("the engine thread failed on a job")
            self.stats.failed += 1
            job.emit("error", {"status": 500, "error": "internal error while scoring; see the server's log"})
        finally:
            with self._cond:
                self._running = None

    def _work(self, job: Job) -> None:
        """A job that is not a score (a prefill: :mod:`triage.serve.prefill`) runs its own work here."""
        assert job.work is not None
        job.work(self.session)

    def _score(self, job: Job) -> None:
        """A ``score`` job: the session's one lifecycle (:meth:`~triage.session.Session.score`), its events handed
        to the request, its failure answered by :func:`error_event`."""
        from triage.scoring.engine import CriterionScored, Prefilled, TicketScored

        final = None
        t0 = time.perf_counter()

        def begun(_scoring: object) -> None:  # kept (when asked): the engine takes the job now
            job.started = time.monotonic()

        try:
            events = self.session.score(
                job.ticket, job.pack, job.options, keep=job.keep, cancel=job.cancelled.is_set, begun=begun
            )
            for event in events:
                if isinstance(event, Prefilled):
                    job.emit(
                        "prefilled",
                        {
                            "ticket_id": job.ticket.id,
                            "criteria": event.criteria,
                            "prefill_ms": round(event.prefill_ms, 3),
                            "queued_ms": round((job.started - job.submitted) * 1000, 3),
                        },
                    )
                elif isinstance(event, CriterionScored):
                    job.emit("criterion", criterion_dict(event.result))
                elif isinstance(event, TicketScored):
                    final = event
        except TriageError as exc:
            self.stats.failed += 1
            job.emit("error", error_event(exc))
            return
        assert final is not None
        result = final.result
        if not result.complete:
            self.stats.cancelled += 1
            job.emit("error", job.cancel_error)
            return
        self.stats.served += 1
        self.stats.recent_ms.append((time.perf_counter() - t0) * 1000)
        tok = result.tokens
        self.stats.stable_tokens += tok.stable
        self.stats.stable_cached += tok.stable_cached
        self.stats.input_tokens += tok.total_input
        self.stats.prefix_cached += tok.prefix_cached
        job.emit("result", result.to_dict())


# The one place a failure becomes an HTTP status (docs/serve.md, "Statuses"; the OpenAPI text says the same).
STATUS_OF_FAILURE: tuple[tuple[type[TriageError], int], ...] = (
    (HistoryError, 409),  # locked by another process, read-only, full, a newer schema; ResultNotKept too
    (FitError, 422),  # a head or calibration that cannot be read or does not fit
    (EngineError, 422),  # the engine refused or failed on this ticket
    (TriageError, 422),
)


def error_event(exc: TriageError) -> dict[str, Any]:
    """The ``error`` event (``{"status", "error", "hint"}``) of a failed score (:data:`STATUS_OF_FAILURE`)."""
    status = next(code for kind, code in STATUS_OF_FAILURE if isinstance(exc, kind))
    hint = exc.hint
    if isinstance(exc, HistoryError) and not hint:
        hint = "retry when the other triage (or sqlite3 session) has finished writing, or move the file aside"
    return {"status": status, "error": exc.message, "hint": hint}


def history_locked(exc: BaseException) -> bool:
    """Whether a SQLite error means another connection holds the history (busy or locked): HTTP 409."""
    from triage.store.history_faults import is_busy

    return isinstance(exc, sqlite3.OperationalError) and (is_busy(exc) or "locked" in str(exc).lower())


def history_error(exc: BaseException) -> dict[str, Any]:
    """The error (409) of a history the label and ticket routes cannot use: a :class:`~triage.errors.TriageError`
    (:func:`error_event`'s answer, a newer schema or damaged file too), or SQLite's "database is locked"."""
    if isinstance(exc, TriageError):
        return {**error_event(exc), "status": 409}
    message = f"the history is locked by another process ({exc})"
    return {
        "status": 409,
        "error": message,
        "hint": "retry when the other triage (or sqlite3 session) has finished writing",
    }
