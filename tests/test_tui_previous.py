"""A new ticket in the box never leaves the previous ticket's decisions on screen as if they were its own: once
the box's text is not the scored ticket's, the cards are dimmed and say "previous ticket ID", the summary says
so, and they take no answer until F5 scores the box (scripted engine, the real app)."""

from __future__ import annotations

from typing import Any

from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until
from textual import events

from triage.domain.ticket import make_ticket
from triage.store import labels as lab
from triage.tui.app import TriageApp
from triage.tui.box_state import box_change

A = "My parcel has said 'in transit' for nine days. Order 4411. Please send a replacement."
B = "I was charged twice for my March invoice (INV-2031). Please refund one of the charges."


async def ready(app: TriageApp, pilot: Any) -> None:
    await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model")


async def paste(app: TriageApp, pilot: Any, text: str) -> None:
    app.post_message(events.Paste(text))
    await wait_until(pilot, lambda: text in app.main.ticket.ticket_text, what="the paste")
    await pilot.pause()  # the box's TicketPasted reaches the screen


async def score(app: TriageApp, pilot: Any) -> None:
    main = app.main
    await pilot.press("f5")
    await wait_until(pilot, lambda: main.result is not None and not main.scoring, what="the result")


def shown_as_current(app: TriageApp, ticket_id: str) -> list[str]:
    """The cards that show a decision with nothing saying it is not the box's ticket's."""
    return [
        c.spec.id
        for c in app.main.decisions.cards
        if c.result is not None
        and not (c.has_class("-previous") and f"previous ticket {ticket_id}" in str(c.border_subtitle))
    ]


def summary(app: TriageApp) -> str:
    return str(app.main.summary.render())


async def test_pasting_ticket_b_after_a_marks_every_card_as_the_previous_ticket_until_f5() -> None:
    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(app, pilot)
        main = app.main
        await paste(app, pilot, A)
        await score(app, pilot)
        a_id = main.result.ticket_id
        assert a_id == make_ticket(A).id
        assert shown_as_current(app, a_id) == [c.spec.id for c in main.decisions.cards]  # A's, and A is in the box
        assert "previous" not in summary(app)
        # the agent was labelling (a card has the focus) and pastes the next ticket: it replaces the box's
        main.decisions.cards[0].focus()
        await paste(app, pilot, B)
        assert main.ticket.ticket_text == B
        assert shown_as_current(app, a_id) == []
        assert f"previous ticket {a_id}: the box has changed since these decisions; F5 scores the box" in summary(app)
        assert all("-previous" in c.classes for c in main.decisions.cards)
        # answering a previous ticket's card stores nothing (F6 says why, so does a key on a card)
        await pilot.press("f6")
        assert app.focused is main.ticket
        main.decisions.cards[1].focus()
        await pilot.press("enter", "1")
        assert main.decisions.cards[1].answer is None and lab.count(app.history) == 0
        # F5 scores the box: B's decisions, current again
        await score(app, pilot)
        b_id = main.result.ticket_id
        assert b_id == make_ticket(B).id != a_id
        assert shown_as_current(app, "nobody") == [c.spec.id for c in main.decisions.cards]
        assert not any(c.has_class("-previous") for c in main.decisions.cards)
        assert "previous" not in summary(app) and b_id in summary(app)


async def test_a_paste_after_a_decision_replaces_the_scored_ticket_and_ctrl_z_brings_it_back() -> None:
    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(app, pilot)
        main = app.main
        await paste(app, pilot, A)
        await score(app, pilot)
        a_id = main.result.ticket_id
        # the box has the focus after F5: a paste is a new ticket, it replaces A's text (not "…replacement.I was…")
        assert app.focused is main.ticket
        await paste(app, pilot, B)
        assert main.ticket.ticket_text == B
        assert shown_as_current(app, a_id) == []
        assert f"previous ticket {a_id}: the box has changed since these decisions; F5 scores the box" in summary(app)
        await wait_until(pilot, lambda: "Undo paste" in str(app.screen.active_bindings.get("ctrl+z")), what="^z")
        # one key brings A back: its decisions are the box's again
        await pilot.press("ctrl+z")
        assert main.ticket.ticket_text == A
        await wait_until(pilot, lambda: not main.decisions.has_class("-previous"), what="the unmark")
        assert shown_as_current(app, "nobody") == [c.spec.id for c in main.decisions.cards]
        # F5 on the pasted ticket after all: paste it again, F5 scores B
        await paste(app, pilot, B)
        assert main.ticket.ticket_text == B
        await score(app, pilot)
        assert main.result.ticket_id == make_ticket(B).id
        # with no paste to take back, ctrl+z is the box's own undo
        main.ticket.focus()
        await pilot.press("end", "x")
        assert main.ticket.text == B + "x"
        await pilot.press("ctrl+z")
        assert main.ticket.text == B


async def test_an_edit_in_the_box_marks_them_and_undoing_it_unmarks_them() -> None:
    app = fake_app(FakeFactory(FakeEngine()))
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(app, pilot)
        main = app.main
        await paste(app, pilot, A)
        await score(app, pilot)
        a_id = main.result.ticket_id
        # text typed under A's: a reply (F8/F9/F10) or, with F5, a new ticket
        main.ticket.focus()
        await pilot.press("end", "enter", *"Thanks")
        await wait_until(pilot, lambda: main.decisions.has_class("-previous"), what="the mark")
        assert main.ticket.ticket_text.startswith(A)
        assert shown_as_current(app, a_id) == []
        assert f"previous ticket {a_id}" in summary(app) and "F8/F9/F10 add the text under it as a reply" in summary(
            app
        )
        # back to A's text: A's decisions again (the edit is noticed once typing settles)
        main.ticket.set_ticket(A)
        await wait_until(pilot, lambda: not main.decisions.has_class("-previous"), what="the unmark")
        assert shown_as_current(app, "nobody") == [c.spec.id for c in main.decisions.cards]
        assert "previous" not in summary(app)
        # one typed character is an edit too
        main.ticket.focus()
        await pilot.press("end", "x")
        await wait_until(pilot, lambda: main.decisions.has_class("-previous"), what="the mark after typing")
        assert shown_as_current(app, a_id) == []


async def test_a_ticket_pasted_while_the_previous_one_is_scored_gets_its_decisions_marked_when_they_arrive() -> None:
    engine = FakeEngine(hold_after=2)
    app = fake_app(FakeFactory(engine))
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(app, pilot)
        main = app.main
        await paste(app, pilot, A)
        await pilot.press("f5")
        await wait_until(pilot, engine.held.is_set, what="half-way")
        main.ticket.set_ticket(B)
        engine.gate.set()
        await wait_until(pilot, lambda: main.result is not None and not main.scoring, what="A's result")
        assert shown_as_current(app, make_ticket(A).id) == []
        assert f"previous ticket {make_ticket(A).id}" in summary(app)


def test_box_change_says_same_added_or_changed() -> None:
    assert box_change(A, None, composing=False) == "same"  # nothing scored
    assert box_change(f"  {A}\n", A, composing=False) == "same"  # as scored, once cleaned
    assert box_change(A + "\n\nThanks, it arrived.", A, composing=False) == "added"
    assert box_change(B, A, composing=False) == "changed"
    assert box_change(B, A, composing=True) == "same"  # a thread is open: the editor takes its next message
