"""The timeline (ctrl+t): how each criterion's choice and confidence moved over a thread's messages.

One point per scored message count: the newest complete score of the ticket at that many
messages, with the pack and model of the decisions on screen (scores with another pack or
model are left out, and the screen says how many). A table gives each criterion's choice and
its probability at every point (a changed choice is marked ``→``); a chart, drawn by plotext
(textual-plotext) as on the agreement screen, gives the chosen option's probability, one line
per criterion.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Footer, Static
from textual_plotext import PlotextPlot

from triage.domain.result import TicketResult
from triage.domain.thread import Message
from triage.store.history import History


@dataclass(frozen=True)
class Point:
    """The decisions on the first ``messages`` messages of a thread."""

    messages: int
    result: TicketResult


def timeline_points(results: list[TicketResult], like: TicketResult) -> tuple[list[Point], int]:
    """The newest complete result per message count, of ``like``'s pack and model (oldest count first).

    Returns the points and how many complete results were left out for another pack or model.
    """
    by_count: dict[int, TicketResult] = {}
    other = 0
    for r in results:  # oldest first: a later score at the same count replaces an earlier one
        if not r.complete:
            continue
        if r.pack.get("hash") != like.pack.get("hash") or r.model.get("sha256") != like.model.get("sha256"):
            other += 1
            continue
        by_count[r.thread.messages] = r
    return [Point(n, by_count[n]) for n in sorted(by_count)], other


def timeline_table(points: list[Point], messages: tuple[Message, ...]) -> Table:
    """Per criterion (rows), its choice and probability after each scored message count (columns)."""
    table = Table(expand=True)
    table.add_column("criterion", no_wrap=True)
    for p in points:
        who = messages[p.messages - 1].role if p.messages <= len(messages) else ""
        table.add_column(Text(f"{p.messages} {who}".strip()), no_wrap=True)
    ids = [c.id for c in points[-1].result.criteria] if points else []
    for cid in ids:
        row: list[Text] = [Text(cid)]
        before: str | None = None
        for p in points:
            crit = next((c for c in p.result.criteria if c.id == cid), None)
            if crit is None:
                row.append(Text("—", style="dim"))
                continue
            changed = before is not None and crit.choice != before
            cell = Text("→ " if changed else "", style="bold")
            cell.append(f"{crit.choice_label} {crit.probability(crit.choice):.0%}", style="bold" if changed else "")
            row.append(cell)
            before = crit.choice
        table.add_row(*row)
    return table


class TimelineScreen(ModalScreen[None]):
    """The thread's decisions over its messages; Esc, ctrl+t or q closes it."""

    BINDINGS = [Binding("escape,ctrl+t,q", "close", "Close")]

    def __init__(self, history: History, ticket_row: int, result: TicketResult) -> None:
        super().__init__()
        self.points, self.other = timeline_points(history.results(ticket_row), result)
        self.messages = history.thread(ticket_row)
        self.ticket_id = result.ticket_id

    def compose(self) -> ComposeResult:
        yield Footer(compact=True, show_command_palette=False)  # this screen's keys, not the main screen's
        with VerticalScroll(id="timeline-body", classes="dialog"):
            n, k = len(self.messages), len(self.points)
            title = (
                f"[b]Timeline[/b] of ticket [b]{escape(self.ticket_id)}[/b]: {n} message{'' if n == 1 else 's'}, "
                f"decisions after {k} of them"
            )
            if self.other:
                title += f" [dim]({self.other} score(s) with another pack or model left out)[/dim]"
            yield Static(title, id="timeline-title")
            if k < 2:
                yield Static(
                    "[dim]One point so far. Add a reply (F8 customer, F9 agent, F10 note) and the thread is scored "
                    "again; each score adds a point.[/dim]"
                )
            yield Static(timeline_table(self.points, self.messages), id="timeline-table")
            yield PlotextPlot(id="timeline-chart")
            yield Static("[dim]→ marks a changed choice. Esc, ctrl+t or q closes this screen.[/dim]")

    def on_mount(self) -> None:
        plt = self.query_one(PlotextPlot).plt
        plt.title("probability of the chosen option, per criterion")
        xs = [p.messages for p in self.points]
        ids = [c.id for c in self.points[-1].result.criteria] if self.points else []
        for cid in ids:
            pts = [
                (p.messages, c.probability(c.choice) * 100)
                for p in self.points
                for c in p.result.criteria
                if c.id == cid
            ]
            plt.plot([x for x, _ in pts], [y for _, y in pts], label=cid, marker="dot")
        plt.ylim(0, 100)
        plt.yticks([0, 25, 50, 75, 100])
        if xs:
            ticks: list[float] = [*xs]
            plt.xticks(ticks, [str(x) for x in xs])
            # room on the left for the legend (plotext draws it in the top-left corner)
            plt.xlim(min(xs) - max(1.0, 0.25 * (max(xs) - min(xs) + 1)), max(xs) + 0.3)
        plt.xlabel("messages scored")
        plt.ylabel("%")

    def action_close(self) -> None:
        self.dismiss(None)
