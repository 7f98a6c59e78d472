"""One scoring session: the engine, the fit policy and the history keeper, for every front end.

This is the only module that combines scoring, the fit policy and the history. ``triage score``,
``triage serve``'s engine thread, the app (through :class:`triage.tui.desk.Desk`) and the Ray workers
score through a :class:`Session`, one lifecycle for all of them:

- :meth:`Session.fits`: the head and calibration the one policy (:func:`~triage.learning.fit.choose_fits`)
  chooses *now*, so a head stored while the session runs is applied from the next ticket on; or the
  fixed fits it was given (Ray: the driver chose them through a session of its own for the nodes' model).
- :meth:`Session.score`: one call scores a ticket, streams its events and keeps it in the history
  (the ticket when its score starts, the result, error or cancel when it ends, and what a learned head
  reads, so labels on it are learned from without scoring again). :meth:`Session.score_many` does the
  same for a stream of tickets, one decode per ticket.
- :meth:`Session.label`: records an agent's answers on a kept score; :meth:`Session.unstarted` keeps a
  score cancelled before its engine took it.

Its failures are typed (:mod:`triage.errors`): :class:`~triage.errors.FitError`,
:class:`~triage.errors.HistoryError` (:class:`~triage.errors.ResultNotKept` when only the result could not be
kept) and :class:`~triage.errors.EngineError`; every one is kept on the score's row first, where it has one.
A session made with ``on_fault`` (the app) says a history that refuses a write through it and scores on.

SQLite connections belong to the thread that opened them: the history is opened on first use, in the
thread that uses it; a history given to the session belongs to the thread that made the session. A score on
another thread (the app's score worker) keeps through a connection of its own, opened for that score and
closed when it ends.
"""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from triage.domain.pack import Pack
from triage.domain.ticket import Ticket
from triage.errors import EngineError, FitError, HistoryError, InputError, ResultNotKept, TriageError
from triage.learning.fit import FitNote, FitRequest, Fits, choose_fits, starter_on
from triage.scoring.options import PRODUCT_READ, ScoreOptions
from triage.settings import DEFAULTS
from triage.store import features as feat

if TYPE_CHECKING:
    from triage.scoring.engine import Progress, ScoreEvent, TicketScored
    from triage.scoring.prefill_result import PrefillResult
    from triage.scoring.protocol import ModelIdentity, ScoringEngine
    from triage.store.fit_lock import FitLock
    from triage.store.history import History
    from triage.store.labels import Answer, Label, ScoredTicket

__all__ = ["FitRequest", "Fits", "Scoring", "Session", "record_quietly", "starter_on"]
log = logging.getLogger("triage")


@dataclass
class Scoring:
    """One ticket scored in a session: the ticket, how it is scored, and its rows in the history (None: not
    kept)."""

    ticket: Ticket
    pack: Pack
    options: ScoreOptions
    ticket_row: int | None = None
    score_id: int | None = None

    @property
    def kept(self) -> bool:
        """Whether the score has a history row (its end, and what a head reads, are kept)."""
        return self.score_id is not None


class Session:
    """The engine, the fit policy and the history keeper (see the module docstring).

    Args:
        engine: the loaded engine (not closed by the session); None for a session that only keeps (the app
            before its model is up: an agent labels a ticket reopened from the history), or that only chooses
            fits (``model``).
        model: the model to choose fits for when ``engine`` is None (the Ray driver: what the nodes reported).
        request: the explicit head and calibration asks (``--head``, ``--no-head``, the config's
            ``calibration``, the ``starter`` setting); the policy is asked again for every ticket.
        fits: fixed fits instead of the policy (the Ray workers: the driver chose them).
        history: an open history (of the thread that makes the session) to keep scores in; else
            ``history_path`` (None: the user data dir's) is opened for writing on first use, in the thread that
            uses it.
        keep_features: how many scores' head inputs the history keeps (config ``keep_features``).
        on_fault: when given, a history write that fails is said through it (one line) and scoring goes on
            without keeping (the app); else it raises :class:`~triage.errors.HistoryError`.
    """

    def __init__(
        self,
        engine: ScoringEngine | None,
        *,
        model: ModelIdentity | None = None,
        request: FitRequest | None = None,
        fits: Fits | None = None,
        history: History | None = None,
        history_path: Path | None = None,
        keep_features: int = DEFAULTS.keep_features,
        on_fault: Callable[[str], None] | None = None,
    ) -> None:
        self.engine = engine
        self.model = model
        self.request = request if request is not None else FitRequest()
        self.fixed = fits
        self._history = history
        self._owner = threading.get_ident() if history is not None else None
        self._local = threading.local()  # another thread's own connection, for one score
        self._owns_history = history is None
        self.history_path = history_path
        self.keep_features = keep_features
        self.on_fault = on_fault

    # -- the fit policy -----------------------------------------------------------------------------
    def fits(self, pack: Pack, options: ScoreOptions, *, lenient: bool = False) -> Fits:
        """The head and calibration to score ``pack`` with (the fixed ones, else the policy's choice now).

        ``lenient`` (the app): an asked-for calibration (the config's) that cannot be used is passed over with a
        note saying why, and the ticket is scored without it.

        Raises:
            FitError: an explicit file that cannot be read or does not fit the model, pack or options.
        """
        if self.fixed is not None:
            return self.fixed
        model: ModelIdentity = self.engine if self.engine is not None else self.model or self.scorer
        try:
            return choose_fits(model, pack, options, self.request)
        except InputError as exc:
            if not lenient or not self.request.calibration or self.request.no_calibration:
                raise FitError(exc.message, hint=exc.hint) from exc
            refused = FitNote("calibration", f"{exc.message}; scoring without it")
        request = dataclasses.replace(self.request, calibration=None, no_calibration=True)
        try:
            chosen = choose_fits(model, pack, options, request)
        except InputError as exc:
            raise FitError(exc.message, hint=exc.hint) from exc
        return dataclasses.replace(chosen, notes=(*chosen.notes, refused))

    @staticmethod
    def notices(fits: Fits) -> dict[str, str | None]:
        """What to tell the agent of what ``fits`` passed over, per ``head`` and ``calibration``: one line, or None
        (nothing: a standing notice is taken down)."""
        said: dict[str, str | None] = {}
        about: Literal["head", "calibration"]
        for about in ("head", "calibration"):
            passed = fits.passed_over(about)
            said[about] = " ".join(passed) if passed else None
        return said

    @property
    def scorer(self) -> ScoringEngine:
        """The engine, for what needs one.

        Raises:
            TriageError: the session has none (no model is loaded).
        """
        if self.engine is None:
            raise TriageError("no model is loaded")
        return self.engine

    def starter_due(self, pack: Pack) -> bool:
        """Whether :meth:`ensure_starter` would fit a starter head for ``pack`` now
        (:func:`triage.learning.starter.needs_fit`)."""
        from triage.learning.starter import needs_fit

        return needs_fit(self.scorer, pack, self.request)

    def ensure_starter(
        self, pack: Pack, *, say: Callable[[str], None], progress: Callable[[int, int], None] | None = None
    ) -> bool:
        """Fit and store the built-in pack's starter head for this model when the policy would want one and none
        is stored (:func:`triage.learning.starter.ensure`); True when it fitted one."""
        from triage.learning.starter import ensure

        lock = self.starter_lock(pack)
        if not lock.acquire():  # another process fits it: this one decides zero-shot, and applies it once stored
            pid = lock.holder()
            say(
                f"the starter head for {self.scorer.name} is being fitted by another process"
                f"{f' (pid {pid})' if pid else ''}; zero-shot until it is stored"
            )
            return False
        try:
            return ensure(self.scorer, pack, self.request, say=say, progress=progress)
        finally:
            lock.release()

    def starter_lock(self, pack: Pack) -> FitLock:
        """The lock a fit of ``pack``'s starter head for this model holds: one fit at a time, across processes."""
        from triage.learning.fitstore import starter_path
        from triage.store.fit_lock import FitLock

        engine = self.scorer
        return FitLock(starter_path(engine.sha256, pack.hash, engine.format_for("label").id))

    def head_learned_at(self, pack: Pack) -> float:
        """When this model and pack's stored head (the team's) was learned: its file's time, 0.0 when none."""
        from triage.learning.fitstore import head_name, heads_dir

        engine = self.scorer
        path = heads_dir() / head_name(engine.sha256, pack.hash, engine.format_for("label").id)
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    # -- the history ------------------------------------------------------------------------------
    @property
    def history(self) -> History:
        """This thread's connection to the history the session keeps in, opened for writing on first use.

        Raises:
            HistoryError: it cannot be written (a newer schema, locked, unusable).
        """
        from triage.store.history import History

        if self._history is None:
            self._history = History.open_writable(self.history_path)
            self._owner = threading.get_ident()
        if threading.get_ident() == self._owner or self._history.path is None:
            return self._history
        own: History | None = getattr(self._local, "history", None)
        if own is None:
            own = self._local.history = History.open_writable(self._history.path)
        return own

    @property
    def history_open(self) -> bool:
        return self._history is not None

    def _close_thread_history(self) -> None:
        """Close the connection this thread opened for a score (not the session's own)."""
        own: History | None = getattr(self._local, "history", None)
        if own is not None:
            self._local.history = None
            own.close()

    def save_ticket(self, ticket: Ticket, *, row: int | None = None) -> int:
        """Save ``ticket`` (into ``row``, a thread's) in its own transaction; returns its row."""
        return self.history.save_ticket(ticket, row=row)

    def unstarted(self, ticket: Ticket, pack: Pack, options: ScoreOptions, *, ticket_row: int) -> None:
        """Keep a score of the saved ticket ``ticket_row`` that was cancelled before its engine took it (the app:
        superseded or Esc while it waited for its turn): its row says ``cancelled``, never ``running``."""
        scoring = self._begin(ticket, pack, options, keep=True, ticket_row=ticket_row)
        self._keep(self._cancel_row, scoring)

    def left_running(self, score_id: int) -> None:
        """The app closes while score ``score_id`` runs on another thread: its row ends ``cancelled`` (a row that
        has ended already is left as it is)."""
        self._keep(lambda: self.history.cancel_score(score_id))

    def _begin(
        self, ticket: Ticket, pack: Pack, options: ScoreOptions, *, keep: bool, ticket_row: int | None = None
    ) -> Scoring:
        """A :class:`Scoring` of ``ticket``; with ``keep``, the ticket is saved (unless ``ticket_row`` says where it
        already is) and its score's start recorded, each in its own transaction.

        Raises:
            HistoryError: the history refused (without ``on_fault``; with it, the score is not kept).
        """
        scoring = Scoring(ticket, pack, options, ticket_row)
        if not keep:
            return scoring

        def start() -> None:
            if scoring.ticket_row is None:
                scoring.ticket_row = self.save_ticket(ticket)
            scoring.score_id = self.history.start_score(
                scoring.ticket_row,
                model=self.scorer.model_info,
                pack={"name": pack.name, "version": pack.version, "hash": pack.hash},
                orderings=PRODUCT_READ.orderings,
                messages=len(ticket.thread),
            )

        self._keep(start)
        return scoring

    def _keep(self, write: Callable[..., None], *args: object) -> None:
        """One history write: a SQLite error is a :class:`~triage.errors.HistoryError`; said through ``on_fault``
        (and not raised) when the session has one."""
        from triage.store.history_faults import fault_of

        keeper: Callable[[Callable[[], None]], object] | None = getattr(self._local, "keeper", None)
        try:
            try:
                if keeper is not None and self._history is not None and self._history.path is None:
                    keeper(lambda: write(*args))  # kept in memory: only the history's own thread reaches it
                else:
                    write(*args)
            except sqlite3.Error as exc:
                raise fault_of(exc, self._history.path if self._history is not None else None) from exc
        except HistoryError as exc:
            if self.on_fault is None:
                raise
            log.warning("history write failed: %s", exc.message)
            self.on_fault(f"Could not save to history: {exc.message}")

    def _finish_row(self, scoring: Scoring, final: TicketScored) -> None:
        """Keep how a kept score ended: its result (a cancelled one's criteria so far) and what a head reads."""
        if scoring.score_id is None:
            return
        result = final.result
        self.history.finish_score(scoring.score_id, result)
        kept = self.head_inputs(final)
        if kept:
            ident = feat.Identity(result.model.get("sha256", ""), result.prompt_format, result.pack.get("hash", ""))
            feat.save(self.history, scoring.score_id, ident, kept, keep=self.keep_features)

    def _fail_row(self, scoring: Scoring, error: str) -> None:
        if scoring.score_id is not None:
            self.history.fail_score(scoring.score_id, error)

    def _cancel_row(self, scoring: Scoring) -> None:
        if scoring.score_id is not None:
            self.history.cancel_score(scoring.score_id)

    def _end(self, scoring: Scoring, final: TicketScored) -> None:
        """Keep a score's end (:meth:`_finish_row`).

        Raises:
            ResultNotKept: the history refused it (without ``on_fault``); the row is marked failed if it can be.
        """
        try:
            self._keep(self._finish_row, scoring, final)
        except HistoryError as exc:
            record_quietly(self._fail_row, scoring, "the history refused the result when it was to be kept")
            raise ResultNotKept(
                f"the ticket was scored but its result could not be kept: {exc.message}", hint=exc.hint
            ) from exc

    @staticmethod
    def head_inputs(final: TicketScored) -> dict[str, Any]:
        """What a learned head reads of a finished score, as the history keeps it (empty when incomplete)."""
        if not final.result.complete:
            return {}
        return feat.from_scored(final.readouts, final.features)

    def label(self, scored: ScoredTicket, answers: Sequence[Answer], *, origin: str) -> list[Label]:
        """Record an agent's ``answers`` on a kept score (:func:`triage.store.labels.record`).

        Raises:
            InputError: an answer the result does not know (nothing is stored).
        """
        from triage.store import labels

        return labels.record(self.history, scored, list(answers), origin=origin)

    def close(self) -> None:
        """Close the history when the session opened it."""
        if self._history is not None and self._owns_history:
            self._history.close()
            self._history = None

    # -- scoring ----------------------------------------------------------------------------------
    def score(
        self,
        ticket: Ticket,
        pack: Pack,
        options: ScoreOptions,
        *,
        keep: bool = False,
        ticket_row: int | None = None,
        fits: Fits | None = None,
        cancel: Callable[[], bool] | None = None,
        progress: Callable[[Progress], None] | None = None,
        begun: Callable[[Scoring], None] | None = None,
        keeper: Callable[[Callable[[], None]], object] | None = None,
    ) -> Iterator[ScoreEvent]:
        """Score one ticket and stream its events; with ``keep``, keep it in the history as it goes.

        The fits are ``fits``, else :meth:`fits` now. With ``keep``, the ticket is saved (unless ``ticket_row``
        holds it) and its score's start recorded before the engine starts, then ``begun`` is called with the
        :class:`Scoring` (its rows); the result (a cancelled score's criteria so far, what a head reads) is kept
        before the final event is yielded. Any failure is kept as the score's error, then raised. ``keeper`` runs a
        write on the history's own thread, for a score on another thread when the history is kept in memory (no
        other connection reaches it: the app's score worker passes its screen's ``call_from_thread``).

        Raises:
            FitError: the fits cannot be chosen (nothing is kept).
            HistoryError: the history refused the start (nothing was scored), or the result
                (:class:`~triage.errors.ResultNotKept`); never with ``on_fault``.
            EngineError: the engine failed (kept as the score's error).
        """
        from triage.scoring.engine import TicketScored

        fits = fits if fits is not None else self.fits(pack, options)
        self._local.keeper = keeper
        try:
            scoring = self._begin(ticket, pack, options, keep=keep, ticket_row=ticket_row)
            if begun is not None:
                begun(scoring)
            kw: dict[str, Any] = {"cancel": cancel, "features": scoring.kept, **fits.engine_kwargs()}
            if progress is not None:
                kw["progress"] = progress
            final: TicketScored | None = None
            try:
                for event in self.scorer.score(ticket, pack, options, **kw):
                    if isinstance(event, TicketScored):
                        final = event  # yielded once it is kept
                    else:
                        yield event
            except TriageError as exc:
                record_quietly(self._fail_row, scoring, exc.message)
                if isinstance(exc, EngineError):
                    raise
                raise EngineError(exc.message, hint=exc.hint, exit_code=exc.exit_code) from exc
            except GeneratorExit:  # the caller stopped reading: the row says cancelled, never "running"
                record_quietly(self._cancel_row, scoring)
                raise
            except BaseException:  # an unexpected failure: the row says so, never "running"
                record_quietly(self._fail_row, scoring, "internal error while scoring")
                raise
            if final is None:
                record_quietly(self._fail_row, scoring, "the engine ended without a result")
                raise EngineError("the engine ended without a result")
            self._end(scoring, final)
            yield final
        finally:
            self._local.keeper = None
            if threading.get_ident() != self._owner:
                self._close_thread_history()

    def prefill(self, ticket: Ticket | str, pack: Pack, cancel: Callable[[], bool] | None = None) -> PrefillResult:
        """Compute ``ticket``'s prompt up to its tails ahead of its score (the agent is still pasting), so that the
        score costs only the tails and what changed since; ``cancel()`` True stops it, keeping what it computed.
        Writes nothing; the front ends prefill through here, never through the engine.

        Raises:
            TriageError: no model is loaded, or the engine failed.
        """
        return self.scorer.prefill(ticket, pack, cancel=cancel)

    def score_many(
        self,
        tickets: Iterable[Ticket],
        pack: Pack,
        options: ScoreOptions,
        *,
        keep: bool = False,
        fits: Fits | None = None,
    ) -> Iterator[tuple[Ticket, Scoring, TicketScored | TriageError]]:
        """:meth:`score` for a backlog: its tickets in input order, one decode per ticket, with the fits chosen
        once (``fits``, default :meth:`fits` now), each kept (``keep``) as it is taken and as it ends. Yields
        ``(ticket, scoring, done)``, ``done`` being the final event or the failure that stopped that ticket (an
        :class:`~triage.errors.EngineError` or :class:`~triage.errors.ResultNotKept`; the others still score).

        Raises:
            FitError: the fits cannot be chosen. HistoryError: the history refused a ticket's start.
        """
        fits = fits if fits is not None else self.fits(pack, options)
        taken: list[Scoring] = []

        def feed() -> Iterator[Ticket]:
            for ticket in tickets:
                taken.append(self._begin(ticket, pack, options, keep=keep))
                yield ticket

        scored = self.scorer.score_many(feed(), pack, options, features=keep, **fits.engine_kwargs())
        for ticket, done in scored:
            scoring = taken.pop(0)
            ended: TicketScored | TriageError = done
            if isinstance(done, TriageError):
                record_quietly(self._fail_row, scoring, done.message)
                if not isinstance(done, EngineError):
                    ended = EngineError(done.message, hint=done.hint, exit_code=done.exit_code)
            else:
                try:
                    self._end(scoring, done)
                except ResultNotKept as exc:
                    ended = exc
            yield ticket, scoring, ended


def record_quietly(call: Callable[..., None], *args: object, log: logging.Logger | None = None) -> None:
    """Keep a score's end (``call(*args)``) where an error is already on its way: a history that refuses now
    (locked, full) is logged (``log``, default ``triage``), never raised over that error."""
    try:
        call(*args)
    except (sqlite3.Error, TriageError) as exc:
        (log or logging.getLogger("triage")).warning("could not record the end of a score in the history: %s", exc)
