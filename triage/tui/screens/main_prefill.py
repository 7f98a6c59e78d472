"""The main screen's prefill: the ticket is read ahead while the agent pastes or types.

When the box's text pauses (the editor's own pause, :data:`~triage.tui.widgets.ticket_input.DEBOUNCE_S`, after
which it posts :class:`~triage.tui.messages.TicketEdited`), the ticket's prompt up to its tails is computed in a
thread worker on the engine's lock (:meth:`triage.session.Session.prefill`), so that F5 (or auto-score) then
costs only the tails and what changed since. The next edit cancels a running prefill at once; F5 cancels one of
another text, and waits for one of the same text (its work is the score's). A thread's next message is not read
ahead (its prompt is the thread's).

Mixed into :class:`~triage.tui.screens.main.MainScreen`, whose state (``host``, ``desk``, ``pack``, the box) it
works on; Textual runs its handlers, as every part's of the same name, through the screen's MRO.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from textual import work
from textual.widgets import TextArea
from textual.worker import get_current_worker

from triage.domain.pack import Pack
from triage.domain.ticket import Ticket, make_ticket
from triage.errors import InputError, TriageError
from triage.tui.messages import TicketEdited, TicketReadAhead

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # the screen's state and widgets, for the type checker (main_state.py)
    from triage.tui.screens.main_state import MainState as _Screen
else:
    _Screen = object


class PrefillPart(_Screen):
    """The main screen's read-ahead of the ticket in the box."""

    _prefill_cancel: threading.Event | None = None  # the running (or last) prefill's stop
    _prefill_text: str | None = None  # the ticket text it reads (or read): one prefill per text
    read_ahead: TicketReadAhead | None = None  # the last prefill that finished (the tests read it)

    def on_text_area_changed(self, _event: TextArea.Changed) -> None:
        """An edit: the running prefill reads a text that is gone (what it computed stays for the next one)."""
        self.stop_prefill()

    def on_ticket_edited(self, _msg: TicketEdited) -> None:  # beside main_model's (each class's handler runs)
        """The text paused: read it ahead."""
        self.request_prefill()

    def request_prefill(self) -> None:
        """Read the box's ticket ahead, unless there is nothing new to read or the engine is busy scoring."""
        if not self.options.read_ahead or self.model_state != "ready" or self.composing or self.desk.scoring:
            return
        text = self.ticket.ticket_text
        if not text.strip():
            return
        try:
            ticket = make_ticket(text)
        except InputError:
            return
        if ticket.text == self._prefill_text or ticket.text == self.result_text:
            return  # read already (or being read), or the scored ticket whose decisions are on screen
        self.stop_prefill()
        self._prefill_cancel, self._prefill_text = threading.Event(), ticket.text
        self._prefill(ticket, self.pack, self._prefill_cancel)

    def stop_prefill(self, *, unless: str | None = None) -> None:
        """Cancel the running prefill (``unless`` it reads that text: then the score that follows waits for it)."""
        if self._prefill_cancel is not None and (unless is None or unless != self._prefill_text):
            self._prefill_cancel.set()
            self._prefill_cancel = None
        self._prefill_text = None

    @work(thread=True, exclusive=True, group="prefill", exit_on_error=False)
    def _prefill(self, ticket: Ticket, pack: Pack, cancel: threading.Event) -> None:
        worker = get_current_worker()

        def stop() -> bool:
            return cancel.is_set() or worker.is_cancelled

        while not self.host.lock.acquire(timeout=0.05):  # llama.cpp is not thread-safe: one user at a time
            if stop():
                return
        try:
            engine = self.host.engine
            if engine is None or stop():
                return
            done = self.desk.session(engine).prefill(ticket, pack, stop)
        except TriageError as exc:  # the score will say it, if it fails the same way
            log.info("reading ticket %s ahead failed: %s", ticket.id, exc.message)
            return
        except Exception:
            log.exception("reading ticket %s ahead failed", ticket.id)
            return
        finally:
            self.host.lock.release()
        self.post_message(TicketReadAhead(ticket.text, done))

    def on_ticket_read_ahead(self, msg: TicketReadAhead) -> None:
        self.read_ahead = msg
        log.debug("read ahead: %s", msg.result)
