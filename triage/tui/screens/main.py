"""The main screen: the ticket box, the decision cards, and the work behind them.

The screen's widgets, state, history and settings are here; its model loading and token count
(:mod:`~triage.tui.screens.main_model`), its scoring (:mod:`~triage.tui.screens.main_scoring`), its read-ahead
of the ticket being pasted or typed (:mod:`~triage.tui.screens.main_prefill`) and its labels and learning
(:mod:`~triage.tui.screens.main_labels`) are mixed in.

Blocking work runs in thread workers that only post messages:

* ``model``: loads the engine at start (and on "switch model");
* ``score``: one exclusive worker per submission; a new submit cancels the old;
* ``count``: token counting, debounced, so typing and huge pastes stay smooth;
* ``prefill``: the ticket's prompt up to its tails, computed when the text pauses, cancelled by the next edit.

The ticket on screen is the *open ticket*. A reply (F8 customer, F9 agent, F10
internal note) is added to it as its next message: the ticket becomes a thread,
keeps its id (the engine reuses its kept state by id, so only the new message and
the tails are evaluated), is saved into the same history row before scoring, and
is scored again. The ticket box then shows the thread (:class:`ThreadView`) above
the editor, which takes the next message.

Every submission has an id. Messages of a submission that is no longer
current update history but never the screen, so stale results cannot
overwrite newer ones.
"""

from __future__ import annotations

import logging

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.markup import escape
from textual.screen import Screen

from triage.domain.pack import Pack
from triage.domain.result import TicketResult
from triage.domain.ticket import Ticket, make_ticket
from triage.errors import InputError, TriageError
from triage.scoring.options import PRODUCT_READ
from triage.store.history import History, SavedScore
from triage.tui.desk import Desk
from triage.tui.engine_host import EngineHost
from triage.tui.options import UIOptions
from triage.tui.screens.main_labels import LabelsPart
from triage.tui.screens.main_model import ModelPart
from triage.tui.screens.main_prefill import PrefillPart
from triage.tui.screens.main_scoring import ScoringPart
from triage.tui.screens.main_state import ModelUnavailableHook
from triage.tui.submission import Submission
from triage.tui.widgets.decisions import DecisionsPanel
from triage.tui.widgets.key_footer import KeyFooter
from triage.tui.widgets.model_status import ModelState, ModelStatus
from triage.tui.widgets.notice_bar import NoticeBar
from triage.tui.widgets.score_summary import ScoreSummary
from triage.tui.widgets.thread_view import ThreadView
from triage.tui.widgets.ticket_input import TicketInput

log = logging.getLogger(__name__)


class MainScreen(ModelPart, ScoringPart, PrefillPart, LabelsPart, Screen[None]):
    """Paste, score, read the decisions."""

    BINDINGS = [
        Binding("f1", "app.help", "Help"),
        Binding("f2", "app.history", "History"),
        Binding("f3", "export('json')", "Export"),
        Binding("f4", "copy_summary", "Copy"),
        Binding("f5", "score", "Score", priority=True),
        Binding("f6", "label", "Label", priority=True),
        Binding("f7", "app.agreement", "Agreement", priority=True),
        Binding(
            "f8",
            "reply('customer')",
            "Customer",
            tooltip="Add the box's text as a customer reply and score again",
            priority=True,
        ),
        Binding(
            "f9",
            "reply('agent')",
            "Agent",
            tooltip="Add the box's text as an agent reply and score again",
            priority=True,
        ),
        Binding(
            "f10",
            "reply('note')",
            "Note",
            tooltip="Add the box's text as an internal note and score again",
            priority=True,
        ),
        Binding("ctrl+t", "timeline", "Timeline", priority=True),
        Binding("ctrl+z", "undo_paste", "Undo paste", priority=True),
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+l", "clear", "Clear", show=False),
        Binding("ctrl+o", "details", "Details", priority=True),
    ]
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (70, "-normal"), (150, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]

    def __init__(self, host: EngineHost, history: History, options: UIOptions, pack: Pack) -> None:
        super().__init__()
        self.host = host
        self.history = history
        self.options = options
        self.pack = pack
        self.auto_score = options.auto_score
        self.model_state: ModelState = "loading"
        # submissions, their history rows, labels and the re-fit count: no Textual there
        self.desk = Desk(history, options.config, on_fault=self._history_fault)
        self.result: TicketResult | None = None  # the result on screen
        self.result_text: str | None = None  # its ticket text (for Markdown export)
        self.result_rows: tuple[int | None, int | None] = (None, None)  # its ticket row and score id in history
        self.open_ticket: Ticket | None = None  # the ticket on screen (submitted or reopened): replies go to it
        self.open_row: int | None = None  # its history row
        self.composing = False  # the box shows the open thread; the editor takes its next message
        self._count_stamp = 0.0
        self._load_seq = 0

    # -- widgets ----------------------------------------------------------------------
    @property
    def ticket(self) -> TicketInput:
        return self.query_one(TicketInput)

    @property
    def thread_view(self) -> ThreadView:
        return self.query_one(ThreadView)

    @property
    def decisions(self) -> DecisionsPanel:
        return self.query_one(DecisionsPanel)

    @property
    def summary(self) -> ScoreSummary:
        return self.query_one(ScoreSummary)

    @property
    def status(self) -> ModelStatus:
        return self.query_one(ModelStatus)

    @property
    def notices(self) -> NoticeBar:
        return self.query_one(NoticeBar)

    @property
    def triage_app(self) -> ModelUnavailableHook:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield ModelStatus(animate=self.options.animate, id="model-status")
        yield NoticeBar(id="notices")
        yield ThreadView(id="thread")
        yield TicketInput(cursor_blink=self.options.cursor_blink, id="ticket")
        yield ScoreSummary(id="summary")
        yield DecisionsPanel(id="decisions")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._show_settings()
        self.decisions.show_pack(self.pack)
        self.ticket.focus()
        if self.history.notice:
            self.notices.put("history", self.history.notice, "warning")
        if self.options.config_notes:  # removed config keys: ignored, and said so with their lines
            self.notices.put("config", " · ".join(self.options.config_notes), "warning")
        self.load_model(self.options.model)
        if self.options.preload_tokenizer:
            self._preload_tokenizer()

    def _show_settings(self) -> None:
        from triage.domain.result import readout_words

        product = PRODUCT_READ  # how every ticket is read: by name
        self.status.settings(self.pack, readout_words(product.readout, product.orderings), self.auto_score)

    # -- history, export, clipboard ---------------------------------------------------
    def _history_fault(self, line: str) -> None:
        """A history write failed (the desk logged it): said, never fatal (scoring goes on)."""
        self.notify(line, severity="error", timeout=10, markup=False)

    @property
    def current(self) -> Submission | None:
        """The submission on screen (the desk's)."""
        return self.desk.current

    def reopen(self, saved: SavedScore) -> None:
        """Show a ticket from history with its decisions."""
        self.desk.supersede()
        self.desk.current = None
        self.open_row = saved.ticket_row
        if saved.is_thread:  # the whole thread, so that more replies can be added
            messages = [{"role": m.role, "text": m.text} for m in saved.messages]
            self.open_ticket = make_ticket(None, saved.ticket_id, messages)
            self._open_thread(self.open_ticket, scored=saved.scored)
        else:
            self._close_thread()
            self.ticket.set_ticket(saved.text)
            try:
                self.open_ticket = make_ticket(saved.text, saved.ticket_id)
            except InputError:
                self.open_ticket = None
        self.result, self.result_text = saved.result, saved.text
        self.result_rows = (saved.ticket_row, saved.score_id)
        if saved.result is not None:
            self.decisions.show_result(saved.result)
            self._show_labels()
            self.summary.show(
                saved.result, reopened_at=saved.result.created_at or None, of_messages=len(saved.messages) or 1
            )
            self._mark_previous()
        else:
            self.decisions.show_pack(self.pack)
            note = {
                "running": "its scoring never finished",
                "failed": f"its scoring failed: {saved.error}",
                "cancelled": "its scoring was cancelled before it began",
            }.get(saved.status, "never scored")
            self.summary.update(
                f"ticket [b]{escape(saved.ticket_id)}[/b] "
                f"[dim](from history)[/dim] · {escape(note)}. Press F5 to score it."
            )
        self.ticket.focus()
        self.refresh_bindings()

    def on_paste(self, event: events.Paste) -> None:
        """A paste while a card has the focus (the agent was labelling) is the next ticket: it goes to the box.

        The box's last ticket is in the history already (F2), so the new paste replaces it, as a paste in the
        box after a decision does (:class:`TicketInput`; ctrl+z brings it back). With a thread open the box
        holds its next message: the paste goes there too (F5 would make it a new ticket, F8/F9/F10 a reply).
        """
        if self.focused is self.ticket or isinstance(self.focused, TicketInput):
            return
        event.stop()
        # the box's scored ticket is in the history already: the box replaces it (ctrl+z brings it back); a text
        # the agent changed since, or a message being written to a thread, is kept (the paste adds to it)
        self._mark_previous()
        self.ticket.focus()
        self.ticket.post_message(events.Paste(event.text))

    # -- settings ---------------------------------------------------------------------
    def action_clear(self) -> None:
        """Empty the ticket box and the cards."""
        if self.scoring:
            self.action_cancel()
        self.desk.current = None
        self.open_ticket, self.open_row = None, None
        self._close_thread()
        self.ticket.set_ticket("")
        self.ticket.border_subtitle = ""
        self.result = self.result_text = None
        self.result_rows = (None, None)
        self.decisions.show_pack(self.pack)
        self.summary.idle()
        self.ticket.focus()
        self.refresh_bindings()

    def action_details(self) -> None:
        """Show the engine's figures of the result on screen (prefill, prefix and cache, readout), or hide them."""
        on = self.summary.toggle_details()
        self.notify("Details: the engine's figures." if on else "Details hidden.", timeout=2)

    def set_pack(self, pack: Pack) -> None:
        """Score with another criteria pack from now on."""
        self.pack = pack
        self._count_labels_since_fit()
        self._show_settings()
        if not self.scoring:
            self.decisions.show_pack(pack)
            self.result = self.result_text = None
            self.summary.idle()
        self._request_count()
        self.notify(f"Pack {pack.name} v{pack.version}: {len(pack.criteria)} criteria.", markup=False)
        self.refresh_bindings()

    def action_toggle_auto_score(self) -> None:
        """Score as soon as a ticket is pasted (remembered in the config)."""
        from triage.store.config import save_config

        self.auto_score = not self.auto_score
        self._show_settings()
        try:
            save_config({"auto_score": self.auto_score})
        except (OSError, TriageError) as exc:
            log.warning("could not save auto_score: %s", exc)
        self.notify(f"Auto-score after paste {'on' if self.auto_score else 'off'}.")

    def end_unfinished(self) -> None:
        """The app is closing: a score still open ends as cancelled in history (:meth:`Desk.end_unfinished`)."""
        self.desk.end_unfinished()

    def stop_all(self) -> None:
        """Cancel running work (the app is closing)."""
        self.desk.supersede()
        self.workers.cancel_group(self, "score")
        self.workers.cancel_group(self, "count")
        self.stop_prefill()
        self.workers.cancel_group(self, "prefill")
