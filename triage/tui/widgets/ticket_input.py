"""The ticket box: a multi-line editor that takes a pasted ticket whole.

Pasted text is cleaned first (:func:`triage.domain.ticket.clean_text`), so escape
codes, control characters and binary junk never reach the screen or the model.
A huge paste is kept whole for scoring but shown shortened and read-only:
soft-wrapping a megabyte in the editor would freeze the UI on every key.
Edits are debounced into one :class:`TicketEdited` so token counting runs
once the text stops changing, not on every key.
"""

from __future__ import annotations

from textual import events
from textual.timer import Timer
from textual.widgets import TextArea

from triage.domain.ticket import clean_text
from triage.tui.messages import TicketEdited, TicketPasted

LARGE_CHARS = 50_000  # above this a ticket is far past any context anyway; keep it out of the editor
PREVIEW_HEAD = 6_000
PREVIEW_TAIL = 2_000
DEBOUNCE_S = 0.3
PLACEHOLDER = "Paste a ticket here (any length, several lines), then press F5 to score it."
REPLY_PLACEHOLDER = (
    "Type or paste the thread's next message, then F8 adds it as a customer reply, F9 as an agent reply, "
    "F10 as an internal note, and scores again. F5 with the box empty scores the thread again; text and F5: a new "
    "ticket."
)
REPLY_TITLE = "Next message · F8 customer · F9 agent · F10 note"


class TicketInput(TextArea):
    """Multi-line ticket editor with safe paste and a large-paste mode."""

    def __init__(self, *, cursor_blink: bool = True, id: str | None = None) -> None:
        super().__init__(soft_wrap=True, tab_behavior="focus", placeholder=PLACEHOLDER, id=id)
        self.cursor_blink = cursor_blink
        self.border_title = "Ticket"
        self._large: str | None = None
        self._debounce: Timer | None = None
        self._replying = False

    @property
    def replying(self) -> bool:
        """The box takes the next message of the open thread (shown above it)."""
        return self._replying

    @replying.setter
    def replying(self, on: bool) -> None:
        self._replying = on
        self.placeholder = REPLY_PLACEHOLDER if on else PLACEHOLDER
        if self._large is None:
            self.border_title = REPLY_TITLE if on else "Ticket"

    @property
    def ticket_text(self) -> str:
        """The whole ticket (also when only a preview of it is shown)."""
        return self._large if self._large is not None else self.text

    @property
    def is_large(self) -> bool:
        """True while a huge paste is shown shortened and read-only."""
        return self._large is not None

    def set_ticket(self, text: str) -> None:
        """Replace the ticket (reopened from history, or cleared)."""
        if len(text) > LARGE_CHARS:
            self._show_large(text)
            return
        self._large = None
        self.read_only = False
        self.border_title = REPLY_TITLE if self._replying else "Ticket"
        self.load_text(text)
        self.move_cursor(self.document.end)

    def _show_large(self, text: str) -> None:
        self._large = text
        hidden = len(text) - PREVIEW_HEAD - PREVIEW_TAIL
        preview = (
            f"{text[:PREVIEW_HEAD]}\n\n[… {hidden:,} characters not shown "
            f"here; all are kept for scoring …]\n\n{text[-PREVIEW_TAIL:]}"
        )
        self.load_text(preview)
        self.read_only = True
        self.border_title = f"Ticket · large paste, {len(text):,} characters, shown shortened · ctrl+l clears"

    async def _on_paste(self, event: events.Paste) -> None:
        event.prevent_default()  # Textual would also run TextArea's own handler, inserting the raw text again
        text = clean_text(event.text)
        if not text:
            self.app.notify(
                "The paste held only control characters or escape codes; nothing was added.", severity="warning"
            )
            return
        if self._large is not None or len(self.text) + len(text) > LARGE_CHARS:
            self._show_large(text)  # a huge paste is a whole ticket: it replaces the box
            self.focus()
        else:
            event.text = text
            await super()._on_paste(event)
        self.post_message(TicketPasted())

    def on_text_area_changed(self, _event: TextArea.Changed) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(DEBOUNCE_S, self._settled)

    def _settled(self) -> None:
        self._debounce = None
        self.post_message(TicketEdited())
