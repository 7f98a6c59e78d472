"""The page and the bounded listing (issue 42): a long thread listed in summary is opened whole, and a reply
to it sends the whole thread. Real headless Chromium through Playwright, as tests/test_serve_page.py (its
browser, started the same way), on the scripted engine; the server binds 127.0.0.1 and stops by itself."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from fake_engine import FakeEngine  # noqa: E402
from test_serve import post, request  # noqa: E402
from test_serve_page import CHROMIUM, FLAGS, _settings, sync_api  # noqa: E402

from triage.serve import listing  # noqa: E402
from triage.serve.local import serving  # noqa: E402

pytestmark = pytest.mark.slow  # a real Chromium


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """tests/test_serve_page.py's browser: Debian's Chromium, a fresh profile (skipped without it, off CI)."""
    if not Path(CHROMIUM).is_file():
        if os.environ.get("CI"):
            pytest.fail(f"no Chromium at {CHROMIUM}")
        pytest.skip(f"no Chromium at {CHROMIUM} (./scripts/setup installs it; or set TRIAGE_CHROMIUM)")
    with tempfile.TemporaryDirectory() as profile, sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=FLAGS, viewport={"width": 1200, "height": 900}
        )
        yield context
        context.close()


def test_a_summarised_thread_is_opened_whole_and_a_reply_sends_it_whole(chromium: Any, tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    n = 40
    messages = [{"role": "customer" if i % 2 == 0 else "agent", "text": f"message {i} of the thread"} for i in range(n)]
    expect = sync_api.expect
    with serving(FakeEngine(), _settings(history=True, history_path=path)) as (base, _):
        status, scored = post(base, {"id": "LONG-1", "messages": messages, "history": True})
        assert status == 200, scored
        _, _, data = request(base, "GET", "/v1/tickets")
        (listed,) = json.loads(data)["tickets"]
        assert listed["summarised"] and len(listed["messages"]) == listing.FIRST + listing.LAST
        page = chromium.new_page()
        page.goto(base + "/")
        item = page.locator("#history li button", has_text="LONG-1")
        expect(item).to_have_count(1)
        item.click()
        expect(page.locator("#thread li")).to_have_count(n)  # the whole thread, fetched from /v1/tickets/LONG-1
        expect(page.locator("#thread li").nth(20)).to_contain_text("message 20 of the thread")
        page.locator("#reply-text").fill("We have refunded you today.")
        page.locator("#reply-form button[type=submit]").click()
        expect(page.locator("#thread li")).to_have_count(n + 1)
        _, _, data = request(base, "GET", "/v1/tickets/LONG-1")
        whole = json.loads(data)["ticket"]
        assert [m["text"] for m in whole["messages"]] == [m["text"] for m in messages] + ["We have refunded you today."]
        assert whole["result"]["thread"]["previous"] == n  # the server saw the thread it had, and one more
        page.close()
