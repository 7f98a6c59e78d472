"""The page reads the ticket ahead as the agent types or pastes (triage/serve/static/app.js, ``POST /v1/prefill``),
in the real browser (tests/test_serve_page.py's Chromium), on the scripted engine: a pause prefills once, the next
edit aborts the request in flight (the server stops the prefill), the score after costs only the tails, and a
changed stable block is said once."""

from __future__ import annotations

import time
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api", reason="needs Playwright: pip install -e '.[dev]'")

import test_serve_page  # noqa: E402
from fake_engine import FakeEngine  # noqa: E402

from triage.serve.local import serving  # noqa: E402

pytestmark = pytest.mark.slow
browser = test_serve_page.browser  # the page tests' headless Chromium (a module's own)
_settings = test_serve_page._settings
TEXT = "Where is my parcel? The tracking page has said in transit for nine days."


def wait(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_pause_in_typing_prefills_once_and_the_score_costs_only_the_tails(browser: Any) -> None:
    engine = FakeEngine()
    with serving(engine, _settings()) as (base, _):
        page = browser.new_page()
        page.goto(base + "/")
        sync_api.expect(page.locator("#model")).to_contain_text(engine.name)
        box = page.get_by_label("Paste a ticket")
        box.press_sequentially(TEXT, delay=20)  # keys 20 ms apart: no pause until the end
        wait(lambda: box.get_attribute("data-read-ahead") is not None)
        time.sleep(0.6)
        [(text, done)] = engine.prefills
        assert text == TEXT and done.complete and box.get_attribute("data-read-ahead") == str(done.tokens)
        box.press("Control+Enter")
        sync_api.expect(page.locator("#status")).to_contain_text("scored 5 criteria")
        page.locator("#result-details summary").click()
        sync_api.expect(page.locator("#result-info")).to_contain_text(
            f"prefix {done.tokens} tokens, {done.tokens} cached"
        )
        assert len(engine.prefills) == 1 and engine.scored == [TEXT]
        page.close()


def test_the_next_edit_aborts_the_prefill_in_flight(browser: Any) -> None:
    engine = FakeEngine(prefill_delay=3.0)
    with serving(engine, _settings()) as (base, _):
        page = browser.new_page()
        page.goto(base + "/")
        sync_api.expect(page.locator("#model")).to_contain_text(engine.name)
        box = page.get_by_label("Paste a ticket")
        box.fill(TEXT)  # a paste: one input event
        assert engine.prefilling.wait(10)
        box.press_sequentially(" Order 1234.", delay=20)  # the next edit
        wait(lambda: len(engine.prefills) >= 1)
        first = engine.prefills[0][1]
        assert engine.prefills[0][0] == TEXT and not first.complete  # the server stopped it mid-way
        wait(lambda: box.get_attribute("data-read-ahead") is not None, timeout=15)
        text, second = engine.prefills[-1]
        assert text == TEXT + " Order 1234." and second.complete
        assert second.cached == first.cached + first.evaluated  # it went on from where the first stopped
        page.close()


def test_a_changed_stable_block_is_said_once_on_the_page(browser: Any) -> None:
    engine = FakeEngine()
    engine.stable_note = "stable prefix changed, so its prefill is paid again once (pack: a → b)"
    with serving(engine, _settings()) as (base, _):
        page = browser.new_page()
        page.goto(base + "/")
        sync_api.expect(page.locator("#model")).to_contain_text(engine.name)
        box = page.get_by_label("Paste a ticket")
        box.fill(TEXT)
        wait(lambda: box.get_attribute("data-read-ahead") is not None)  # the prefill paid the stable block
        box.press("Control+Enter")
        sync_api.expect(page.locator("#status")).to_contain_text("scored 5 criteria")
        notes = page.locator('#notices [data-key="stable"]')
        sync_api.expect(notes).to_have_count(1)
        sync_api.expect(notes).to_contain_text("stable prefix changed")
        box.fill("A second ticket: my invoice is wrong.")
        box.press("Control+Enter")
        sync_api.expect(page.locator("#status")).to_contain_text("scored 5 criteria")
        sync_api.expect(notes).to_have_count(0)  # said once, with the result it came with
        page.close()
