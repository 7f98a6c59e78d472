"""The agreement screen (F7): how often the decisions shown agreed with the agents' answers, and its trend.

The same numbers as ``triage stats`` (:mod:`triage.evaluation.agreement`), and a chart of
agreement over time, one line per criterion, drawn by plotext (textual-plotext).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static
from textual_plotext import PlotextPlot

from triage.evaluation.agreement import BLOCK, agreement
from triage.evaluation.agreement_table import agreement_table
from triage.store import labels as lab
from triage.store.history import History


class AgreementScreen(ModalScreen[None]):
    """Agreement per criterion and its trend; Esc, F7 or q closes it."""

    BINDINGS = [Binding("escape,f7,q", "close", "Close")]

    def __init__(self, history: History) -> None:
        super().__init__()
        self.rows = agreement(lab.judged(history))
        self.answers = lab.count(history)

    def compose(self) -> ComposeResult:
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
            yield Static(agreement_table(self.rows), id="stats-table")
            yield PlotextPlot(id="stats-chart")
            yield Static("[dim]Esc, F7 or q closes this screen.[/dim]")

    def on_mount(self) -> None:
        if not self.rows:
            return
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.title(f"agreement per block of {BLOCK} labels")
        blocks = 1
        for r in self.rows:
            ys = [t.rate * 100 for t in r.trend if t.rate is not None]
            plt.plot(list(range(1, len(ys) + 1)), ys, label=r.criterion, marker="braille")
            blocks = max(blocks, len(ys))
        step = max(1, -(-blocks // 10))  # whole blocks on the axis, at most about ten of them
        plt.xticks(list(range(1, blocks + 1, step)))
        plt.xlim(0.5, blocks + 0.5)
        plt.ylim(0, 100)
        plt.xlabel("block (oldest first)")
        plt.ylabel("%")

    def action_close(self) -> None:
        self.dismiss(None)
