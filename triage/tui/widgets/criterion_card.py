"""One criterion's card: a bar per option, the choice highlighted, margin, time and tokens.

A card is drawn from a :class:`CardSpec` (what the criterion asks) and, once
the engine has answered, a :class:`CriterionResult`. Until then its state says
why it is empty: waiting for its turn, being scored, cancelled, failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rich.text import Text
from textual.markup import escape
from textual.widget import Widget

from triage.scoring.pack import Criterion, Option
from triage.render import bar
from triage.scoring.result import CriterionResult

CardState = Literal["idle", "model", "waiting", "scoring", "done", "cancelled", "failed"]

STATE_NOTES: dict[str, str] = {
    "idle": "",
    "model": "waiting for the model to load",
    "waiting": "waiting for its turn",
    "scoring": "scoring…",
    "cancelled": "not scored: cancelled",
    "failed": "not scored: failed",
}
PCT_WIDTH = 6  # "100.0%"
MIN_BAR = 4
MAX_BAR = 40


@dataclass(frozen=True)
class CardSpec:
    """What a card shows before any result: the criterion and its options."""

    id: str
    question: str
    options: tuple[tuple[str, str], ...]  # (option id, label)

    @classmethod
    def of_criterion(cls, crit: Criterion) -> CardSpec:
        def label(o: Option) -> str:
            description = getattr(o, "description", "")  # packs may describe options beyond their label
            return f"{o.label}: {description}" if description else o.label

        return cls(crit.id, crit.question, tuple((o.id, label(o)) for o in crit.options))

    @classmethod
    def of_result(cls, result: CriterionResult) -> CardSpec:
        return cls(result.id, result.question, tuple((o.id, o.label) for o in result.options))


class CriterionCard(Widget):
    """A criterion's decision as bars (see module docstring)."""

    COMPONENT_CLASSES = {"card--chosen", "card--bar", "card--option", "card--empty", "card--warning"}

    def __init__(self, spec: CardSpec) -> None:
        super().__init__(classes="card")
        self.spec = spec
        self.state: CardState = "idle"
        self.result: CriterionResult | None = None
        self.border_title = f"[b]{escape(spec.id)}[/b] [dim]{escape(spec.question)}[/dim]"
        self.tooltip = Text(spec.question + "\n" + "\n".join(f"{oid}: {label}" for oid, label in spec.options))
        self._sync()

    def set_state(self, state: CardState) -> None:
        """Show an empty card's reason (a result is cleared)."""
        self.result = None
        self.state = state
        self._sync()

    def set_result(self, result: CriterionResult) -> None:
        """Fill the card with the engine's answer."""
        self.result = result
        self.state = "done"
        self._sync()

    def _sync(self) -> None:
        """Classes and subtitle follow the state; the body is drawn in :meth:`render`."""
        for name in STATE_NOTES.keys() | {"done"}:
            self.set_class(self.state == name, f"-{name}")
        r = self.result
        self.set_class(bool(r and r.warnings), "-warning")
        if r is None:
            self.border_subtitle = STATE_NOTES.get(self.state, "")
        else:
            self.border_subtitle = f"{r.source} · Δ{r.margin * 100:.0f} pts · {r.tail_ms:.0f} ms · {r.tail_tokens} tok"
        self.refresh(layout=True)

    def render(self) -> Text:
        width = max(self.content_size.width, 20)
        r = self.result
        label_w = min(max((len(oid) for oid, _ in self.spec.options), default=4), 14)
        bar_w = max(MIN_BAR, min(MAX_BAR, width - 2 - label_w - 1 - 1 - PCT_WIDTH))
        chosen = self.get_component_rich_style("card--chosen")
        plain = self.get_component_rich_style("card--option")
        bar_style = self.get_component_rich_style("card--bar")
        empty = self.get_component_rich_style("card--empty")
        text = Text(no_wrap=False, overflow="fold")
        for i, (oid, _label) in enumerate(self.spec.options):
            if i:
                text.append("\n")
            name = oid[:label_w].ljust(label_w)
            if r is None:
                text.append(f"  {name} ", plain)
                text.append("·" * bar_w, empty)
                text.append(" " + "–".rjust(PCT_WIDTH), empty)
                continue
            p = r.probability(oid)
            is_choice = oid == r.choice
            text.append("▶ " if is_choice else "  ", chosen if is_choice else plain)
            text.append(name + " ", chosen if is_choice else plain)
            text.append(bar(p, bar_w), chosen if is_choice else bar_style)
            text.append(f" {p:>{PCT_WIDTH - 1}.1%}", chosen if is_choice else plain)
        if r is not None:
            for w in r.warnings:
                text.append("\n⚠ " + w, self.get_component_rich_style("card--warning"))
        return text

