"""Threads in the app, with the scripted engine: a reply key grows the ticket on screen into a thread, the
box shows it, the summary says what was evaluated and reused, history keeps one row with a score per message,
F2 restores the whole thread, the timeline shows a point per message count, and labels stay on the ticket."""

from __future__ import annotations

from typing import Any

from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until
from textual import events
from textual.widgets import DataTable

from triage.domain.pack import default_pack
from triage.store import labels as lab
from triage.tui.app import TriageApp
from triage.tui.screens.help import keys_table
from triage.tui.screens.history import HistoryScreen
from triage.tui.screens.timeline import TimelineScreen, timeline_table

TICKET = "My parcel has said 'in transit' for 9 days. Order 4411. Where is it?"
AGENT = "Sorry about the delay. I have asked the carrier for a trace."
CUSTOMER = "Four days later nobody wrote back. This is the second time I am asking!"


def plain(renderable: Any) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


async def ready(app: TriageApp, pilot: Any) -> None:
    await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model to load")


async def scored(app: TriageApp, pilot: Any, *keys: str) -> Any:
    main = app.main
    before = main.result
    await pilot.press(*keys)
    await wait_until(pilot, lambda: main.result is not None and main.result is not before and not main.scoring)
    return main.result


async def paste(app: TriageApp, pilot: Any, text: str) -> None:
    main = app.main
    main.ticket.focus()
    app.post_message(events.Paste(text))
    await wait_until(pilot, lambda: text in main.ticket.ticket_text, what="the paste")


async def test_a_reply_grows_the_ticket_into_a_thread_and_only_the_new_message_is_evaluated() -> None:
    engine = FakeEngine()
    app = fake_app(FakeFactory(engine))
    async with app.run_test(size=(110, 40)) as pilot:
        await ready(app, pilot)
        main = app.main
        await paste(app, pilot, TICKET)
        first = await scored(app, pilot, "f5")
        assert not main.thread_view.shown and main.ticket.text == TICKET
        assert "thread" not in str(main.summary.render())  # a plain ticket's summary is as before
        # F9 with the ticket unchanged: the box turns to the thread, the editor takes the reply
        await pilot.press("f9")
        assert main.composing and main.thread_view.shown and main.ticket.text == ""
        assert "Next message" in str(main.ticket.border_title)
        await paste(app, pilot, AGENT)
        second = await scored(app, pilot, "f9")
        assert second.ticket_id == first.ticket_id  # the id stays: the engine's reuse is keyed by it
        assert [m.role for m in main.open_ticket.thread] == ["customer", "agent"]
        assert second.thread.messages == 2 and second.thread.previous == 1 and second.thread.reused > 0
        assert second.tokens.evaluated < first.tokens.evaluated
        summary = main.summary.details_text
        assert f"evaluated {second.tokens.evaluated} tokens, reused {second.thread.reused} of the thread" in summary, (
            summary
        )
        shown = str(main.thread_view.query_one("#thread-text").render())
        assert "1. Customer" in shown and "2. Agent reply" in shown and AGENT in shown and TICKET in shown
        assert main.ticket.text == ""  # ready for the next message
        # a customer reply typed in the box: F8
        main.ticket.insert(CUSTOMER)
        third = await scored(app, pilot, "f8")
        assert third.thread.messages == 3 and third.thread.previous == 2
        assert "3. Customer reply" in str(main.thread_view.query_one("#thread-text").render())
        # F5 with the box empty scores the thread again, as a thread
        again = await scored(app, pilot, "f5")
        assert again.thread.messages == 3 and again.ticket_id == first.ticket_id
        # history: one ticket row, a score per message count
        entries = app.history.search()
        assert {e.ticket_row for e in entries} == {main.open_row}
        assert sorted(e.scored for e in entries) == [1, 2, 3, 3]
        assert [r.thread.messages for r in app.history.results(main.open_row)] == [1, 2, 3, 3]
        # the timeline: a point per scored message count
        await pilot.press("ctrl+t")
        await wait_until(pilot, lambda: isinstance(app.screen, TimelineScreen))
        timeline = app.screen
        assert [p.messages for p in timeline.points] == [1, 2, 3]
        table = plain(timeline_table(timeline.points, timeline.messages))
        assert "1 customer" in table and "2 agent" in table and "3 customer" in table
        changed = [
            c.id
            for p, q in zip(timeline.points, timeline.points[1:], strict=False)
            for c, d in zip(p.result.criteria, q.result.criteria, strict=True)
            if c.choice != d.choice
        ]
        assert table.count("→") == len(changed) > 0  # a changed choice is marked
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is main)


async def test_reply_below_the_ticket_and_a_note_and_the_keys_are_in_the_help() -> None:
    app = fake_app()
    async with app.run_test(size=(110, 40)) as pilot:
        await ready(app, pilot)
        main = app.main
        await pilot.press("f8")  # nothing on screen: nothing happens but a word
        assert main.open_ticket is None and not main.composing
        await paste(app, pilot, TICKET)
        await scored(app, pilot, "f5")
        main.ticket.move_cursor(main.ticket.document.end)
        main.ticket.insert("\n\n" + AGENT)  # typed under the scored ticket: the reply is what is new
        result = await scored(app, pilot, "f9")
        assert [m.text for m in main.open_ticket.thread] == [TICKET, AGENT]
        main.ticket.insert("Customer called; promised a call back tomorrow.")
        result = await scored(app, pilot, "f10")
        assert main.open_ticket.thread[-1].role == "note" and result.thread.messages == 3
        assert "3. Internal note" in str(main.thread_view.query_one("#thread-text").render())
        # text in the box and F5 is a new ticket: the thread closes
        main.ticket.insert("A new ticket about a refund.")
        new = await scored(app, pilot, "f5")
        assert new.thread.messages == 1 and not main.composing and not main.thread_view.shown
        assert len({e.ticket_row for e in app.history.search()}) == 2
        keys = plain(keys_table())
        assert "F8" in keys and "F9" in keys and "F10" in keys and "ctrl+t" in keys
        shown = {b.binding.key for b in main.active_bindings.values() if b.binding.show and b.enabled}
        assert {"f8", "f9", "ctrl+t"} <= shown  # in the footer
        palette = {c.title for c in app.get_system_commands(main)}
        assert {"Add customer reply", "Add agent reply", "Add internal note", "Timeline"} <= palette


async def test_reopening_a_thread_restores_all_its_messages_and_replies_go_on_in_the_same_row() -> None:
    app = fake_app()
    async with app.run_test(size=(110, 40)) as pilot:
        await ready(app, pilot)
        main = app.main
        await paste(app, pilot, TICKET)
        await scored(app, pilot, "f5")
        await pilot.press("f9")
        await paste(app, pilot, AGENT)
        await scored(app, pilot, "f9")
        row, tid = main.open_row, main.open_ticket.id
        await pilot.press("ctrl+l")
        assert main.open_ticket is None and not main.thread_view.shown
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        table = app.screen.query_one(DataTable)
        assert table.row_count == 2 and str(table.get_row_at(0)[3]) == "2/2" and str(table.get_row_at(1)[3]) == "1/2"
        table.move_cursor(row=1)  # the score of the first message
        await pilot.press("tab")
        app.screen.action_open()
        await wait_until(pilot, lambda: app.screen is main and main.result is not None)
        assert main.composing and [m.text for m in main.open_ticket.thread] == [TICKET, AGENT]
        assert main.result.thread.messages == 1
        assert "now 2: these decisions are on the first 1" in str(main.summary.render())
        assert "not in the decisions shown" in str(main.thread_view.query_one("#thread-text").render())
        main.ticket.insert(CUSTOMER)
        result = await scored(app, pilot, "f8")
        assert result.ticket_id == tid and result.thread.messages == 3
        assert {e.ticket_row for e in app.history.search()} == {row}
        assert len(app.history.thread(row)) == 3


async def test_labels_attach_to_the_thread_and_carry_to_its_newer_scores() -> None:
    from triage.domain.ticket import make_ticket

    app = fake_app()
    async with app.run_test(size=(110, 40)) as pilot:
        await ready(app, pilot)
        main = app.main
        await paste(app, pilot, TICKET)
        await scored(app, pilot, "f5")
        first, second = main.decisions.cards[0], main.decisions.cards[1]
        assert len(second.spec.options) >= 3
        # the fake chooses option (len(text) + i) % n: pick for the second card an option that is neither its
        # choice now nor its choice once the agent's reply is in, so the carried label must differ from both
        thread = make_ticket(
            None, main.result.ticket_id, [{"role": "customer", "text": TICKET}, {"role": "agent", "text": AGENT}]
        )
        later = second.spec.options[(len(thread.text) + 1) % len(second.spec.options)][0]
        pick = next(i for i, (o, _) in enumerate(second.spec.options) if o not in (second.result.choice, later))
        await pilot.press("f6", "enter", str(pick + 1))  # confirm the first card, correct the second, on message 1
        row = main.result_rows[0]
        given = lab.current(app.history, row)
        assert {c: v.kind for c, v in given.items()} == {first.spec.id: "confirmation", second.spec.id: "correction"}
        assert app.focused is main.decisions.cards[2]  # the next open card
        await pilot.press("f9")
        assert app.focused is main.ticket  # the reply is typed in the box, not on a card (its y and 1-9 answer it)
        await pilot.press(*"Sorry, a y and a 3.")
        assert lab.current(app.history, row) == given
        main.ticket.set_ticket(AGENT)
        await scored(app, pilot, "f9")
        assert main.result.thread.messages == 2 and second.result.choice == later
        # the labels still stand: shown as the agent's answers, with the message count they were given at
        assert first.answer == given[first.spec.id].option and first.answer_given_at == 1
        assert second.answer == given[second.spec.id].option != second.result.choice
        sub = str(second.border_subtitle)
        assert f"you: {second.answer} (msg 1)" in sub
        body = str(second.render())
        assert f"▶ {later}" in body and f"✔ {second.answer}" in body  # the model's new choice and the agent's, both
        assert "(msg 1)" in str(first.border_subtitle)
        assert not any(c.answer for c in main.decisions.cards[2:])  # no label, no mark
        # F6 goes to the first card nobody answered; answering there adds a label on this score
        await pilot.press("f6")
        assert app.focused is main.decisions.cards[2]
        await pilot.press("enter")
        labels = lab.current(app.history, row)
        assert labels[main.decisions.cards[2].spec.id].score_id == main.result_rows[1]
        assert labels[first.spec.id].score_id != main.result_rows[1]  # the carried ones were not written again
        assert len(lab.judged(app.history)) == 3  # three (ticket, criterion)
        # answering a carried card again gives it a label on this score: no longer carried
        first.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: lab.current(app.history, row)[first.spec.id].score_id == main.result_rows[1])
        assert first.answer_given_at is None and "(msg 1)" not in str(first.border_subtitle)
        # the history list marks the ticket as labelled, on every score of the thread
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        table = screen.query_one(DataTable)
        await wait_until(pilot, lambda: table.row_count == 2)
        assert [str(table.get_cell_at((r, 4))) for r in range(2)] == ["✔ 3", "✔ 3"]
        assert "labelled on 3 criteria" in str(screen.query_one("#history-detail").render())


def test_the_summary_says_when_a_message_was_edited_or_the_thread_compacted() -> None:
    from triage.domain.result import ThreadInfo
    from triage.tui.widgets.score_summary import thread_line

    result = FakeEngine().score_ticket(TICKET, default_pack())
    assert thread_line(result) is None  # a plain ticket scored afresh
    result.thread = ThreadInfo(messages=6, previous=5, edited=2, reused=40, dropped=3)
    line = thread_line(result) or ""
    assert "thread[/b] of 6 messages" in line and f"evaluated {result.tokens.evaluated} tokens, reused 40" in line
    assert "message 2 was edited: read again from there" in line and "compacted: messages 2-4 left out" in line
    result.thread = ThreadInfo(messages=3, previous=0, reused=0)
    assert "reused none of the thread" in (thread_line(result) or "")
