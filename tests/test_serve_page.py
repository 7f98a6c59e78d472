"""The web page of ``triage serve`` in a real headless Chromium (Debian's), driven by Playwright.

Skips cleanly when Playwright or the browser is not installed (CI installs neither). Set
TRIAGE_SCREENSHOT=PATH to save the page after a ticket, as docs/serve.png was made.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api", reason="needs the browser extra: pip install playwright")

from triage.domain.pack import default_pack  # noqa: E402
from triage.serve.app import ServeSettings  # noqa: E402
from triage.serve.local import serving  # noqa: E402

CHROMIUM = os.environ.get("TRIAGE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set TRIAGE_CHROMIUM)")
    with tempfile.TemporaryDirectory() as profile, sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=FLAGS, viewport={"width": 1200, "height": 900}
        )
        yield context
        context.close()


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[Any]:
    from triage.scoring.loader import load_engine

    eng = load_engine(str(smollm2_path), n_ctx=2048)
    yield eng
    eng.close()


def test_paste_a_ticket_and_every_card_shows_a_percentage_and_a_latency(browser: Any, engine: Any) -> None:
    pack = default_pack()
    outside: list[str] = []
    with serving(engine, ServeSettings(packs={pack.name: pack})) as (base, worker):
        page = browser.new_page()
        page.on("request", lambda r: None if r.url.startswith(base) else outside.append(r.url))
        page.goto(base + "/")
        sync_api.expect(page.locator("#model")).to_contain_text(engine.name)
        page.get_by_label("Paste a ticket").fill("I was charged twice this month. Refund the second payment now!")
        page.get_by_label("Id").fill("WEB-1")
        page.get_by_label("Paste a ticket").press("Control+Enter")  # the keyboard alone scores it
        cards = page.locator("#cards article.card:not(.pending)")
        sync_api.expect(cards).to_have_count(len(pack.criteria), timeout=60_000)
        for i in range(len(pack.criteria)):
            card = cards.nth(i)
            text = card.inner_text()
            assert re.search(r"\d+\.\d%", text), text
            assert re.search(r"latency \d+ ms", text), text
            assert card.get_by_role("progressbar").count() >= 2
            assert re.search(r"decided by: (zero-shot|calibrated|learned)", text)
        sync_api.expect(page.locator("#status")).to_contain_text("scored 5 criteria")
        history = page.locator("#history li")
        sync_api.expect(history).to_have_count(1)
        assert "WEB-1" in history.first.inner_text()
        assert worker.stats.served == 1
        if os.environ.get("TRIAGE_SCREENSHOT"):
            page.screenshot(path=os.environ["TRIAGE_SCREENSHOT"], full_page=True)
        page.close()
    assert outside == []  # no network: every asset came from triage itself


def test_a_bad_ticket_is_said_on_the_page(browser: Any, engine: Any) -> None:
    pack = default_pack()
    with serving(engine, ServeSettings(packs={pack.name: pack}, max_ticket_bytes=50)) as (base, worker):
        page = browser.new_page()
        page.goto(base + "/")
        sync_api.expect(page.locator("#model")).to_contain_text(engine.name)
        page.get_by_label("Paste a ticket").fill("x" * 60)
        page.get_by_role("button", name="Score").click()
        sync_api.expect(page.locator("#status")).to_contain_text("413")
        assert worker.stats.served == 0
        page.close()
