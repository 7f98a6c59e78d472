"""The decisions panel: one card per criterion, filled in as the engine streams them.

Where the full cards do not all fit the panel's height (80x24, or a thread open above), every card is drawn
compact, one line each (class ``-compact``), so that every criterion's decision stays on screen.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.containers import VerticalScroll

from triage.domain.pack import Pack
from triage.domain.result import CriterionResult, TicketResult
from triage.tui.widgets.criterion_card import CardSpec, CardState, CriterionCard


class DecisionsPanel(VerticalScroll, can_focus=False):
    """Cards for the active pack (or for a result reopened from history)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._specs: tuple[CardSpec, ...] = ()

    def on_resize(self) -> None:
        self.fit_cards()

    def full_height(self, columns: int) -> int:
        """Rows the full cards take in ``columns`` columns (each grid row as tall as its tallest card)."""
        width = max(1, (self.size.width - 2 - (columns - 1)) // max(1, columns))  # padding 0 1, gutter 1
        heights = [c.full_height(width) for c in self.cards]
        return sum(max(heights[i : i + columns]) for i in range(0, len(heights), max(1, columns)))

    def fit_cards(self) -> None:
        """Draw the cards full when they all fit the panel's height, else compact (one line each)."""
        if not self.size.height:
            return
        screen = self.screen
        columns = 1 if screen.has_class("-narrow") else 3 if screen.has_class("-wide") else 2
        compact = self.full_height(columns) > self.size.height
        if compact != self.has_class("-compact"):
            self.set_class(compact, "-compact")
            for c in self.cards:
                c.set_class(compact, "-compact")

    @property
    def cards(self) -> list[CriterionCard]:
        """The cards, in pack order."""
        return list(self.query(CriterionCard))

    def card(self, criterion_id: str) -> CriterionCard | None:
        """The card of one criterion."""
        return next((c for c in self.cards if c.spec.id == criterion_id), None)

    def show_specs(self, specs: Iterable[CardSpec], state: CardState = "idle") -> None:
        """Show these criteria, all in ``state``; cards are rebuilt only when the criteria change."""
        self.remove_class("-previous")
        specs = tuple(specs)
        if specs != self._specs:
            self._specs = specs
            self.remove_children()
            self.mount_all(CriterionCard(s) for s in specs)
            cards = [c for c in self.children if isinstance(c, CriterionCard)]
        else:
            cards = self.cards
        widest = max((len(s.id) for s in specs), default=0)
        for c in cards:
            c.set_state(state)
            c.name_width = widest
            c.set_class(self.has_class("-compact"), "-compact")
        self.call_after_refresh(self.fit_cards)

    def show_pack(self, pack: Pack, state: CardState = "idle") -> None:
        """The pack's criteria, all in ``state``."""
        self.show_specs((CardSpec.of_criterion(c) for c in pack.criteria), state)

    def begin(self, pack: Pack, *, model_ready: bool) -> None:
        """A ticket was submitted: every card waits (for the model, or its turn)."""
        self.show_pack(pack, "waiting" if model_ready else "model")

    def set_waiting(self) -> None:
        """The model is now up: cards waiting for it now wait for their turn."""
        for c in self.cards:
            if c.state == "model":
                c.set_state("waiting")

    def prefilled(self) -> None:
        """The prefix is in: the first card is being scored."""
        self._advance()

    def decided(self, result: CriterionResult) -> None:
        """One criterion is done; the next one is being scored."""
        card = self.card(result.id)
        if card is not None:
            card.set_result(result)
            if self.scroll_offset.y or card.region.bottom > self.region.bottom:
                self.scroll_to_widget(card, animate=False)
        self._advance()

    def _advance(self) -> None:
        for c in self.cards:
            if c.state == "scoring":
                return
            if c.state == "waiting":
                c.set_state("scoring")
                return

    def finish(self, result: TicketResult) -> None:
        """The ticket is done: every card shows its result, or why it has none."""
        by_id = {c.id: c for c in result.criteria}
        for card in self.cards:
            card.messages = max(1, result.thread.messages)
            r = by_id.get(card.spec.id)
            if r is not None:
                card.set_result(r)
            elif card.state != "done":
                card.set_state("cancelled" if not result.complete else "idle")
        self.scroll_home(animate=False)  # while scoring the view follows the cards; at the end, start at the top
        self.call_after_refresh(self.fit_cards)  # warnings make a card taller

    def failed(self) -> None:
        """Scoring failed: unfinished cards say so."""
        for card in self.cards:
            if card.state != "done":
                card.set_state("failed")

    def cancelled(self) -> None:
        """A submission that never started was cancelled."""
        for card in self.cards:
            if card.state != "done":
                card.set_state("cancelled")

    def set_previous(self, ticket_id: str | None) -> None:
        """Mark the cards as the previous ticket ``ticket_id``'s decisions (dimmed, named); None unmarks them."""
        self.set_class(ticket_id is not None, "-previous")
        for card in self.cards:
            card.set_previous(ticket_id if card.result is not None else None)

    def show_result(self, result: TicketResult) -> None:
        """Show a stored result (its own criteria, whatever the active pack)."""
        self.show_specs(CardSpec.of_result(c) for c in result.criteria)
        self.finish(result)
