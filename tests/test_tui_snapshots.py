"""Snapshots of the main states: empty, loading, half-way, done (100x32, 80x24, 140x45), a thread open after a
reply (80x24, 140x45), no model.

Stable by construction: a scripted engine with fixed timings and timestamps,
a fixed theme, no cursor blink, no spinner. Baselines live in
``tests/snapshots/test_tui_snapshots/``; regenerate them with
``.venv/bin/python -m pytest tests/test_tui_snapshots.py --snapshot-update``
and look at the SVGs before committing.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from fake_engine import FakeEngine, FakeFactory, fake_app, wait_until
from textual import events

from triage.domain.pack import parse_pack
from triage.errors import TriageError
from triage.tui.app import TriageApp

SNAPSHOTS = Path(__file__).parent / "snapshots"
# A fixed pack, so that edits to the built-in one do not change these pictures.
PACK = parse_pack(
    tomllib.loads(
        """
[pack]
name = "support"
version = "1"

[[criterion]]
id = "queue"
question = "Which team should handle this ticket?"
options = [{ id = "billing", label = "Billing" }, { id = "technical", label = "Technical" },
           { id = "account", label = "Account" }, { id = "shipping", label = "Shipping" },
           { id = "general", label = "General" }]

[[criterion]]
id = "urgency"
question = "How urgent is this ticket?"
options = [{ id = "high", label = "High" }, { id = "medium", label = "Medium" }, { id = "low", label = "Low" }]

[[criterion]]
id = "sentiment"
question = "Is the customer angry?"
options = [{ id = "angry", label = "Angry" }, { id = "upset", label = "Upset" }, { id = "neutral", label = "Neutral" },
           { id = "positive", label = "Positive" }]

[[criterion]]
id = "needs_approval"
question = "Does resolving this ticket need a manager's approval?"
options = [{ id = "yes", label = "Yes" }, { id = "no", label = "No" }]

[[criterion]]
id = "type"
question = "What type of ticket is this?"
options = [{ id = "problem", label = "Problem" }, { id = "request", label = "Request" },
           { id = "question", label = "Question" },
           { id = "complaint", label = "Complaint" }]
"""
    ),
    "snapshot-pack.toml",
)
TICKET = (
    "Hello,\n"
    "I was charged twice for my March invoice (INV-2031) and nobody answers my emails.\n"
    "Please refund one of the charges today or I will cancel my subscription.\n"
    "-- Ann Jones"
)


@pytest.fixture(autouse=True)
def _snapshots_in_tests_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep baselines in tests/snapshots/ rather than syrupy's default __snapshots__/."""
    from pytest_textual_snapshot import SVGImageExtension

    def dirname(cls: type, *, test_location: Any) -> str:
        return str(SNAPSHOTS / test_location.basename)

    monkeypatch.setattr(SVGImageExtension, "dirname", classmethod(dirname))


async def _ready(app: TriageApp, pilot: Any) -> None:
    await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model")


async def _pasted(app: TriageApp, pilot: Any) -> None:
    await _ready(app, pilot)
    app.post_message(events.Paste(TICKET))
    await wait_until(
        pilot, lambda: "tokens" in str(app.main.ticket.border_subtitle), timeout=30, what="the token count"
    )


def test_empty(snap_compare: Any) -> None:
    app = fake_app(pack=PACK)

    async def run_before(pilot: Any) -> None:
        await _ready(app, pilot)

    assert snap_compare(app, terminal_size=(100, 32), run_before=run_before)


def test_loading(snap_compare: Any) -> None:
    app = fake_app(FakeFactory(hold=True), pack=PACK)

    async def run_before(pilot: Any) -> None:
        await wait_until(pilot, lambda: bool(app.main.status.state == "loading"))

    assert snap_compare(app, terminal_size=(100, 32), run_before=run_before)


def test_scoring_half_way(snap_compare: Any) -> None:
    engine = FakeEngine(hold_after=2)
    app = fake_app(FakeFactory(engine), pack=PACK)

    async def run_before(pilot: Any) -> None:
        await _pasted(app, pilot)
        await pilot.press("f5")
        await wait_until(pilot, engine.held.is_set)
        await wait_until(pilot, lambda: [c.state for c in app.main.decisions.cards][:3] == ["done", "done", "scoring"])

    assert snap_compare(app, terminal_size=(100, 32), run_before=run_before)


def _done_app() -> tuple[TriageApp, Any]:
    app = fake_app(FakeFactory(FakeEngine(low_coverage=("needs_approval",))), pack=PACK)

    async def run_before(pilot: Any) -> None:
        await _pasted(app, pilot)
        await pilot.press("f5")
        await wait_until(pilot, lambda: app.main.result is not None)
        # the count is made again with the score's measured rate: its estimate is in
        await wait_until(pilot, lambda: " s" in str(app.main.ticket.border_subtitle), what="the estimate")

    return app, run_before


def test_done(snap_compare: Any) -> None:
    app, run_before = _done_app()
    assert snap_compare(app, terminal_size=(100, 32), run_before=run_before)


def test_done_at_80x24(snap_compare: Any) -> None:
    app, run_before = _done_app()
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_done_at_140x45(snap_compare: Any) -> None:
    app, run_before = _done_app()
    assert snap_compare(app, terminal_size=(140, 45), run_before=run_before)


REPLY = "Sorry about the double charge. I have refunded the second one; it shows on your card in 3 days."


def _thread_app() -> tuple[TriageApp, Any]:
    app = fake_app(FakeFactory(FakeEngine()), pack=PACK)

    async def run_before(pilot: Any) -> None:
        await _pasted(app, pilot)
        await pilot.press("f5")
        await wait_until(pilot, lambda: app.main.result is not None and not app.main.scoring)
        await pilot.press("f9")
        app.main.ticket.insert(REPLY)
        await pilot.press("f9")
        await wait_until(pilot, lambda: app.main.result is not None and app.main.result.thread.messages == 2)
        await wait_until(pilot, lambda: " s" in str(app.main.thread_view.border_subtitle), what="the count")
        app.clear_notifications()  # F9's hint, whose toast would cover the cards
        await pilot.pause()

    return app, run_before


def test_thread_at_80x24(snap_compare: Any) -> None:
    app, run_before = _thread_app()
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_thread_at_140x45(snap_compare: Any) -> None:
    app, run_before = _thread_app()
    assert snap_compare(app, terminal_size=(140, 45), run_before=run_before)


def test_no_model(snap_compare: Any) -> None:
    error = TriageError(
        "no model is installed",
        hint=(
            "install one with `triage model pull qwen3-0.6b`, or without Hugging "
            "Face access `triage model pull qwen2.5-coder-0.5b`; or pass --model PATH"
        ),
    )
    app = fake_app(FakeFactory(error=error), pack=PACK)

    async def run_before(pilot: Any) -> None:
        await wait_until(pilot, lambda: app.main.model_state == "failed")

    assert snap_compare(app, terminal_size=(100, 32), run_before=run_before)
