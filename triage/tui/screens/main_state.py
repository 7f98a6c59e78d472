"""What the main screen's parts work on, typed: its state, its widgets, and the methods one part calls in another.

:mod:`~triage.tui.screens.main_model`, :mod:`~triage.tui.screens.main_scoring` and
:mod:`~triage.tui.screens.main_labels` are mixed into :class:`~triage.tui.screens.main.MainScreen`. For the type
checker they subclass :class:`MainState` (at run time ``object``: the screen's MRO is unchanged), so every
``self.x`` they use is declared here once; ``MainScreen`` defines each abstract member (mypy refuses an instance
that misses one).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Protocol

from textual.screen import Screen

from triage.domain.pack import Pack
from triage.domain.result import TicketResult
from triage.domain.ticket import Ticket
from triage.store.history import History
from triage.tui.desk import Desk
from triage.tui.engine_host import EngineHost
from triage.tui.messages import ModelLoadFailed
from triage.tui.options import UIOptions
from triage.tui.submission import Submission
from triage.tui.widgets.decisions import DecisionsPanel
from triage.tui.widgets.model_status import ModelState, ModelStatus
from triage.tui.widgets.notice_bar import NoticeBar
from triage.tui.widgets.score_summary import ScoreSummary
from triage.tui.widgets.thread_view import ThreadView
from triage.tui.widgets.ticket_input import TicketInput


class ModelUnavailableHook(Protocol):
    """The app's side of a failed model load (``TriageApp.model_unavailable``).

    A protocol, so the screen never imports the app (the app imports the screen).
    """

    def model_unavailable(self, failure: ModelLoadFailed) -> None: ...


class MainState(Screen[None]):
    """The main screen as its parts see it (``MainScreen.__init__`` sets the attributes)."""

    host: EngineHost
    history: History
    options: UIOptions
    pack: Pack
    auto_score: bool
    model_state: ModelState
    desk: Desk
    result: TicketResult | None
    result_text: str | None
    result_rows: tuple[int | None, int | None]
    open_ticket: Ticket | None
    open_row: int | None
    composing: bool
    _count_stamp: float
    _load_seq: int

    # the screen's widgets and hooks (main.py)
    @property
    @abstractmethod
    def ticket(self) -> TicketInput: ...

    @property
    @abstractmethod
    def thread_view(self) -> ThreadView: ...

    @property
    @abstractmethod
    def decisions(self) -> DecisionsPanel: ...

    @property
    @abstractmethod
    def summary(self) -> ScoreSummary: ...

    @property
    @abstractmethod
    def status(self) -> ModelStatus: ...

    @property
    @abstractmethod
    def notices(self) -> NoticeBar: ...

    @property
    @abstractmethod
    def triage_app(self) -> ModelUnavailableHook: ...

    @property
    @abstractmethod
    def current(self) -> Submission | None: ...

    # one part's methods that another part calls
    @abstractmethod
    def _mark_previous(self) -> None: ...  # main_model

    @abstractmethod
    def _request_count(self) -> None: ...  # main_model

    @abstractmethod
    def _start(self, sub: Submission) -> None: ...  # main_scoring

    @abstractmethod
    def _show_labels(self) -> None: ...  # main_labels

    @abstractmethod
    def stop_prefill(self, *, unless: str | None = None) -> None: ...  # main_prefill
