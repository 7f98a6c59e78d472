"""The agreement screen (F7): how often the decisions shown agreed with the agents' answers, and its trend.

The same numbers as ``triage stats`` (:mod:`triage.evaluation.agreement`), and a chart of
agreement over time, one line per criterion, drawn by plotext (textual-plotext).

The table is drawn for the width it has (:func:`agreement_for_width`): whole, or, where that does not fit
(80 columns), without its ``by source`` column, which then follows as lines; where even that does not fit,
as lines. A column heading is never cut.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static
from textual_plotext import PlotextPlot

from triage.evaluation.agreement import BLOCK, agreement
from triage.evaluation.agreement_table import agreement_lines, agreement_table, by_source_lines
from triage.store import labels as lab
from triage.store.history import History

if TYPE_CHECKING:
    from triage.evaluation.agreement import CriterionAgreement


def _fits(table: Table, width: int, cells: list[str]) -> bool:
    """Whether ``table`` (untitled; its ``cells`` as text) is drawn whole in ``width`` cells: its top edge reaches
    its right corner, and no heading or cell is shortened (Rich shortens with "…" what does not fit).

    (Rich's measure says a few cells less than the table needs; Rich then cuts its right side.)
    """
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(table)
    drawn = console.export_text()
    top = drawn.splitlines()[0].rstrip()
    cut = "…" in drawn and not any("…" in c for c in cells)
    return table.box is not None and top.endswith(table.box.top_right) and not cut


def agreement_for_width(rows: list[CriterionAgreement], width: int) -> RenderableType:
    """The agreement table as wide as ``width`` allows, headings whole (see the module docstring)."""
    cells = [f"{r.pack}/{r.criterion}" for r in rows] + by_source_lines(rows)
    table = agreement_table(rows)
    if _fits(table, width, cells):
        return table
    slim = agreement_table(rows, by_source=False)
    if _fits(slim, width, cells):
        return Group(slim, Text("by source: " + "; ".join(by_source_lines(rows))))
    return Text("\n".join(agreement_lines(rows)))


def line_labels(rows: list[CriterionAgreement]) -> list[str]:
    """The chart's legend, one name per line: the criterion, with its pack where two packs share the name."""
    names = [r.criterion for r in rows]
    return [r.criterion if names.count(r.criterion) == 1 else f"{r.pack}/{r.criterion}" for r in rows]


class AgreementTable(Static):
    """The agreement table, redrawn for its width when that changes."""

    def __init__(self, rows: list[CriterionAgreement], width: int, *, id: str | None = None) -> None:
        super().__init__(agreement_for_width(rows, width), id=id)
        self.rows = rows
        self._drawn_for = width

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._drawn_for:
            self._drawn_for = event.size.width
            self.update(agreement_for_width(self.rows, event.size.width))


class AgreementScreen(ModalScreen[None]):
    """Agreement per criterion and its trend; Esc, F7 or q closes it."""

    BINDINGS = [Binding("escape,f7,q", "close", "Close")]
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]

    def __init__(self, history: History) -> None:
        super().__init__()
        self.rows = agreement(lab.judged(history))
        self.answers = lab.count(history)

    def compose(self) -> ComposeResult:
        yield Footer(compact=True, show_command_palette=False)  # this screen's keys, not the main screen's
        with VerticalScroll(id="stats-body", classes="dialog"):
            if not self.rows:
                yield Static(
                    "[b]Agreement[/b]\n\nNo labels yet. Answer the cards of a scored ticket (F6, then Enter "
                    "to confirm or 1-9 to correct) and the agreement shows here.",
                    id="stats-empty",
                )
                return
            yield Static(
                f"[b]Agreement[/b] of the decisions shown with {self.answers} answer(s), judged on the "
                "decision shown before each first answer."
            )
            yield AgreementTable(self.rows, self.app.size.width - 8, id="stats-table")
            yield PlotextPlot(id="stats-chart")
            yield Static("", id="stats-chart-note")
            yield Static("[dim]Esc, F7 or q closes this screen.[/dim]")

    def on_mount(self) -> None:
        if not self.rows:
            return
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        blocks = max((len([t for t in r.trend if t.rate is not None]) for r in self.rows), default=0)
        if blocks < 2:  # one point per line draws no trend: say so, rather than plot a lone dot
            plot.display = False
            self.query_one("#stats-chart-note", Static).update(
                f"[dim]The trend is drawn per block of {BLOCK} labels, oldest first: it shows from the second "
                f"block (now at most {blocks}).[/dim]"
            )
            return
        plt.title(f"agreement per block of {BLOCK} labels")
        for r, label in zip(self.rows, line_labels(self.rows), strict=True):
            ys = [t.rate * 100 for t in r.trend if t.rate is not None]
            plt.plot(list(range(1, len(ys) + 1)), ys, label=label, marker="braille")
        step = max(1, -(-blocks // 10))  # whole blocks on the axis, at most about ten of them
        plt.xticks(list(range(1, blocks + 1, step)))
        plt.xlim(0.5, blocks + 0.5)
        plt.ylim(0, 100)
        plt.xlabel("block (oldest first)")
        plt.ylabel("%")

    def action_close(self) -> None:
        self.dismiss(None)
