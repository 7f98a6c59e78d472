"""The app's whole flow with a scripted engine: paste, score, cards in order, cancel, history, export."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until
from textual import events
from textual.widgets import DataTable, Input

from triage.domain.ticket import make_ticket
from triage.errors import TriageError
from triage.store.history import History
from triage.store.paths import user_dirs
from triage.tui.app import TriageApp
from triage.tui.messages import TicketDecided
from triage.tui.screens.export import ExportScreen
from triage.tui.screens.help import HelpScreen
from triage.tui.screens.history import HistoryScreen
from triage.tui.screens.main import MainScreen

TICKET = "Hi team,\nI was charged twice for my March invoice.\nPlease refund one of the charges today!\n-- Ann"


def states(app: TriageApp) -> list[str]:
    return [c.state for c in app.main.decisions.cards]


async def paste(app: TriageApp, pilot: object, text: str) -> None:
    """A bracketed paste from the terminal (the app forwards it to the focused widget)."""
    app.post_message(events.Paste(text))
    await wait_until(pilot, lambda: bool(app.main.ticket.ticket_text), what="the paste to land")


async def ready(app: TriageApp, pilot: object) -> None:
    await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model to load")


async def test_paste_score_cards_fill_one_by_one_and_history_is_written() -> None:
    engine = FakeEngine(hold_after=2, delay=0.02)
    app = fake_app(FakeFactory(engine))
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(app, pilot)
        await paste(app, pilot, TICKET)
        main = app.main
        assert main.ticket.text == TICKET  # all lines, not just the first
        await wait_until(pilot, lambda: "tokens" in str(main.ticket.border_subtitle), what="the token count")
        await pilot.press("f5")
        await wait_until(pilot, engine.held.is_set, what="the fake to reach its gate")
        await wait_until(pilot, lambda: states(app)[:3] == ["done", "done", "scoring"], what="two cards done")
        assert states(app)[3:] == ["waiting", "waiting"]
        assert main.decisions.cards[3].border_subtitle == "waiting for its turn"
        assert main.decisions.cards[0].result is not None and "ms" in str(main.decisions.cards[0].border_subtitle)
        [entry] = app.history.search()
        assert entry.status == "running"  # the ticket is saved at submit, before any result
        engine.gate.set()
        await wait_until(pilot, lambda: main.result is not None, what="the result")
        assert states(app) == ["done"] * 5
        assert main.result is not None and main.result.complete
        summary = main.summary.details_text  # the engine's figures: ctrl+o shows them
        assert (
            "prefill 120 ms" in summary
            and "hit rate" in summary
            and "fake-0.1b" in summary
            and f"support v{app.pack.version}" in summary
        )
        [entry] = app.history.search()
        assert entry.status == "done" and entry.summary == main.result.summary()


async def test_escape_cancels_between_criteria() -> None:
    engine = FakeEngine(hold_after=2)
    app = fake_app(FakeFactory(engine))
    async with app.run_test() as pilot:
        await ready(app, pilot)
        await paste(app, pilot, TICKET)
        await pilot.press("f5")
        await wait_until(pilot, engine.held.is_set)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.main.result is not None, what="the cancelled result")
        result = app.main.result
        assert result is not None and not result.complete and len(result.criteria) == 2
        assert states(app) == ["done", "done", "cancelled", "cancelled", "cancelled"]
        assert app.history.search()[0].status == "cancelled"


async def test_a_new_submit_cancels_the_old_and_stale_results_are_dropped() -> None:
    engine = FakeEngine(hold_after=1)
    app = fake_app(FakeFactory(engine))
    async with app.run_test() as pilot:
        await ready(app, pilot)
        main = app.main
        await paste(app, pilot, "First ticket: the app crashes on login.")
        await pilot.press("f5")
        await wait_until(pilot, engine.held.is_set)
        first_id = main.current.id if main.current else -1
        engine.hold_after = None
        main.ticket.set_ticket("Second ticket: please change my invoice address.")
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None and main.result.complete, what="the second result")
        second = make_ticket("Second ticket: please change my invoice address.")
        assert main.result is not None and main.result.ticket_id == second.id
        statuses = {e.preview.split(":")[0]: e.status for e in app.history.search()}
        assert statuses == {"First ticket": "cancelled", "Second ticket": "done"}  # history keeps both
        # A late message from the first submission must not replace what is on screen.
        stale = app.history.load(app.history.search()[1].score_id)  # type: ignore[arg-type]
        assert stale.result is not None
        main.post_message(TicketDecided(first_id, stale.result))
        await pilot.pause(0.1)
        assert main.result.ticket_id == second.id


async def test_submit_while_the_model_loads_waits_for_it() -> None:
    factory = FakeFactory(hold=True)
    app = fake_app(factory)
    async with app.run_test() as pilot:
        main = app.main
        assert main.model_state == "loading"
        assert "loading the default model" in str(main.status.render())
        await paste(app, pilot, TICKET)  # the UI takes input while loading
        await pilot.press("f5")
        await pilot.pause(0.05)
        assert states(app) == ["model"] * 5
        assert "waiting for the model" in str(main.summary.render())
        factory.gate.set()
        await wait_until(pilot, lambda: main.result is not None, what="the queued score")
        assert states(app) == ["done"] * 5


async def test_no_model_shows_the_error_and_the_install_command() -> None:
    error = TriageError(
        "no model is installed", hint="install one with `triage model pull qwen3-0.6b`, or pass --model PATH"
    )
    calls: list[object] = []
    app = fake_app(FakeFactory(error=error))
    app.model_unavailable = calls.append  # type: ignore[method-assign]  # the hook a first-run pull screen will use
    async with app.run_test() as pilot:
        main = app.main
        await wait_until(pilot, lambda: main.model_state == "failed")
        text = main.notices.text
        assert "no model is installed" in text and "triage model pull qwen3-0.6b" in text
        assert "no model" in str(main.status.render())
        assert len(calls) == 1
        await paste(app, pilot, TICKET)
        await pilot.press("f5")  # must not crash
        await pilot.pause(0.05)
        assert app.is_running and main.current is None
        names = [c.title for c in app.get_system_commands(main)]
        assert "Retry loading the model" in names


async def test_pasted_junk_is_cleaned_before_it_is_shown() -> None:
    app = fake_app()
    async with app.run_test() as pilot:
        await paste(app, pilot, "\x1b[2J\x1b]0;pwned\x07Refund\x00 me\x1b[31m now\x7f\ufffd\r\nthanks")
        assert app.main.ticket.text == "Refund me now\nthanks"


async def test_a_megabyte_paste_keeps_the_ui_responsive() -> None:
    engine = FakeEngine()
    app = fake_app(FakeFactory(engine))
    big = ("The invoice total is wrong and I want my money back now. " * 20000)[:1_000_000]
    async with app.run_test() as pilot:
        await ready(app, pilot)
        main = app.main
        t0 = time.perf_counter()
        app.post_message(events.Paste(big))
        await wait_until(pilot, lambda: main.ticket.is_large, what="the large paste")
        assert time.perf_counter() - t0 < 2.0
        assert main.ticket.ticket_text == big.strip()
        assert len(main.ticket.text) < 20_000  # only a preview is in the editor
        await pilot.press("end")  # the UI answers keys while the count runs in its worker
        lags = []
        end = time.perf_counter() + 1.0
        while time.perf_counter() < end:
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - t - 0.01)
        assert max(lags) < 0.3, f"the event loop stalled for {max(lags):.2f} s"
        await wait_until(
            pilot,
            lambda: "middle will be cut" in str(main.ticket.border_subtitle),
            timeout=20,
            what="the shortening warning",
        )
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None, timeout=20)
        assert any("shortened" in w for w in main.result.warnings)  # type: ignore[union-attr]
        await pilot.press("ctrl+l")
        assert not main.ticket.is_large and main.ticket.text == ""


async def test_history_reopens_a_ticket_and_rescoring_keeps_both() -> None:
    app = fake_app()
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(app, pilot)
        main = app.main
        await paste(app, pilot, TICKET)
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None)
        first = main.result
        await pilot.press("ctrl+l")
        assert main.ticket.text == "" and main.result is None
        assert "Paste the next ticket" in str(main.summary.render()) and "1 ticket," in str(main.summary.render())
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        history = app.screen
        assert isinstance(history, HistoryScreen)
        assert history.query_one(DataTable).row_count == 1
        await pilot.press("enter")  # from the search box: to the table
        await pilot.press("enter")  # open
        await wait_until(pilot, lambda: app.screen is main)
        assert main.ticket.text == TICKET
        assert main.result is not None and first is not None and main.result.to_dict() == first.to_dict()
        assert states(app) == ["done"] * 5
        assert "from history" in str(main.summary.render())
        await pilot.press("f5")  # re-score
        await wait_until(pilot, lambda: main.result is not None and main.result is not first and not main.scoring)
        # the session hit rate counts both scorings, not the reopened copy
        second = main.result
        want = (first.tokens.prefix_cached + second.tokens.prefix_cached) / (
            first.tokens.total_input + second.tokens.total_input
        )
        assert second.tokens.prefix_cached > first.tokens.prefix_cached == 0
        assert main.summary.session_tickets == 2 and main.summary.session_hit_rate == want
        assert f"session {want:.0%}, 2 tickets" in main.summary.details_text
        [row] = {e.ticket_row for e in app.history.search()}
        assert len(app.history.results(row)) == 2
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        search = app.screen.query_one(Input)
        search.value = "no such words"
        await wait_until(pilot, lambda: app.screen.query_one(DataTable).row_count == 0)
        search.value = "March refund"
        await wait_until(pilot, lambda: app.screen.query_one(DataTable).row_count == 2)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is main)


async def test_export_json_and_markdown_and_copy_summary(tmp_path: Path) -> None:
    app = fake_app()
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(app, pilot)
        main = app.main
        await paste(app, pilot, TICKET)
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None)
        result = main.result
        assert result is not None
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(app.screen, ExportScreen) and bool(app.screen.query("#export-path")))
        target = tmp_path / "out.json"
        app.screen.query_one("#export-path", Input).value = str(target)
        await pilot.press("enter", "enter")  # the format (JSON), then the file
        await wait_until(pilot, target.exists, what="the JSON export")
        assert json.loads(target.read_text(encoding="utf-8")) == json.loads(json.dumps(result.to_dict()))
        await wait_until(pilot, lambda: app.screen is main)
        main.action_export("markdown")
        await wait_until(pilot, lambda: isinstance(app.screen, ExportScreen) and bool(app.screen.query("#export-path")))
        path_input = app.screen.query_one("#export-path", Input)
        assert path_input.value.endswith(".md")
        md = tmp_path / "out.md"
        path_input.value = str(md)
        await pilot.press("enter", "enter")
        await wait_until(pilot, md.exists, what="the Markdown export")
        assert md.read_text(encoding="utf-8").startswith(f"# Ticket {result.ticket_id}")
        await wait_until(pilot, lambda: app.screen is main)
        await pilot.press("f4")
        assert app.clipboard == result.summary()


async def test_palette_commands_and_the_one_way_of_scoring() -> None:
    app = fake_app()
    async with app.run_test() as pilot:
        await ready(app, pilot)
        main = app.main
        commands = {c.title: c for c in app.get_system_commands(main)}
        for name in ("Switch pack", "Switch model", "Export JSON", "Export Markdown", "Clear", "Theme", "History"):
            assert name in commands, name
        for gone in ("Switch readout", "Toggle debiasing"):  # research knobs: triage bench and eval measure them
            assert gone not in commands, gone
        assert not any("readout" in c.title.lower() or "debias" in c.title.lower() for c in commands.values())
        assert "by name" not in str(main.status.render())  # how every ticket is read: no news on the agent's screen
        await paste(app, pilot, TICKET)
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None)
        result = main.result
        assert result is not None and (result.readout, result.orderings, result.mode) == ("label", "none", "fanout")
        assert result.prior is False
        commands["Switch model"].callback()
        await wait_until(pilot, lambda: app.screen is not main, what="the model list")
        await pilot.press("escape")


async def test_switch_model_reloads_through_the_factory() -> None:
    factory = FakeFactory()
    app = fake_app(factory)
    async with app.run_test() as pilot:
        await ready(app, pilot)
        main = app.main
        main.load_model("another-model")
        await pilot.pause(0.05)
        await ready(app, pilot)
        assert factory.requests == [None, "another-model"]
        assert factory.engine.closed  # the old engine was freed before the new one loaded


async def test_auto_score_after_paste_is_remembered() -> None:
    from triage.store.config import load_config

    app = fake_app()
    async with app.run_test() as pilot:
        await ready(app, pilot)
        main = app.main
        main.action_toggle_auto_score()
        assert load_config()["auto_score"] is True
        await paste(app, pilot, TICKET)
        await wait_until(pilot, lambda: main.result is not None, what="scoring right after the paste")


async def test_theme_is_remembered_in_the_config() -> None:
    from triage.store.config import load_config

    app = fake_app(remember_theme=True)
    async with app.run_test() as pilot:
        app.theme = "nord"
        await pilot.pause(0.05)
    assert load_config()["theme"] == "nord"
    again = fake_app(remember_theme=True, theme=None, config={"theme": "nord"})
    async with again.run_test() as pilot:
        assert again.theme == "nord"


async def test_help_screen_opens_with_f1_and_closes() -> None:
    app = fake_app()
    async with app.run_test() as pilot:
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, MainScreen))


async def test_footer_shows_the_keys_at_80_columns() -> None:
    app = fake_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(app, pilot)
        keys = {b.binding.key for b in app.screen.active_bindings.values() if b.binding.show}
        assert {"f1", "f2", "f3", "f4", "f5", "f7", "ctrl+q"} <= keys
        assert "escape" not in keys  # Esc is shown only while something runs
        from textual.widgets._footer import FooterKey

        labels = ("Help", "History", "Export", "Copy", "Score", "Agreement", "Quit")
        shown: dict[str, Any] = {}

        def laid_out() -> bool:  # the footer recomposes when the bindings refresh: read it whole, in one step
            shown.clear()
            shown.update({k.description: k.region for k in app.screen.query(FooterKey) if k.region.width})
            return set(labels) <= set(shown)

        await wait_until(pilot, laid_out, what="the footer's keys laid out")
        for label in labels:
            assert label in shown, label
            assert shown[label].right <= 80, f"{label} is cut off at 80 columns"


def test_history_db_lives_in_the_data_dir() -> None:
    app = fake_app()
    assert app.history.path == user_dirs().history_db
    app.history.close()


async def test_switch_pack_from_a_file_through_the_palette(tmp_path: Path) -> None:
    from textual.command import CommandPalette

    from triage.tui.screens.prompt import PromptScreen

    pack_file = tmp_path / "mine.toml"
    pack_file.write_text(
        '[pack]\nname = "mine"\nversion = "3"\n\n[[criterion]]\nid = "lang"\nquestion = "Which language?"\n'
        'options = [ { id = "en", label = "English" }, { id = "de", label = "German" } ]\n',
        encoding="utf-8",
    )
    app = fake_app()
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(app, pilot)
        main = app.main
        commands = {c.title: c for c in app.get_system_commands(main)}
        commands["Switch pack"].callback()
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette), what="the pack list")
        await pilot.press(*"load a pack")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, PromptScreen), what="the path prompt")
        app.screen.query_one(Input).value = str(pack_file)
        await pilot.press("enter")
        await wait_until(pilot, lambda: main.pack.name == "mine", what="the new pack")
        assert [c.spec.id for c in main.decisions.cards] == ["lang"]
        assert "mine v3" in str(main.status.render())
        await paste(app, pilot, "Hallo, meine Rechnung ist falsch.")
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None)
        assert [c.id for c in main.result.criteria] == ["lang"]  # type: ignore[union-attr]


async def test_a_damaged_history_is_moved_aside_and_the_app_says_so() -> None:
    import sqlite3

    db = user_dirs().history_db
    with History.open() as h:  # a triage history with pages on disk, then its b-tree pages trashed
        for i in range(40):
            h.save_ticket(make_ticket(f"ticket number {i} " + "x" * 3000))
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page * 2 : page * 6] = b"\xa5" * (page * 4)  # the header (SQLite, triage's schema) stays
    db.write_bytes(bytes(data))
    app = fake_app()
    async with app.run_test() as pilot:
        await ready(app, pilot)
        assert app.main.notices.has("history")
        assert "moved aside" in app.main.notices.text
        await paste(app, pilot, TICKET)
        await pilot.press("f5")
        await wait_until(pilot, lambda: app.main.result is not None)
        assert len(app.history.search()) == 1
    assert len(list(db.parent.glob("history.sqlite3.bad-*"))) == 1


async def test_brackets_in_a_ticket_are_text_not_markup() -> None:
    text = "[bold]Refund[/] me [/] now [link=x]please[/link] \\[x]"
    app = fake_app()
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(app, pilot)
        main = app.main
        await paste(app, pilot, text)
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None)
        await pilot.press("f2")
        await wait_until(
            pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.query_one(DataTable).row_count == 1
        )
        await pilot.pause(0.1)
        assert "[bold]Refund[/] me" in str(app.screen.query_one(DataTable).get_row_at(0)[2])
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is main)
        assert app.is_running
