"""One criterion's card: a bar per option, the choice highlighted, margin, time and tokens.

A card is drawn from a :class:`CardSpec` (what the criterion asks) and, once
the engine has answered, a :class:`CriterionResult`. Until then its state says
why it is empty: waiting for its turn, being scored, cancelled, failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.markup import escape
from textual.message import Message
from textual.widget import Widget

from triage.domain.pack import Criterion, Option
from triage.domain.result import CriterionResult
from triage.render import bar
from triage.store.export import tail_cost
from triage.store.label_marks import Standing

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


class CriterionCard(Widget, can_focus=True):
    """A criterion's decision as bars (see module docstring).

    Once it has a result, the agent can answer it: Enter or ``y`` confirms the
    shown decision, ``1``-``9`` (or a click on an option's row) picks that option.
    The card then shows the agent's answer beside the model's and posts
    :class:`Answered`; the screen stores it as a label. An answer carried from an
    earlier score of the thread (fewer messages) says the message count it was given at.

    A card marked *previous* (:meth:`set_previous`) shows the decision of a ticket the
    box no longer holds: dimmed, ``previous ticket ID`` on its edge, and it takes no answer.

    A *compact* card (class ``-compact``, set by the panel when the full cards do not fit) is one line:
    the criterion, the choice and its probability, the agent's answer, then the other options as room
    allows; with the focus its options are numbered, for 1-9. Its title and bottom edge are fitted to the
    card's width: the question and the figures go before a word is cut.
    """

    COMPONENT_CLASSES = {"card--chosen", "card--bar", "card--option", "card--empty", "card--warning", "card--answer"}
    BINDINGS = [
        Binding("enter,y", "confirm", "Confirm"),
        Binding("1", "pick(0)", "Pick", key_display="1-9"),
        *(Binding(str(n), f"pick({n - 1})", show=False) for n in range(2, 10)),
        Binding("down,j", "app.focus_next", "Next", show=False),
        Binding("up,k", "app.focus_previous", "Previous", show=False),
    ]

    class Answered(Message):
        """The agent answered this card: ``option`` is right for ``criterion``."""

        def __init__(self, card: CriterionCard, criterion: str, option: str) -> None:
            super().__init__()
            self.card = card
            self.criterion = criterion
            self.option = option

    def __init__(self, spec: CardSpec) -> None:
        super().__init__(classes="card")
        self.spec = spec
        self.state: CardState = "idle"
        self.result: CriterionResult | None = None
        self.answer: str | None = None  # the agent's option, once answered (or reopened with a label)
        self.answer_given_at: int | None = None  # a carried answer: the message count it was given at
        self.label: Standing | None = None  # the answer as a label: its kind as given, the message count
        self.messages = 1  # the thread's messages the result is on (set by the panel)
        self.name_width = 0  # compact: the widest criterion id of the panel, so that the choices line up
        self.previous: str | None = None  # the id of the ticket whose decision this is, once the box holds another
        self.border_title = f"[b]{escape(spec.id)}[/b] [dim]{escape(spec.question)}[/dim]"
        self.tooltip = Text(spec.question + "\n" + "\n".join(f"{oid}: {label}" for oid, label in spec.options))
        self._sync()

    def set_state(self, state: CardState) -> None:
        """Show an empty card's reason (a result and an answer are cleared)."""
        self.result = None
        self.answer = None
        self.answer_given_at = None
        self.label = None
        self.previous = None
        self.state = state
        self._sync()

    def set_result(self, result: CriterionResult) -> None:
        """Fill the card with the engine's answer (an agent's answer given meanwhile stays)."""
        self.result = result
        self.state = "done"
        self._sync()

    def set_answer(self, option: str | None, *, given_at: int | None = None) -> None:
        """Show the agent's answer (a label) beside the model's; None clears it.

        ``given_at``: the answer is carried from an earlier score of the thread, given when it had this many messages.
        """
        self.answer = option
        self.answer_given_at = given_at if option is not None else None
        self.label = None
        r = self.result
        if option is not None and r is not None:  # answered here, now: its kind is against the decision shown
            kind = "confirmation" if option == r.choice else "correction"
            at = given_at if given_at is not None else max(1, self.messages)
            self.label = Standing(self.spec.id, option, at, given_at is not None, kind, r.choice)
        self._sync()

    def set_label(self, label: Standing) -> None:
        """Show a stored label that stands for the result on screen, with the meaning it was given with (a
        correction stays ``you: X`` when the model now says X; :meth:`Standing.verdict`)."""
        self.answer = label.option
        self.answer_given_at = label.given_at if label.carried else None
        self.label = label
        self._sync()

    def set_previous(self, ticket_id: str | None) -> None:
        """Mark the card as the decision of the previous ticket ``ticket_id`` (None: it is the box's again)."""
        if ticket_id != self.previous:
            self.previous = ticket_id
            self._sync()

    # -- answering --------------------------------------------------------------------
    def action_confirm(self) -> None:
        """The shown decision is right."""
        if self.result is not None:
            self._answer(self.result.choice)

    def action_pick(self, index: int) -> None:
        """Option number ``index + 1`` is right."""
        if self.result is not None and 0 <= index < len(self.spec.options):
            self._answer(self.spec.options[index][0])

    def on_click(self, event: events.Click) -> None:
        """A click on an option's row picks it."""
        offset = event.get_content_offset(self)  # None on the border
        if self.compact:  # one line: a click only gives the card the focus (its options then get numbers)
            self.focus()
            return
        row = (offset.y if offset is not None else -1) - self.options_top
        if self.result is not None and 0 <= row < len(self.spec.options):
            self.focus()
            self._answer(self.spec.options[row][0])

    def _answer(self, option: str) -> None:
        if self.previous is not None:
            self.notify(
                f"This card is the previous ticket {self.previous}'s decision, not the box's ticket: "
                "press F5 to score the box, or F2 to reopen that ticket and answer there.",
                severity="warning",
                markup=False,
            )
            return
        self.set_answer(option)
        self.post_message(self.Answered(self, self.spec.id, option))

    @property
    def compact(self) -> bool:
        return self.has_class("-compact")

    def full_height(self, width: int) -> int:
        """Rows the full card takes ``width`` cells wide: its options, its warnings, its question when the title
        has no room for it, and its two edges."""
        warnings = len(self.result.warnings) if self.result is not None else 0
        question = 0 if self._question_in_title(width) else -(-len(self.spec.question) // max(1, width - 4))
        return len(self.spec.options) + warnings + 2 + question  # a warning may wrap too: counted as one row

    @property
    def options_top(self) -> int:
        """The content row of the first option (1 when the question is the card's first line)."""
        return 0 if self._question_in_title() else 1

    def _question_in_title(self, width: int | None = None) -> bool:
        width = self.size.width if width is None else width
        room = width - 6 if width else 0
        return not room or len(self.spec.id) + 1 + len(self.spec.question) <= room

    def on_resize(self) -> None:
        self._sync()
        fit = getattr(self.parent, "fit_cards", None)  # the panel: a taller card may no longer fit
        if fit is not None and not self.compact:
            self.call_after_refresh(fit)

    def on_focus(self) -> None:
        if self.compact:
            self.refresh(layout=True)

    def on_blur(self) -> None:
        if self.compact:
            self.refresh(layout=True)

    def _fit_title(self) -> None:
        """The criterion and, where it fits whole, its question; else the question is the card's first line,
        wrapped, never cut (the tooltip has it too)."""
        title = f"[b]{escape(self.spec.id)}[/b]"
        if self._question_in_title():
            title += f" [dim]{escape(self.spec.question)}[/dim]"
        self.border_title = title

    def _sync(self) -> None:
        """Classes and subtitle follow the state; the body is drawn in :meth:`render`."""
        self._fit_title()
        for name in STATE_NOTES.keys() | {"done"}:
            self.set_class(self.state == name, f"-{name}")
        r = self.result
        self.set_class(bool(r and r.warnings), "-warning")
        if r is None:
            self.border_subtitle = STATE_NOTES.get(self.state, "")
        else:
            figures = [r.source, f"Δ{r.margin * 100:.0f} pts", tail_cost(r, sep=" · ")]
            first = []
            if self.previous is not None:  # whose decision it is comes first; the figures go
                first.append(f"[b]previous ticket {escape(self.previous)}[/b]")
                figures = figures[:2]
            if self.label is not None:
                first.append(f"[b]✔ {escape(self.label.verdict(on_thread=self.messages > 1))}[/b]")
            room = self.size.width - 6 if self.size.width else 10_000
            while figures and Text.from_markup(" · ".join(first + figures)).cell_len > room:
                figures.pop()  # the cost first, then the margin: never a cut word
            self.border_subtitle = " · ".join(first + figures)
        self.set_class(self.previous is not None and r is not None, "-previous")
        self.set_class(self.answer is not None, "-answered")
        self.refresh(layout=True)

    def _compact_line(self, width: int) -> Text:
        """The card in one line (see the class docstring); numbered options while it has the focus."""
        r = self.result
        chosen = self.get_component_rich_style("card--chosen")
        plain = self.get_component_rich_style("card--option")
        empty = self.get_component_rich_style("card--empty")
        text = Text(no_wrap=False, overflow="fold")
        name_w = min(max(self.name_width, len(self.spec.id), 8), 16)
        text.append(self.spec.id[:name_w].ljust(name_w) + " ", "bold")
        if r is None:  # why it is empty, or (nothing scored yet) its options
            text.append(STATE_NOTES.get(self.state, "") or " · ".join(o for o, _ in self.spec.options), empty)
            return text
        if self.has_focus:  # answering: every option with its number
            for i, (oid, _label) in enumerate(self.spec.options):
                mark = "✔" if self.answer == oid else ("▶" if oid == r.choice else " ")
                text.append(
                    f"{' ' if i else ''}{i + 1}{mark}{oid} {r.probability(oid):.0%}",
                    chosen if oid == r.choice else plain,
                )
            return text
        text.append(f"▶ {r.choice} {r.probability(r.choice):.0%}", chosen)
        if self.label is not None:
            text.append(
                f"  ✔ {self.label.verdict(on_thread=self.messages > 1)}", self.get_component_rich_style("card--answer")
            )
        if self.previous is not None:
            text.append("  (previous)", empty)  # the summary names the ticket
        for o in sorted(r.options, key=lambda o: -o.probability):
            if o.id == r.choice:
                continue
            more = f" · {o.id} {o.probability:.0%}"
            if text.cell_len + len(more) > width:
                break
            text.append(more, plain)
        for w in r.warnings:
            text.append("\n  ⚠ " + short_warning(w), self.get_component_rich_style("card--warning"))
        return text

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """The rows of the body drawn ``width`` cells wide (its question line wraps: counted, never cut)."""
        if self.compact:
            return super().get_content_height(container, viewport, width)
        body = self._body(max(width, 20), question=not self._question_in_title(width + 4))
        return len(body.wrap(self.app.console, max(width, 1)))

    def render(self) -> Text:
        width = max(self.content_size.width, 20)
        if self.compact:
            return self._compact_line(width)
        return self._body(width, question=not self._question_in_title())

    def _body(self, width: int, *, question: bool) -> Text:
        """The full card's body ``width`` cells wide: the question first when ``question``, then the options."""
        r = self.result
        label_w = min(max((len(oid) for oid, _ in self.spec.options), default=4), 14)
        bar_w = max(MIN_BAR, min(MAX_BAR, width - 2 - label_w - 1 - 1 - PCT_WIDTH))
        chosen = self.get_component_rich_style("card--chosen")
        plain = self.get_component_rich_style("card--option")
        bar_style = self.get_component_rich_style("card--bar")
        empty = self.get_component_rich_style("card--empty")
        text = Text(no_wrap=False, overflow="fold")
        if question:
            text.append(self.spec.question + "\n", empty)
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
            if self.answer == oid:
                text.append("✔ ", self.get_component_rich_style("card--answer"))
            elif self.has_focus and i < 9:
                text.append(f"{i + 1} ", plain)
            else:
                text.append("▶ " if is_choice else "  ", chosen if is_choice else plain)
            text.append(name + " ", chosen if is_choice else plain)
            text.append(bar(p, bar_w), chosen if is_choice else bar_style)
            text.append(f" {p:>{PCT_WIDTH - 1}.1%}", chosen if is_choice else plain)
        if r is not None:
            for w in r.warnings:
                text.append("\n⚠ " + short_warning(w), self.get_component_rich_style("card--warning"))
        return text


def short_warning(warning: str) -> str:
    """A card's warning in a few words: ``low coverage (20%)``; what it means is said once, in the summary
    (:func:`triage.tui.widgets.score_summary.card_notes`), not on every card."""
    if warning.startswith("low coverage:"):
        pct = next((w for w in warning.split() if w.endswith("%")), "")
        return f"low coverage ({pct})" if pct else "low coverage"
    return warning
