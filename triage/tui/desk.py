"""The app's desk: its submissions, their history rows, the agent's labels and the re-fit count. No Textual.

The main screen (:mod:`triage.tui.screens.main`) shows; the desk decides and keeps, through one
:class:`~triage.session.Session` per engine. Tests drive it without a terminal (tests/test_tui_desk.py).

- :meth:`Desk.submit` saves the ticket at once (a crash keeps it), supersedes what ran before, and makes the
  :class:`~triage.tui.submission.Submission`; :meth:`Desk.start` readies its session when the model is up.
- :meth:`Desk.score` runs on the score worker's thread: the session's fit notices, then its one lifecycle
  (:meth:`~triage.session.Session.score`), which keeps the score's start, its result (stale ones too), its error
  or its cancel, through a history connection of the worker's own. Everything else runs on the screen's
  thread, where the history was opened.
- :meth:`Desk.decided` and :meth:`Desk.failed` take a submission's end off the desk (only the current
  submission's reaches the screen); :meth:`Desk.abandon` keeps one cancelled before its worker took it.
- :meth:`Desk.answer` records an agent's answer on a card and says when the head is due a re-fit.

A history write that fails (locked, read-only, a full disk) is said through ``on_fault`` (from either thread)
and never stops scoring.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from triage.domain.pack import Pack
from triage.domain.ticket import Ticket
from triage.session import FitRequest, Scoring, Session
from triage.settings import Settings
from triage.tui.submission import Submission

if TYPE_CHECKING:
    from triage.domain.result import TicketResult
    from triage.scoring.engine import ScoreEvent
    from triage.scoring.protocol import AppEngine
    from triage.scoring.run import Progress
    from triage.store.history import History

log = logging.getLogger(__name__)
T = TypeVar("T")


class Desk:
    """See the module docstring.

    Args:
        history: the app's history (opened on the screen's thread).
        config: the user's config (the fit request's ``calibration`` and ``starter``, ``keep_features``,
            ``auto_learn``).
        on_fault: called with one line when a history write fails (on the screen's thread, or on the score
            worker's: it must be safe to call from either).
    """

    def __init__(self, history: History, config: dict[str, object], *, on_fault: Callable[[str], None]) -> None:
        self.history = history
        self.config = config
        self.settings = Settings.of(config)
        self.on_fault = on_fault
        self.subs: dict[int, Submission] = {}
        self.current: Submission | None = None
        self.pending: Submission | None = None  # submitted before the model was up
        self.labels_since_fit = 0  # labels for this pack since its stored head was learned (across restarts)
        self._seq = 0
        self._session: Session | None = None
        self._sessions: dict[int, Session] = {}  # a started submission's session (made on the screen's thread)

    def session(self, engine: AppEngine | None = None) -> Session:
        """The session for ``engine`` (a new one after a model switch; None: the one there is, or one that only
        keeps), keeping scores and labels in the app's history; made on the screen's thread (the history's)."""
        if self._session is None or (engine is not None and self._session.engine is not engine):
            self._session = Session(
                engine,
                request=FitRequest.of(config=self.config),
                history=self.history,
                keep_features=self.settings.keep_features,
                on_fault=self._fault,
            )
        return self._session

    def _fault(self, line: str) -> None:
        """A history write failed (the session logged it): said, never fatal."""
        self.on_fault(line)

    def record(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T | None:
        """Write to the history; a failure is said (``on_fault``), never fatal: returns None."""
        from triage.store.history_faults import HistoryFault

        try:
            return fn(*args, **kwargs)
        except (sqlite3.Error, HistoryFault) as exc:  # locked, read-only, a full disk: said, never fatal
            log.exception("history write failed")
            self.on_fault(f"Could not save to history: {exc}")
            return None

    # -- submissions --------------------------------------------------------------------------------
    @property
    def scoring(self) -> bool:
        """A submission is running or waiting for the model."""
        return self.current is not None and not self.current.finished

    def is_current(self, submission: int) -> bool:
        return self.current is not None and self.current.id == submission

    def submit(self, ticket: Ticket, pack: Pack, *, row: int | None = None) -> Submission:
        """Supersede what runs, save ``ticket`` (into ``row``, a thread's) in its own transaction, and make it the
        current submission."""
        self.supersede()
        self._seq += 1
        sub = Submission(self._seq, ticket, pack)
        sub.ticket_row = self.record(self.session().save_ticket, ticket, row=row)
        self.current = sub
        self.subs[sub.id] = sub
        return sub

    def start(self, sub: Submission, engine: AppEngine | None) -> None:
        """The model is up: ``sub`` is scored through the session of ``engine`` (made here, on the screen's
        thread); its score's row starts when its worker takes it (:meth:`score`)."""
        sub.started = True
        if engine is not None:
            self._sessions[sub.id] = self.session(engine)

    def score(
        self,
        engine: AppEngine,
        sub: Submission,
        *,
        cancel: Callable[[], bool],
        progress: Callable[[Progress], None] | None = None,
        notices: Callable[[dict[str, str | None]], None] | None = None,
        keeper: Callable[[Callable[[], None]], object] | None = None,
    ) -> Iterator[ScoreEvent]:
        """Score ``sub`` on the score worker's thread and stream the engine's events, kept in the history as it
        goes (when its ticket was saved): the session's one lifecycle (:meth:`~triage.session.Session.score`).

        ``notices`` first hears what the fit policy passed over (:meth:`~triage.session.Session.notices`): the
        config's calibration that does not fit is said there and the ticket is scored without it. ``keeper`` runs a
        history write on the screen's thread (the history kept in memory: see :meth:`~triage.session.Session.score`).

        Raises:
            TriageError: the score failed (an :class:`~triage.errors.EngineError`; kept as the score's error).
        """
        session = self._sessions.get(sub.id) or self.session(engine)
        fits = session.fits(sub.pack, sub.options, lenient=True)
        if notices is not None:
            notices(session.notices(fits))

        def begun(scoring: Scoring) -> None:
            sub.score_id = scoring.score_id

        yield from session.score(
            sub.ticket,
            sub.pack,
            sub.options,
            keep=sub.ticket_row is not None,
            ticket_row=sub.ticket_row,
            fits=fits,
            cancel=cancel,
            progress=progress,
            begun=begun,
            keeper=keeper,
        )

    def decided(self, submission: int, result: TicketResult) -> Submission | None:
        """A score ended with ``result`` (its worker kept it, stale ones too); returns its submission (None:
        unknown)."""
        return self._ended(submission)

    def failed(self, submission: int, message: str) -> Submission | None:
        """A score failed with ``message`` (its worker kept the failure); returns its submission (None: unknown)."""
        return self._ended(submission)

    def _ended(self, submission: int) -> Submission | None:
        sub = self.subs.pop(submission, None)
        self._sessions.pop(submission, None)
        if sub is None:
            return None
        sub.finished = True
        return sub

    def cancel(self) -> str | None:
        """Esc: stop the current submission. Returns ``"unstarted"`` (it had not started, or its worker had not
        begun: nothing comes back), ``"cancelling"`` (its worker will post the cancelled result) or None (nothing
        runs)."""
        sub = self.current
        if sub is None or sub.finished:
            return None
        if not sub.started:
            self.pending = None
            sub.finished = True
            self.subs.pop(sub.id, None)
            return "unstarted"
        sub.cancel.set()
        return "unstarted" if self.abandon(sub) else "cancelling"

    def supersede(self) -> None:
        """Cancel whatever runs or waits; its result will be kept but not shown."""
        sub = self.current
        if sub is not None and not sub.finished:
            sub.cancel.set()
            if not sub.started:
                self.pending = None
                sub.finished = True
                self.subs.pop(sub.id, None)
            else:
                self.abandon(sub)

    def abandon(self, sub: Submission) -> bool:
        """End a started submission whose worker has not begun scoring (True), as cancelled in history.

        False: its worker is scoring it and will keep (and post) the cancelled result itself.
        """
        if not sub.abandon():
            return False
        sub.finished = True
        self.subs.pop(sub.id, None)
        session = self._sessions.pop(sub.id, None)
        if session is not None and sub.ticket_row is not None:
            self.record(session.unstarted, sub.ticket, sub.pack, sub.options, ticket_row=sub.ticket_row)
        return True

    def end_unfinished(self) -> None:
        """The app is closing: a score still open ends as cancelled in history (its worker's result is a message
        no screen will read any more; without this its row would say "unfinished" for ever)."""
        for sub in list(self.subs.values()):
            session = self._sessions.get(sub.id)
            if sub.started and not sub.finished and session is not None and sub.score_id is not None:
                self.record(session.left_running, sub.score_id)
            sub.finished = True
        self.subs.clear()
        self._sessions.clear()

    # -- labels and re-fits -------------------------------------------------------------------------
    @property
    def auto_learn_every(self) -> int | None:
        """Re-fit after this many new labels (config ``auto_learn``, ``auto_learn_every``), or None when off."""
        if not self.settings.auto_learn:
            return None
        return max(1, int(self.settings.auto_learn_every))

    def answer(
        self, result: TicketResult, text: str, rows: tuple[int | None, int | None], criterion: str, option: str
    ) -> bool:
        """Record the agent's answer on the result on screen (``rows``: its ticket row and score id) as a label, in
        its own transaction. Returns whether it was stored.

        Raises:
            InputError: an answer the result does not know (never stored).
        """
        from triage.store import labels as lab

        ticket_row, score_id = rows
        if ticket_row is None or score_id is None:
            return False
        scored = lab.ScoredTicket(ticket_row, result.ticket_id, text, score_id, result)
        stored = self.record(self.session().label, scored, [lab.Answer(criterion, option)], origin="app")
        if stored:
            self.labels_since_fit += 1
        return bool(stored)

    @property
    def learn_due(self) -> bool:
        """Whether enough labels came in since the last fit for the automatic re-fit."""
        every = self.auto_learn_every
        return every is not None and self.labels_since_fit >= every

    def count_labels_since_fit(self, engine: AppEngine, pack: Pack) -> None:
        """Start the re-fit count from the labels given since this model and pack's stored head was learned
        (:meth:`~triage.session.Session.head_learned_at`; every label when there is none), so that labels of earlier
        sessions count."""
        from triage.store import labels as lab

        since = self.session(engine).head_learned_at(pack)
        try:
            self.labels_since_fit = lab.count_since(self.history, pack.hash, since)
        except Exception:  # the count is a convenience: a history that cannot say leaves it at 0
            log.exception("could not count the labels since the last re-fit")
            self.labels_since_fit = 0
