"""The help screen (F1 or ?): what triage does and every key."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

KEYS = [
    ("F5", "Score the ticket (a running score is cancelled first)"),
    ("Esc", "Cancel the running score"),
    ("F1 or ?", "This help"),
    ("F2", "History: search past tickets; Enter reopens one"),
    ("F3", "Export the decisions: ↑↓ JSON or Markdown, Enter to the file name, Enter exports"),
    ("F4", "Copy a one-line summary to the clipboard"),
    ("F6", "Label: move to the first card not yet answered"),
    ("Enter or y", "On a card: the shown decision is right (a confirmation)"),
    ("1-9 or a click", "On a card: that option is right (a correction, or a confirmation); the next card opens"),
    ("↑ ↓ (k j), Tab", "Between cards"),
    ("F7", "Agreement: how often the decisions agreed with the labels, per criterion, and its trend"),
    ("F8", "Add the box's text to the ticket on screen as a customer reply, and score the thread again"),
    ("F9", "The same as an agent reply"),
    ("F10", "The same as an internal note"),
    ("ctrl+t", "Timeline: how each criterion's choice and confidence moved over the thread's messages"),
    ("ctrl+z", "After a paste replaced the scored ticket: bring its text back"),
    ("ctrl+o", "Details: the engine's figures of the decisions (prefill, prefix and cache), and back"),
    ("ctrl+l", "Clear the ticket"),
    ("ctrl+p", "Command palette: switch pack or model, export, learn now, auto-score, theme…"),
    ("ctrl+q", "Quit"),
]

# One line per paragraph: the dialog wraps them to its width.
ABOUT = (
    "[b]triage[/b]: paste a support ticket, press [b]F5[/b], and a local model answers each decision of the "
    "criteria pack (queue, urgency, sentiment, approval, type).\n\n"
    "Each card shows every option's probability as a bar; the chosen option is marked [b]▶[/b]. The card's bottom "
    "edge shows the margin to the runner-up (Δ, in percentage points), the time the criterion took and its tokens "
    "(shared when the criteria were read together in one decode). Where the cards do not fit, each is one line: "
    "the criterion and its choice."
)
NOTES = (
    "Every scored ticket is saved in the history (SQLite, in triage's data folder); re-scoring a ticket keeps "
    "the earlier result too.\n\n"
    "Your answers on the cards are labels, kept in the history at once with the decision you were shown: "
    "[b]triage stats[/b] measures how often the decisions were right, and [b]triage label --export[/b] writes "
    "them for [b]triage learn[/b]. A decision nobody answered is no label. A label belongs to the ticket: after "
    "a reply the new cards still show it with the meaning it had "
    "([b]✔ you: X (msg 1)[/b]: a correction given on message 1) until you answer again.\n\n"
    "After a decision, a paste in the box is a new ticket: it replaces the scored text, and ctrl+z brings that "
    "back. Once the box holds another text than the ticket scored (a new paste, an edit), the cards are dimmed and say "
    "[b]previous ticket ID[/b]: they are not the box's decisions until F5 scores it.\n\n"
    "A ticket can grow into a thread: type or paste the next message in the box and press F8 (customer), F9 "
    "(agent) or F10 (note). The ticket keeps its id and its history entry; only the new message and the "
    "questions are read again, and the summary says how many tokens were evaluated and how many reused. "
    "F5 with the box empty scores the thread again; text in the box and F5 is a new ticket.\n\n"
    "The ticket's token count is shown under the box. A ticket longer than the model's context allows has its "
    "middle cut before scoring, and a warning says so. Pasted escape codes and control characters are removed.\n\n"
    "Logs, llama.cpp's included, go to triage.log in triage's state folder.\n\n"
    "[dim]Esc, F1 or q closes this help.[/dim]"
)


def keys_table() -> Table:
    """The keys, one per row."""
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True, style="bold")
    table.add_column()
    for key, what in KEYS:
        table.add_row(key, what)
    return table


class HelpScreen(ModalScreen[None]):
    """Keys and a short explanation; Esc, F1, ? or q closes it."""

    BINDINGS = [Binding("escape,f1,question_mark,q", "close", "Close")]

    def compose(self) -> ComposeResult:
        yield Footer(compact=True, show_command_palette=False)  # this screen's keys, not the main screen's
        with VerticalScroll(id="help-body", classes="dialog"):
            yield Static(ABOUT)
            yield Static("\n[b]Keys[/b]")
            yield Static(keys_table())
            yield Static("")
            yield Static(NOTES)

    def action_close(self) -> None:
        self.dismiss(None)
