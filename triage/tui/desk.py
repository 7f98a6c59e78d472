"""The app's desk: its submissions, their history rows, the agent's labels and the re-fit count. No Textual.

The main screen (:mod:`triage.tui.screens.main`) shows; the desk decides and keeps, through one
:class:`~triage.session.Session` per engine. Tests drive it without a terminal (tests/test_tui_desk.py).

- :meth:`Desk.submit` saves the ticket at once (a crash keeps it), supersedes what ran before, and makes the
  :class:`~triage.tui.submission.Submission`; :meth:`Desk.start` records that its score started.
- :meth:`Desk.fits` and :meth:`Desk.events` run on the score worker's thread: the fit policy's choice for the
  ticket, then the engine's events. Everything else runs on the screen's thread, where the history was opened.
- :meth:`Desk.decided`, :meth:`Desk.failed` and :meth:`Desk.abandon` end a submission's row: every result is
  kept, stale ones too; only the current submission's reaches the screen.
- :meth:`Desk.answer` records an agent's answer on a card and says when the head is due a re-fit.

A history write that fails (locked, read-only, a full disk) is said through ``on_fault`` and never stops scoring.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from triage.domain.pack import Pack
from triage.domain.ticket import Ticket
from triage.errors import InputError
from triage.session import Scoring, Session
from triage.settings import Settings
from triage.tui.submission import Submission

if TYPE_CHECKING:
    from triage.domain.result import TicketResult
    from triage.learning.fit import Fits
    from triage.scoring.protocol import AppEngine
    from triage.scoring.run import Progress
    from triage.store.history import History

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class FitChoice:
    """The fits a submission is scored with, and what to tell the agent of what was passed over (per ``head``
    and ``calibration``: the notice's text, or None to take a standing notice down)."""

    fits: Fits
    notices: dict[str, str | None]


class Desk:
    """See the module docstring.

    Args:
        history: the app's history (opened on the screen's thread).
        config: the user's config (the fit request's ``calibration`` and ``starter``, ``keep_features``,
            ``auto_learn``).
        on_fault: called with one line when a history write fails.
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

    def session(self, engine: AppEngine | None = None) -> Session:
        """The session for ``engine`` (a new one after a model switch; None: the one there is, or one that only
        keeps), keeping scores and labels in the app's history."""
        if self._session is None or (engine is not None and self._session.engine is not engine):
            from triage.learning.fit import FitRequest

            self._session = Session(
                engine,
                request=FitRequest.of(config=self.config),
                history=self.history,
                keep_features=self.settings.keep_features,
            )
        return self._session

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
        """The model is up: record that ``sub``'s score starts (when its ticket was saved)."""
        sub.started = True
        if sub.ticket_row is None or engine is None:
            return
        session = self.session(engine)
        scoring = self.record(session.begin, sub.ticket, sub.pack, sub.options, ticket_row=sub.ticket_row)
        sub.score_id = scoring.score_id if scoring is not None else None

    def fits(self, engine: AppEngine, sub: Submission) -> FitChoice:
        """The fit policy's head and calibration for ``sub`` (any thread). The config's ``calibration`` is asked for
        as the CLI asks for it; when it does not fit, the notice says why and the ticket is scored without it."""
        from triage.learning.fit import FitRequest, choose_fits

        refused = None
        try:
            fits = self.session(engine).fits(sub.pack, sub.options)
        except InputError as exc:  # the config's calibration file: it must not stop scoring
            refused = f"{exc.message}; scoring without it"
            request = FitRequest.of(config=self.config)
            fits = choose_fits(engine, sub.pack, sub.options, FitRequest(no_calibration=True, starter=request.starter))
        notices: dict[str, str | None] = {}
        for about in ("head", "calibration"):
            said = fits.passed_over(about) + ([refused] if refused and about == "calibration" else [])
            notices[about] = " ".join(said) if said else None
        return FitChoice(fits, notices)

    def events(
        self,
        engine: AppEngine,
        sub: Submission,
        fits: Fits,
        *,
        cancel: Callable[[], bool],
        progress: Callable[[Progress], None] | None = None,
    ) -> Iterator[object]:
        """The engine's events for ``sub`` (the score worker's thread; writes nothing): what a head reads comes
        back on the final event when the score has a history row."""
        yield from self.session(engine).events(self._scoring(sub), fits=fits, cancel=cancel, progress=progress)

    def decided(self, submission: int, result: TicketResult, kept: dict[str, object]) -> Submission | None:
        """Keep a finished score (stale ones too) with what a head reads; returns its submission (None: unknown)."""
        sub = self.subs.pop(submission, None)
        if sub is None:
            return None
        sub.finished = True
        self.record(self.session().finish, self._scoring(sub), result, kept)
        return sub

    def failed(self, submission: int, message: str) -> Submission | None:
        """Keep a score's failure; returns its submission (None: unknown)."""
        sub = self.subs.pop(submission, None)
        if sub is None:
            return None
        sub.finished = True
        self.record(self.session().fail, self._scoring(sub), message)
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

        False: its worker is scoring it and will post the (cancelled) result itself.
        """
        if not sub.abandon():
            return False
        sub.finished = True
        self.subs.pop(sub.id, None)
        self.record(self.session().cancel, self._scoring(sub))
        return True

    def end_unfinished(self) -> None:
        """The app is closing: a score still open ends as cancelled in history (its worker's result is a message
        no screen will read any more; without this its row would say "unfinished" for ever)."""
        for sub in list(self.subs.values()):
            if sub.started and not sub.finished:
                self.session().cancel(self._scoring(sub))
            sub.finished = True
        self.subs.clear()

    @staticmethod
    def _scoring(sub: Submission) -> Scoring:
        """The session's view of ``sub``: its ticket, how it is scored, and its history rows."""
        return Scoring(sub.ticket, sub.pack, sub.options, sub.ticket_row, sub.score_id)

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
        """Start the re-fit count from the labels given since this model and pack's stored head was learned (its
        file's time; every label when there is none), so that labels of earlier sessions count."""
        from triage.learning.fitstore import head_name, heads_dir
        from triage.store import labels as lab

        path = heads_dir() / head_name(engine.sha256, pack.hash, engine.format_for("label").id)
        try:
            since = path.stat().st_mtime
        except OSError:
            since = 0.0
        try:
            self.labels_since_fit = lab.count_since(self.history, pack.hash, since)
        except Exception:  # the count is a convenience: a history that cannot say leaves it at 0
            log.exception("could not count the labels since the last re-fit")
            self.labels_since_fit = 0
