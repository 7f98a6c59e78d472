"""The ticket box: a multi-line editor that takes a pasted ticket whole.

Pasted text is cleaned first (:func:`triage.domain.ticket.clean_text`), so escape
codes, control characters and binary junk never reach the screen or the model.
A huge paste is kept whole for scoring but shown shortened and read-only:
soft-wrapping a megabyte in the editor would freeze the UI on every key.
Edits are debounced into one :class:`TicketEdited` so token counting runs
once the text stops changing, not on every key.

A paste while the box holds the ticket on screen, as it was scored (:attr:`TicketInput.scored_text`, set by
the screen), is the next ticket: it *replaces* the box's text, as one edit, and :meth:`TicketInput.undo_replace`
(ctrl+z) brings the scored text back while the paste is unchanged. Adding to the ticket is the thread's
reply box (F8/F9/F10), or typing under it.
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
        self.scored_text: str | None = None  # the decided ticket's text (cleaned) while on screen, else None
        self.replaced: tuple[str, str] | None = None  # (the text a paste replaced, the paste) while unchanged

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
        self.replaced = None
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
        replaced = False
        if self._large is not None or len(self.text) + len(text) > LARGE_CHARS:
            self._show_large(text)  # a huge paste is a whole ticket: it replaces the box
            self.focus()
        elif self.scored_text is not None and self.text.strip() and clean_text(self.text) == self.scored_text:
            self.replace_all(text)  # after a decision a paste is a new ticket
            replaced = True
        else:
            event.text = text
            await super()._on_paste(event)
        self.post_message(TicketPasted(replaced))

    def replace_all(self, text: str) -> None:
        """Put ``text`` in place of the box's text as one edit that :meth:`undo_replace` takes back."""
        old = self.text
        self.history.checkpoint()
        self.replace(text, self.document.start, self.document.end)
        self.history.checkpoint()
        self.move_cursor(self.document.end)
        self.replaced = (old, text)

    def undo_replace(self) -> bool:
        """Bring back the text the last paste replaced, while the box still holds that paste (True when done)."""
        if self.replaced is None or self.text != self.replaced[1]:
            self.replaced = None
            return False
        old, _ = self.replaced
        self.replaced = None
        self.history.checkpoint()
        self.replace(old, self.document.start, self.document.end)
        self.history.checkpoint()
        self.move_cursor(self.document.end)
        return True

    @property
    def can_undo_replace(self) -> bool:
        """The box holds a paste that replaced the scored ticket, unchanged."""
        return self.replaced is not None and self.text == self.replaced[1] and self._large is None

    def on_text_area_changed(self, _event: TextArea.Changed) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(DEBOUNCE_S, self._settled)

    def _settled(self) -> None:
        self._debounce = None
        self.post_message(TicketEdited())
