"""The thread in the ticket box: every message of the open ticket, each under its role.

Shown above the editor once a ticket is a thread (a reply was added, or a thread was
reopened from history); the editor then takes the next message. Text is drawn as
Rich ``Text``, never as markup, so a ticket's brackets stay text.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.widgets import Static

from triage.domain.thread import Message

HEADINGS = {"customer": "Customer reply", "agent": "Agent reply", "note": "Internal note"}
FIRST_HEADINGS = {"customer": "Customer", "agent": "Agent", "note": "Internal note"}


def heading(message: Message, position: int) -> str:
    """How a message is headed on screen (the first customer message: ``Customer``)."""
    return (FIRST_HEADINGS if position == 1 else HEADINGS)[message.role]


def thread_text(messages: Sequence[Message], scored: int | None = None) -> Text:
    """The messages as one Rich text: a bold heading with the message's number, then its text.

    ``scored``: messages after this many are marked as not in the decisions on screen.
    """
    out = Text()
    for i, m in enumerate(messages, 1):
        if i > 1:
            out.append("\n\n")
        style = {"customer": "bold", "agent": "bold cyan", "note": "bold yellow"}[m.role]
        out.append(f"{i}. {heading(m, i)}", style=style)
        if scored is not None and i > scored:
            out.append("  (not in the decisions shown)", style="dim")
        out.append("\n")
        out.append(m.text)
    return out


class ThreadView(VerticalScroll):
    """The open thread's messages, scrolled to the newest."""

    DEFAULT_CSS = """
    ThreadView { height: auto; max-height: 12; display: none; border-subtitle-align: right; }
    ThreadView.-shown { display: block; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Thread"
        self.messages: tuple[Message, ...] = ()

    def compose(self) -> ComposeResult:
        yield Static("", id="thread-text")

    def show(self, ticket_id: str, messages: Sequence[Message], scored: int | None = None) -> None:
        """Show ``messages`` (all of the open thread)."""
        self.messages = tuple(messages)
        n = len(self.messages)
        self.border_title = f"Thread {escape(ticket_id)} · {n} message{'' if n == 1 else 's'}"
        self.query_one("#thread-text", Static).update(thread_text(self.messages, scored))
        self.add_class("-shown")
        self.call_after_refresh(self.scroll_end, animate=False)

    def hide(self) -> None:
        """No thread is open."""
        self.messages = ()
        self.border_subtitle = ""
        self.remove_class("-shown")

    @property
    def shown(self) -> bool:
        return self.has_class("-shown")
