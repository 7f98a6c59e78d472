"""The history screen: every scored ticket, newest first, searchable; Enter reopens one.

The ``Labels`` column marks a labelled ticket with ``✔`` and how many of its criteria have a label
(labels belong to the ticket, so every score of a thread shows its count). The ``Decisions`` column gives
the agent's answer where a label stands for the score (``queue=shipping ✔ (corrected; model billing 41%)``;
:func:`triage.store.export.marked_summary`), else the model's decision.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.markup import escape
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Input, Static

from triage.store.export import marked_summary
from triage.store.history import History, HistoryEntry
from triage.store.label_marks import Standing, labelled_criteria, standing_on_entries

STATUS_LABELS = {
    "done": "done",
    "running": "unfinished",
    "cancelled": "cancelled",
    "failed": "failed",
    "": "not scored",
}
SEARCH_DEBOUNCE_S = 0.2


def _labelled(n: int) -> str:
    """The ``Labels`` cell: ``✔ 3`` for a ticket with labels on three criteria, empty without."""
    return f"✔ {n}" if n else ""


def _messages(e: HistoryEntry) -> str:
    """A thread's score: ``2/3`` (decided on 2 of its 3 messages); a plain ticket: ``1``."""
    return f"{e.scored}/{e.messages}" if e.messages > 1 else "1"


@dataclass(frozen=True)
class Reopen:
    """Which history row to reopen: a score, or a ticket never scored."""

    ticket_row: int
    score_id: int | None


class HistoryScreen(Screen[Reopen | None]):
    """A searchable list of past tickets and their scores (one row per score).

    A thread is one ticket: each of its scores says how many of its messages it decided on
    (``Msgs`` 2/3), and reopening any of them restores the whole thread.
    """

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("enter", "open", "Open", show=True),
        Binding("slash", "search", "Search"),
        Binding("down", "to_table", show=False),
    ]

    def __init__(self, history: History, *, cursor_blink: bool = True) -> None:
        super().__init__()
        self.history = history
        self.cursor_blink = cursor_blink
        self.entries: list[HistoryEntry] = []
        self.labelled: dict[int, int] = {}  # per ticket row of the entries, how many criteria have a label
        self.answers: dict[
            tuple[int, int | None], dict[str, Standing]
        ] = {}  # per entry, the labels that stand for its score
        self._debounce: Timer | None = None

    @property
    def table(self) -> DataTable[str | Text]:
        return self.query_one("#history-table", DataTable)

    @property
    def search(self) -> Input:
        return self.query_one("#history-search", Input)

    def compose(self) -> ComposeResult:
        where = str(self.history.path) if self.history.path else "in memory only"
        yield Static(f"[b]History[/b] [dim]· {escape(where)}[/dim]", id="history-title")
        search = Input(placeholder="Search tickets, decisions, models… (every word must match)", id="history-search")
        search.cursor_blink = self.cursor_blink
        yield search
        yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="history-detail")
        yield Footer()

    def on_mount(self) -> None:
        table = self.table
        # below 100 columns (80) the ticket's preview gives way, so that the decisions (the agent's answers) show
        narrow = self.app.size.width < 100
        ticket_w = 16 if narrow else 32
        decisions_w = max(30, self.app.size.width - (11 + 10 + ticket_w + 5 + 6) - 2 * 6 - 2) if narrow else 60
        table.add_column("When", width=11, key="when")
        table.add_column("Status", width=10, key="status")
        table.add_column("Ticket", width=ticket_w, key="ticket")
        table.add_column("Msgs", width=5, key="messages")
        table.add_column("Labels", width=6, key="labels")
        table.add_column("Decisions", width=decisions_w, key="decisions")
        table.add_column("Model", key="model")
        self.reload()
        self.search.focus()

    def reload(self) -> None:
        """Fill the table from the history, filtered by the search box."""
        from triage.store.times import shown

        self.entries = self.history.search(self.search.value)
        self.labelled = labelled_criteria(self.history, (e.ticket_row for e in self.entries))
        self.answers = standing_on_entries(
            self.history,
            ((e.ticket_row, e.score_id, (e.pack or "").rsplit(" v", 1)[0] or None, e.scored) for e in self.entries),
        )
        table = self.table
        table.clear()
        for i, e in enumerate(self.entries):
            summary = marked_summary((e.summary or "").split("] ", 1)[-1], self.answers.get((e.ticket_row, e.score_id)))
            table.add_row(  # Text, not str: a ticket's brackets are not markup
                shown(e.when, "%m-%d %H:%M"),  # "unknown" for a stored time that is no time
                STATUS_LABELS.get(e.status, e.status),
                Text(e.preview[:80]),
                _messages(e),
                _labelled(self.labelled.get(e.ticket_row, 0)),
                Text(summary),
                Text(e.model_name or ""),
                key=str(i),
            )
        self._show_detail()

    @on(Input.Changed, "#history-search")
    def _search_changed(self) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(SEARCH_DEBOUNCE_S, self.reload)

    @on(Input.Submitted, "#history-search")
    def _search_submitted(self) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self.reload()
        if self.entries:
            self.table.focus()

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self._show_detail()

    @on(DataTable.RowSelected)
    def _selected(self) -> None:
        self.action_open()

    def _show_detail(self) -> None:
        detail = self.query_one("#history-detail", Static)
        if not self.entries:
            detail.update("[dim]No tickets yet.[/dim]" if not self.search.value else "[dim]Nothing matches.[/dim]")
            return
        e = self.entries[min(self.table.cursor_row, len(self.entries) - 1)]
        parts = [f"[b]{escape(e.ticket_id)}[/b]", STATUS_LABELS.get(e.status, e.status)]
        if e.messages > 1:
            on = f"decided on {e.scored} of them" if e.score_id is not None else "not scored"
            parts.append(f"thread of {e.messages} messages, {on}")
        if e.pack:
            parts.append(f"pack {escape(e.pack)}")
        n = self.labelled.get(e.ticket_row, 0)
        if n:
            parts.append(f"✔ labelled on {n} criteri{'on' if n == 1 else 'a'}")
        if e.total_ms is not None:
            parts.append(f"{e.total_ms:.0f} ms")
        line = " · ".join(parts)
        if e.summary:
            line += "\n" + escape(
                marked_summary(e.summary.split("] ", 1)[-1], self.answers.get((e.ticket_row, e.score_id)))
            )
        detail.update(line)

    @property
    def selected(self) -> HistoryEntry | None:
        """The highlighted entry."""
        if not self.entries:
            return None
        return self.entries[min(self.table.cursor_row, len(self.entries) - 1)]

    def action_open(self) -> None:
        """Reopen the highlighted ticket on the main screen."""
        e = self.selected
        if e is not None:
            self.dismiss(Reopen(e.ticket_row, e.score_id))

    def action_back(self) -> None:
        self.dismiss(None)

    def action_search(self) -> None:
        self.search.focus()

    def action_to_table(self) -> None:
        if self.search.has_focus and self.entries:
            self.table.focus()
