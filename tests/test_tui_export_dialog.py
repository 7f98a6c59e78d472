"""The export dialog (F3) works as its footer says: it opens on the format, ↑/↓ choose it, Enter goes on to the
file name, Enter there exports, Esc cancels; the first Enter never writes a file (scripted engine, the real app)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fake_engine import fake_app, wait_until
from textual import events
from textual.widgets import Footer, Input
from textual.widgets._footer import FooterKey

from triage.tui.app import TriageApp
from triage.tui.screens.export import ExportScreen, FormatChoice

TICKET = "I was charged twice for my March invoice (INV-2031). Please refund one of the charges."


def footer_keys(screen: Any) -> dict[str, str]:
    """The dialog's own footer: key as shown -> what it does."""
    return {k.key_display: k.description for k in screen.query_one(Footer).query(FooterKey)}


async def scored_then_f3(app: TriageApp, pilot: Any) -> ExportScreen:
    await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model")
    app.post_message(events.Paste(TICKET))
    await wait_until(pilot, lambda: bool(app.main.ticket.ticket_text), what="the paste")
    await pilot.press("f5")
    await wait_until(pilot, lambda: app.main.result is not None, what="the result")
    await pilot.press("f3")
    await wait_until(pilot, lambda: isinstance(app.screen, ExportScreen) and bool(app.screen.query(Footer)))
    assert isinstance(app.screen, ExportScreen)
    return app.screen


async def test_the_first_enter_chooses_the_format_and_the_second_exports(tmp_path: Path) -> None:
    app = fake_app()
    async with app.run_test(size=(100, 32)) as pilot:
        dialog = await scored_then_f3(app, pilot)
        path = dialog.query_one("#export-path", Input)
        path.value = str(tmp_path / "decisions.json")
        assert isinstance(app.focused, FormatChoice)  # it opens on the format, not on the file name
        await wait_until(pilot, lambda: "↑↓" in footer_keys(dialog), what="the dialog's footer")
        keys = footer_keys(dialog)
        assert keys["↑↓"] == "Format" and keys["⏎"] == "File name" and keys["esc"] == "Cancel"
        assert not {"f5", "f3", "f6"} & set(keys)  # the main screen's keys do nothing here; they are not shown
        # ↓ chooses Markdown at once: the file name follows
        await pilot.press("down")
        await wait_until(pilot, lambda: dialog.fmt == "markdown" and path.value.endswith("decisions.md"))
        await pilot.press("up")
        await wait_until(pilot, lambda: dialog.fmt == "json" and path.value.endswith("decisions.json"))
        await pilot.press("enter")  # the first Enter: the format is chosen, on to the file name
        assert app.screen is dialog and app.focused is path
        assert list(tmp_path.iterdir()) == []
        await wait_until(pilot, lambda: footer_keys(dialog).get("⏎") == "Export", what="the footer on the file name")
        await pilot.press("enter")  # the second: exported
        await wait_until(pilot, lambda: app.screen is app.main)
        written = json.loads((tmp_path / "decisions.json").read_text(encoding="utf-8"))
        assert written["ticket_id"] == app.main.result.ticket_id


async def test_markdown_by_keys_alone_and_esc_writes_nothing(tmp_path: Path) -> None:
    app = fake_app()
    async with app.run_test(size=(80, 24)) as pilot:
        dialog = await scored_then_f3(app, pilot)
        path = dialog.query_one("#export-path", Input)
        path.value = str(tmp_path / "report.json")
        await pilot.press("down", "enter", "enter")
        await wait_until(pilot, lambda: app.screen is app.main)
        assert [p.name for p in tmp_path.iterdir()] == ["report.md"]
        assert (tmp_path / "report.md").read_text(encoding="utf-8").startswith("# Ticket ")
        # the palette's "Export Markdown" opens on Markdown; Esc from any field writes nothing
        app.main.action_export("markdown")
        await wait_until(pilot, lambda: isinstance(app.screen, ExportScreen) and bool(app.screen.query(Footer)))
        dialog = app.screen
        dialog.query_one("#export-path", Input).value = str(tmp_path / "other.md")
        await pilot.press("enter")  # Markdown stays chosen
        assert dialog.fmt == "markdown"
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.main)
        assert [p.name for p in tmp_path.iterdir()] == ["report.md"]
