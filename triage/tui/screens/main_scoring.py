"""The main screen's scoring: submitting the open ticket, replies to it, the score worker and its events.

Every submission has an id. Messages of a submission that is no longer current update history but
never the screen, so stale results cannot overwrite newer ones. A new submit cancels the old
(``score``: one exclusive worker per submission); Esc cancels. What is decided and kept (the submissions,
their history rows, the fit policy's choice) is the desk's (:mod:`triage.tui.desk`): this part shows it.

Mixed into :class:`~triage.tui.screens.main.MainScreen`, whose state (``host``, ``history``, ``pack``, the
submissions) it works on; Textual finds its message handlers and actions through the screen's MRO.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from textual import work
from textual.worker import get_current_worker

from triage.domain.ticket import Ticket, clean_text, make_ticket
from triage.errors import InputError, TriageError
from triage.tui.messages import (
    CriterionDecided,
    DecodeProgressed,
    ScoreFailed,
    TicketDecided,
    TicketPasted,
    TicketPrefilled,
)
from triage.tui.submission import Submission

REPLY_KEYS = {"customer": "F8", "agent": "F9", "note": "F10"}
REPLY_WORDS = {"customer": "customer reply", "agent": "agent reply", "note": "internal note"}
log = logging.getLogger(__name__)


if TYPE_CHECKING:  # the screen's state and widgets, for the type checker (main_state.py)
    from triage.tui.screens.main_state import MainState as _Screen
else:
    _Screen = object


class ScoringPart(_Screen):
    """The main screen's submissions, replies and the score worker."""

    # -- scoring ----------------------------------------------------------------------
    def on_ticket_pasted(self, msg: TicketPasted) -> None:
        if msg.replaced and self.result is not None:
            self.notify(
                f"The paste is a new ticket: it replaced {self.result.ticket_id}'s text in the box (that ticket is "
                "in the history, F2). ctrl+z brings its text back; F8/F9/F10 add a reply to it instead.",
                markup=False,
            )
        if self.auto_score:
            self.action_score()
        else:
            self._mark_previous()
        self.refresh_bindings()

    def action_undo_paste(self) -> None:
        """ctrl+z after a paste replaced the scored ticket: the scored ticket's text is back in the box."""
        if self.ticket.undo_replace():
            self._mark_previous()
        self.refresh_bindings()

    def action_score(self) -> None:
        """Score the ticket in the box (a running score is cancelled first).

        With a thread open and nothing typed in the editor, the thread is scored again;
        text in the editor is a new ticket.
        """
        text = self.ticket.ticket_text
        if self.composing and self.open_ticket is not None and not text.strip():
            self._submit(self.open_ticket, self.open_row)
            return
        try:
            ticket = make_ticket(text)
        except InputError as exc:
            self.notify(exc.message, severity="warning", markup=False)
            return
        if self.model_state == "failed":
            self.notify("No model is loaded; see the message at the top.", severity="error")
            return
        self._close_thread()
        self._submit(ticket, None)

    def action_reply(self, role: str) -> None:
        """Add the editor's text to the open ticket as its next message (``role``), then score it again.

        The ticket keeps its id, so the engine reuses what it kept of the ticket's last
        score; the reply is saved into the ticket's history row before scoring starts.
        Pressed while the editor still holds the scored ticket unchanged, the box turns
        to the thread and the editor empties for the reply. Text typed under the
        scored ticket (the ticket kept above it) is the reply.
        """
        key, what = REPLY_KEYS[role], REPLY_WORDS[role]
        base = self.open_ticket
        if base is None:
            article = "an" if what[0] in "aeiou" else "a"
            self.notify(
                f"Score a ticket first (F5); {key} adds {article} {what} to the ticket on screen.", severity="warning"
            )
            return
        if self.model_state == "failed":
            self.notify("No model is loaded; see the message at the top.", severity="error")
            return
        text = clean_text(self.ticket.ticket_text)
        if not self.composing:  # the editor holds the (plain) ticket on screen
            if not text or text == base.text:
                self._open_thread(base, scored=len(base.thread))
                self.notify(f"Type or paste the {what} in the box, then press {key} to add it and score again.")
                return
            if text.startswith(base.text):
                text = text[len(base.text) :].strip()
        if not text:
            self.notify(f"Type or paste the {what} in the box first, then press {key}.", severity="warning")
            return
        messages = [{"role": m.role, "text": m.text} for m in base.thread] + [{"role": role, "text": text}]
        try:
            ticket = make_ticket(None, base.id, messages)
        except InputError as exc:
            self.notify(exc.message, severity="warning", markup=False)
            return
        if self._submit(ticket, self.open_row):
            self._open_thread(ticket, scored=len(base.thread))

    def _open_thread(self, ticket: Ticket, *, scored: int | None = None) -> None:
        """Show ``ticket``'s messages above the editor, which is emptied for the next message and gets the focus
        (the reply is typed there; typed on a card, its letters and digits would answer the card)."""
        self.composing = True
        self.add_class("-composing")
        self.thread_view.show(ticket.id, ticket.thread, scored)
        self.ticket.replying = True
        self.ticket.set_ticket("")
        self.ticket.focus()
        self._request_count()

    def _close_thread(self) -> None:
        """The box is a plain editor again (a new ticket, or cleared)."""
        if self.composing:
            self.composing = False
            self.remove_class("-composing")
            self.thread_view.hide()
        self.ticket.replying = False

    def _submit(self, ticket: Ticket, row: int | None) -> bool:
        """Save ``ticket`` (into ``row``, a thread's) and score it; False when no model can score it."""
        if self.model_state == "failed":
            self.notify("No model is loaded; see the message at the top.", severity="error")
            return False
        self.stop_prefill(unless=ticket.text)  # a prefill of this text is the score's own work: it waits for it
        sub = self.desk.submit(ticket, self.pack, row=row)  # saved now: a crash keeps the ticket
        self.open_ticket, self.open_row = ticket, sub.ticket_row
        self.result = self.result_text = None
        self.result_rows = (None, None)
        self.decisions.begin(self.pack, model_ready=self.model_state == "ready")
        if self.model_state == "ready":
            self._start(sub)
        else:
            self.desk.pending = sub
            self.summary.queued(ticket.id)
        self.refresh_bindings()
        return True

    def _start(self, sub: Submission) -> None:
        self.desk.start(sub, self.host.engine)
        self.summary.scoring(sub.ticket.id)
        self._score(sub)

    @work(thread=True, exclusive=True, group="score", exit_on_error=False)
    def _score(self, sub: Submission) -> None:
        """The score worker: the desk's one session call (:meth:`~triage.tui.desk.Desk.score`, which keeps the score
        in the history), its events posted to the screen."""
        from triage.scoring.engine import CriterionScored, Prefilled, Progress, TicketScored

        worker = get_current_worker()

        def stop() -> bool:
            return sub.cancel.is_set() or worker.is_cancelled

        def notices(said: dict[str, str | None]) -> None:  # what the fit policy passed over, and why
            for about, line in said.items():
                if line:
                    self.app.call_from_thread(self.notices.put, about, line, "warning")
                else:
                    self.app.call_from_thread(self.notices.drop, about)

        def progress(p: Progress) -> None:  # from inside a decode: only post
            self.post_message(DecodeProgressed(sub.id, p.phase, p.done, p.total))

        try:
            with self.host.lock:  # llama.cpp is not thread-safe: one user at a time
                if not sub.claim():
                    return  # superseded or cancelled before its turn: the desk ended its history row
                engine = self.host.engine
                if engine is None:
                    raise TriageError("no model is loaded")
                events = self.desk.score(
                    engine, sub, cancel=stop, progress=progress, notices=notices, keeper=self.app.call_from_thread
                )
                for event in events:
                    if isinstance(event, Prefilled):
                        self.post_message(TicketPrefilled(sub.id, event.tokens, event.prefill_ms, event.criteria))
                    elif isinstance(event, CriterionScored):
                        self.post_message(CriterionDecided(sub.id, event.result))
                    elif isinstance(event, TicketScored):
                        self.post_message(TicketDecided(sub.id, event.result))
        except TriageError as exc:
            self.post_message(ScoreFailed(sub.id, exc.message))
        except Exception as exc:
            log.exception("scoring ticket %s failed", sub.ticket.id)
            self.post_message(ScoreFailed(sub.id, f"{type(exc).__name__}: {exc}"))

    def _is_current(self, submission: int) -> bool:
        return self.desk.is_current(submission)

    def on_decode_progressed(self, msg: DecodeProgressed) -> None:
        sub = self.desk.subs.get(msg.submission)
        if sub is not None and msg.phase == "ticket":
            sub.read = (msg.done, msg.total)  # what a cancel will say was read
        if sub is None or not self._is_current(msg.submission) or sub.tokens is not None or sub.cancel.is_set():
            return  # stale, or past the prefill (the criteria line says the rest), or being cancelled
        left = sub.time_left(msg.phase, msg.done, msg.total, time.monotonic())
        self.summary.progress(sub.ticket.id, msg.phase, msg.done, msg.total, left)

    def on_ticket_prefilled(self, msg: TicketPrefilled) -> None:
        sub = self.desk.subs.get(msg.submission)
        if sub is None or not self._is_current(msg.submission):
            return
        sub.tokens, sub.prefill_ms = msg.tokens, msg.prefill_ms
        self.decisions.prefilled()
        self.summary.scoring(sub.ticket.id, msg.tokens, msg.prefill_ms, 0, msg.criteria)

    def on_criterion_decided(self, msg: CriterionDecided) -> None:
        sub = self.desk.subs.get(msg.submission)
        if sub is None or not self._is_current(msg.submission):
            return
        sub.decided += 1
        self.decisions.decided(msg.result)
        self.summary.scoring(sub.ticket.id, sub.tokens, sub.prefill_ms, sub.decided, len(sub.pack.criteria))

    def on_ticket_decided(self, msg: TicketDecided) -> None:
        sub = self.desk.decided(msg.submission, msg.result)  # its worker kept it, stale ones too
        if sub is None:
            return
        if not self._is_current(msg.submission):
            return
        self.result, self.result_text = msg.result, sub.ticket.text
        self.result_rows = (sub.ticket_row, sub.score_id)
        self.decisions.finish(msg.result)
        self._show_labels()
        self.summary.show(msg.result, read=sub.read if not msg.result.complete else None)
        if self.composing and self.open_ticket is not None:
            self.thread_view.show(self.open_ticket.id, self.open_ticket.thread, msg.result.thread.messages)
        self._mark_previous()  # the box may have been given another ticket while this one was scored
        self._request_count()  # the estimate: this score's rate, tails and kept thread are measured now
        if not msg.result.complete:
            self.notify(
                f"Scoring cancelled: {len(msg.result.criteria)} of {len(sub.pack.criteria)} criteria were done.",
                severity="warning",
            )
        self.refresh_bindings()

    def on_score_failed(self, msg: ScoreFailed) -> None:
        sub = self.desk.failed(msg.submission, msg.message)
        if sub is None:
            return
        if not self._is_current(msg.submission):
            return
        self.decisions.failed()
        self.summary.failed(sub.ticket.id, msg.message)
        self.notify(f"Scoring failed: {msg.message}", severity="error", timeout=10, markup=False)
        self.refresh_bindings()

    def action_cancel(self) -> None:
        """Stop the running score; the engine stops between tails."""
        sub = self.current
        what = self.desk.cancel()
        if what is None or sub is None:
            return
        if sub.started:
            self.workers.cancel_group(self, "score")
        if what == "unstarted":  # nothing will come back
            self.decisions.cancelled()
            self.summary.idle()
            self.notify("Cancelled before scoring started.")
        else:
            self.summary.cancelling(sub.ticket.id)
        self.refresh_bindings()

    @property
    def scoring(self) -> bool:
        """A submission is running or waiting for the model."""
        return self.desk.scoring

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":  # shown only while something runs
            return True if self.scoring else False
        if action == "details":  # the engine's figures of a result: hidden while there is none
            return True if self.result is not None else False
        if action in ("export", "copy_summary", "label"):
            return True if self.result is not None else None
        if action == "reply":  # hidden until there is a ticket to reply to
            return True if self.open_ticket is not None else False
        if action == "undo_paste":  # only while a paste replaced the scored ticket; else the box's own undo
            return True if self.ticket.can_undo_replace else False
        if action == "timeline":
            return True if self.open_row is not None and self.result is not None else False
        return True
