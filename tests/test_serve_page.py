"""The web page of ``triage serve`` in a real headless Chromium (Debian's), driven by Playwright.

scripts/setup installs both (Chromium with apt-get, Playwright with the dev extra); Playwright
drives /usr/bin/chromium (never a browser of its own). Without them the tests skip, except under
CI, where that is a failure. The first test scores on the real smollm2 model; the others are
about the page and use the scripted engine of tests/fake_engine.py. Set TRIAGE_SCREENSHOT=PATH to
save the page after a ticket, as docs/serve.png was made.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
if os.environ.get("CI"):  # a green CI run must not hide the page's tests
    import playwright.sync_api as sync_api
else:
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs Playwright: pip install -e '.[dev]'")

from fake_engine import FakeEngine  # noqa: E402

from triage.domain.pack import default_pack  # noqa: E402
from triage.domain.result import CriterionResult  # noqa: E402
from triage.serve.app import ServeSettings  # noqa: E402
from triage.serve.local import serving  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# Each module run starts a real headless Chromium (seconds before the first page): the whole suite runs these,
# the fast tier (-m "not model and not slow", README) leaves them out.
pytestmark = pytest.mark.slow
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


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).is_file():
        message = f"no Chromium at {CHROMIUM} (./scripts/setup installs it; or set TRIAGE_CHROMIUM)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with tempfile.TemporaryDirectory() as profile, sync_api.sync_playwright() as pw:  # a fresh --user-data-dir
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


@pytest.mark.model
def test_paste_a_ticket_and_every_card_shows_a_percentage_and_a_latency(
    browser: Any, engine: Any, tmp_path: Path
) -> None:
    pack = default_pack()
    outside: list[str] = []
    settings = _settings(history=True, history_path=tmp_path / "history.sqlite3")  # as `triage serve` runs
    with serving(engine, settings) as (base, worker):
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


def test_a_bad_ticket_is_said_on_the_page(browser: Any) -> None:
    pack = default_pack()
    engine = FakeEngine()
    with serving(engine, ServeSettings(packs={pack.name: pack}, max_ticket_bytes=50)) as (base, worker):
        page = browser.new_page()
        page.goto(base + "/")
        sync_api.expect(page.locator("#model")).to_contain_text(engine.name)
        page.get_by_label("Paste a ticket").fill("x" * 60)
        page.get_by_role("button", name="Score").click()
        sync_api.expect(page.locator("#status")).to_contain_text("413")
        assert worker.stats.served == 0
        page.close()


def _settings(**kw: Any) -> ServeSettings:
    """The settings of a server on the default pack; a history file is opened first, as `triage serve` opens
    it at start-up (two first opens at once, the page's list and a score, would both create its tables)."""
    from triage.store.history import History

    pack = default_pack()
    if kw.get("history_path") is not None:
        History.open_writable(kw["history_path"]).close()
    return ServeSettings(packs={pack.name: pack}, **kw)


def _score(page: Any, text: str, tid: str) -> None:
    page.get_by_label("Paste a ticket").fill(text)
    page.get_by_label("Id").fill(tid)
    page.get_by_label("Paste a ticket").press("Control+Enter")
    sync_api.expect(page.locator("#status")).to_contain_text("scored 5 criteria")


def test_a_label_given_on_the_page_is_counted_by_stats_and_shown_after_a_reload(
    browser: Any, tmp_path: Path, triage_home: Path
) -> None:
    path = tmp_path / "history.sqlite3"
    expect = sync_api.expect
    with serving(FakeEngine(), _settings(history=True, history_path=path)) as (base, _):
        page = browser.new_page()
        page.goto(base + "/")
        expect(page.locator("#keep")).to_be_checked()  # the server keeps a history
        _score(page, "The parcel never came and the tracking page says delivered.", "WEB-L")
        queue = page.locator("#card-queue")
        chosen = queue.locator(".opt.chosen").get_attribute("data-option")
        other = queue.locator(".opt:not(.chosen)").first
        other_id, other_label = other.get_attribute("data-option"), other.locator(".name").get_attribute("title")
        other.click()  # a click on an option's row: the agent's answer, a correction
        expect(queue.locator(".answer")).to_have_text(f"✔ you: {other_label}")
        expect(queue.locator(f'.opt[data-option="{chosen}"] .name')).to_contain_text("▸")  # the model's choice stays
        expect(page.locator("#status")).to_contain_text(f"label saved: queue = {other_id} (correction)")
        # the keyboard alone: the focus moved to the next open card; Enter confirms, a digit picks
        expect(page.locator("#card-urgency")).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.locator("#card-urgency .answer")).to_have_text("✔ confirmed")
        expect(page.locator("#card-sentiment")).to_be_focused()
        page.keyboard.press("1")
        expect(page.locator("#card-sentiment .answer")).to_contain_text("✔")

        stats = subprocess.run(
            [sys.executable, "-m", "triage.cli", "stats", "--json", "--history-file", str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "TRIAGE_HOME": str(triage_home), "PYTHONPATH": str(ROOT)},
        )
        assert stats.returncode == 0, stats.stderr
        counted = json.loads(stats.stdout)
        assert counted["labels"] == 3
        rows = {c["criterion"]: c for c in counted["criteria"]}
        assert rows["queue"]["overall"] == {"n": 1, "agree": 0, "rate": 0.0}  # the correction
        assert rows["urgency"]["overall"] == {"n": 1, "agree": 1, "rate": 1.0}  # the confirmation

        page.reload()  # the tickets come back from the server's history, with their labels
        item = page.locator("#history li button", has_text="WEB-L")
        expect(item).to_contain_text("3 labels")
        item.click()
        expect(page.locator("#card-queue .answer")).to_have_text(f"✔ you: {other_label}")
        expect(page.locator("#card-urgency .answer")).to_have_text("✔ confirmed")
        page.locator("#card-type").focus()  # the cards can still be answered after the reload
        page.keyboard.press("Enter")
        expect(page.locator("#card-type .answer")).to_have_text("✔ confirmed")
        page.close()


def test_with_no_history_the_page_offers_no_label_and_says_how_to_turn_them_on(browser: Any) -> None:
    with serving(FakeEngine(), _settings(history=False)) as (base, _):  # triage serve --no-history
        page = browser.new_page()
        page.goto(base + "/")
        sync_api.expect(page.locator("#keys")).to_contain_text("Labels are off")
        sync_api.expect(page.locator("#keys")).to_contain_text("without --no-history")
        assert page.locator("#keep").is_hidden()  # nothing to keep a ticket in
        _score(page, "Please close my account.", "WEB-N")
        assert page.locator("#cards article[tabindex]").count() == 0  # no card takes the focus or a key
        assert page.locator('#cards [role="button"]').count() == 0  # no option row is a control
        page.locator("#card-queue .opt").first.click()
        assert "label" not in page.locator("#status").inner_text()  # nothing was sent, nothing failed
        assert page.locator("#card-queue .answer").count() == 0
        sync_api.expect(page.locator("#keys")).to_contain_text("Labels are off")
        page.close()


def test_a_ticket_not_kept_offers_no_label_on_a_server_that_keeps_a_history(browser: Any, tmp_path: Path) -> None:
    with serving(FakeEngine(), _settings(history=True, history_path=tmp_path / "h.sqlite3")) as (base, _):
        page = browser.new_page()
        page.goto(base + "/")
        sync_api.expect(page.locator("#keep")).to_be_checked()  # the server's default is in
        page.locator("#keep").uncheck()
        _score(page, "Please close my account.", "WEB-U")
        assert page.locator("#cards article[tabindex]").count() == 0
        sync_api.expect(page.locator("#keys")).to_contain_text("not kept in the history")
        page.close()


def _quick_start_settings(history_file: Path | None = None) -> ServeSettings:
    """The settings of `triage serve` as the README's Quick start runs it (no flags; the port aside)."""
    from triage.cli import build_parser
    from triage.commands.serve import _check_history, settings_of

    args = ["serve", "--port", "8787"] + (["--history-file", str(history_file)] if history_file else [])
    settings = settings_of(build_parser().parse_args(args), {})[0]
    _check_history(settings.history_path)  # as the command does before it serves
    return settings


def test_as_the_quick_start_runs_serve_a_label_on_a_fresh_ticket_stays_over_a_reload_and_in_a_second_tab(
    browser: Any, triage_home: Path
) -> None:
    expect = sync_api.expect
    settings = _quick_start_settings()
    assert settings.history is True  # serve keeps the history by default, as the app does
    with serving(FakeEngine(), settings) as (base, _):
        page = browser.new_page()
        page.goto(base + "/")
        expect(page.locator("#keep")).to_be_checked()
        expect(page.locator("#keys")).to_contain_text("kept in the history as a label")
        page.get_by_label("Paste a ticket").fill("My parcel never arrived.")  # a fresh ticket, no id given
        page.get_by_label("Paste a ticket").press("Control+Enter")
        expect(page.locator("#status")).to_contain_text("scored 5 criteria")
        tid = page.evaluate("state.current.id")
        page.locator("#card-queue").focus()
        page.keyboard.press("Enter")  # the red "label not saved: 422" came here
        expect(page.locator("#status")).to_contain_text("label saved: queue")
        expect(page.locator("#card-queue .answer")).to_have_text("✔ confirmed")
        for shown in (page, browser.new_page()):  # a reload of this tab, and a second tab
            if shown is page:
                page.reload()
            else:
                shown.goto(base + "/")
            item = shown.locator("#history li button", has_text=tid)
            expect(item).to_contain_text("1 label")
            item.click()
            expect(shown.locator("#card-queue .answer")).to_have_text("✔ confirmed")
            shown.close()


def test_a_correction_stays_a_correction_over_a_reply_and_says_its_message(browser: Any, tmp_path: Path) -> None:
    expect = sync_api.expect
    with serving(FakeEngine(), _settings(history=True, history_path=tmp_path / "h.sqlite3")) as (base, _):
        page = browser.new_page()
        page.goto(base + "/")
        _score(page, "I was charged twice this month.", "WEB-C")
        queue = page.locator("#card-queue")
        other = queue.locator(".opt:not(.chosen)").first
        other_id, other_label = other.get_attribute("data-option"), other.locator(".name").get_attribute("title")
        other.click()
        expect(queue.locator(".answer")).to_have_text(f"✔ you: {other_label}")
        page.locator("#card-urgency").focus()
        page.keyboard.press("Enter")
        expect(page.locator("#card-urgency .answer")).to_have_text("✔ confirmed")
        page.get_by_label("Reply").fill("Sorry about that; it is refunded.")
        page.get_by_label("Reply").press("Control+Enter")
        expect(page.locator("#total")).to_contain_text("thread of 2")
        # the queue label given on message 1 is still on the card after the reply, still a correction
        expect(page.locator("#card-queue .answer")).to_have_text(f"✔ you: {other_label} (given on message 1)")
        expect(page.locator("#card-urgency .answer")).to_contain_text("(given on message 1)")
        assert "✔" in page.locator(f'#card-queue .opt[data-option="{other_id}"] .name').inner_text()
        page.reload()  # the history says the same
        page.locator("#history li button", has_text="WEB-C").click()
        expect(page.locator("#card-queue .answer")).to_have_text(f"✔ you: {other_label} (given on message 1)")
        expect(page.locator("#history li button", has_text="WEB-C")).to_contain_text(f"queue={other_id} ✎")
        page.close()


class StarterEngine(FakeEngine):
    """The fake, whose first criterion is decided by a starter head (a decision source new on main)."""

    def _criterion(self, ci: int, pack: Any, ticket: Any, tail_tokens: int) -> CriterionResult:
        c = super()._criterion(ci, pack, ticket, tail_tokens)
        c.source = "starter" if ci == 0 else "calibrated" if ci == 1 else c.source
        return c


def test_the_stand_in_and_starter_notices_and_every_source_are_shown(browser: Any) -> None:
    expect = sync_api.expect
    with serving(StarterEngine(stand_in=True), _settings()) as (base, _):
        page = browser.new_page()
        page.goto(base + "/")
        expect(page.locator("#notices")).to_contain_text(
            "Stand-in model: fake-0.1b is running instead of Qwen3-0.6B, so decisions are less reliable."
        )
        _score(page, "The app crashes on start.", "WEB-S")
        expect(page.locator("#card-queue .source")).to_have_text("decided by: starter")
        expect(page.locator("#cards-note")).to_contain_text("starter head")  # once for the screen
        assert page.locator("#cards article .note").count() == 0  # not the same paragraph on every card
        expect(page.locator("#card-urgency .source")).to_have_text("decided by: calibrated")
        expect(page.locator("#card-sentiment .source")).to_have_text("decided by: zero-shot")
        page.close()
    with serving(FakeEngine(name="qwen3-0.6b", stand_in=False), _settings()) as (base, _):
        page = browser.new_page()
        page.goto(base + "/")
        expect(page.locator("#model")).to_contain_text("qwen3-0.6b")
        assert page.locator("#notices .notice").count() == 0
        page.close()


def test_a_reply_added_on_the_page_rescores_the_thread_under_the_same_id(browser: Any, tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    engine = FakeEngine()
    with serving(engine, _settings(history=True, history_path=path)) as (base, _):
        page = browser.new_page()
        page.goto(base + "/")
        first = "I was charged twice this month."
        _score(page, first, "WEB-T")
        page.get_by_label("Add").select_option("agent")
        page.get_by_label("Reply").fill("Sorry about that; the second charge is refunded today.")
        page.get_by_label("Reply").press("Control+Enter")
        sync_api.expect(page.locator("#thread li")).to_have_count(2)
        sync_api.expect(page.locator("#status")).to_contain_text("scored 5 criteria")
        sync_api.expect(page.locator("#total")).to_contain_text("thread of 2")
        thread = page.evaluate("state.current.result.thread")
        assert thread["messages"] == 2 and thread["previous"] == 1 and thread["reused"] > 0  # only the reply read
        page.get_by_label("Add").select_option("customer")
        page.get_by_label("Reply").fill("Thanks, but when will I see it?")
        page.get_by_label("Reply").press("Control+Enter")
        sync_api.expect(page.locator("#thread li")).to_have_count(3)
        sync_api.expect(page.locator("#total")).to_contain_text("thread of 3")
        page.close()
        assert len(engine.scored) == 3  # the ticket, then the thread twice
    from triage.store.history import History

    with History.open(path) as history:
        [entry] = {e.ticket_row: e for e in history.search("")}.values()  # one ticket, grown
        roles = [m.role for m in history.thread(entry.ticket_row)]
    assert roles == ["customer", "agent", "customer"]


def test_stop_puts_the_cards_in_a_stopped_state(browser: Any) -> None:
    engine = FakeEngine(hold_after=1)  # the first card comes, then the score waits
    with serving(engine, _settings()) as (base, worker):
        page = browser.new_page()
        page.goto(base + "/")
        page.get_by_label("Paste a ticket").fill("Where is my parcel?")
        page.get_by_label("Paste a ticket").press("Control+Enter")
        sync_api.expect(page.locator("#cards article.card:not(.pending)")).to_have_count(1)
        page.get_by_role("button", name="Stop").click()
        stopped = page.locator("#cards article.stopped")
        sync_api.expect(stopped).to_have_count(4)
        for i in range(4):
            sync_api.expect(stopped.nth(i)).to_contain_text("stopped: not scored")
            assert stopped.nth(i).get_attribute("aria-busy") == "false"
        assert page.locator("#cards .wait", has_text="waiting").count() == 0
        sync_api.expect(page.locator("#status")).to_have_text(
            "stopped after 1 of 5 criteria; the others were not scored"
        )  # what the score did before the stop
        page.close()
        engine.gate.set()
        deadline = time.monotonic() + 10
        while worker.stats.cancelled < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert worker.stats.cancelled == 1 and worker.stats.served == 0


class SharedEngine(FakeEngine):
    """The fake, with every criterion but the first read at the shared position: one decode for all, no tail
    of their own (``tail_ms`` 0, ``tail_tokens`` 0), as a shared head's criteria come."""

    def _criterion(self, ci: int, pack: Any, ticket: Any, tail_tokens: int) -> CriterionResult:
        c = super()._criterion(ci, pack, ticket, tail_tokens)
        if ci > 0:
            c.readout, c.tail_ms, c.tail_tokens, c.source = "shared", 0.0, 0, "learned"
        return c


def test_a_shared_decode_is_said_never_as_0_ms_0_tok(browser: Any) -> None:
    with serving(SharedEngine(), _settings()) as (base, _):
        page = browser.new_page()
        page.goto(base + "/")
        _score(page, "The app crashes on start.", "WEB-SH")
        for cid in ("urgency", "sentiment", "needs_approval", "type"):
            sync_api.expect(page.locator(f"#card-{cid} .shared")).to_have_text("shared decode")
        assert page.locator("#card-queue .shared").count() == 0
        html = page.locator("#cards").evaluate("n => n.outerHTML")
        assert "0 ms · 0 tok" not in html and "0 ms, 0 tokens" not in html and "tail 0 ms" not in html
        page.close()


class LongPathEngine(FakeEngine):
    """The fake, installed under a long path (the issue's head file path was 442 px wide on a phone)."""

    def __init__(self) -> None:
        super().__init__()
        self.model_path = Path("/root/.local/share/triage/models/" + "qwen2.5-coder-0.5b-instruct-q8_0" * 3 + ".gguf")


def test_at_390_px_the_page_has_no_horizontal_overflow_and_no_path_in_its_header(browser: Any, tmp_path: Path) -> None:
    path = tmp_path / ("a-long-folder-name" * 6) / "h.sqlite3"
    path.parent.mkdir(parents=True)
    settings = _settings(history=True, history_path=path)
    with serving(StarterEngine(), settings) as (base, _):
        page = browser.new_page()
        page.set_viewport_size({"width": 390, "height": 844})  # a phone
        page.goto(base + "/")
        sync_api.expect(page.locator("#model")).to_contain_text("fake-0.1b")
        assert "/" not in page.locator("#model").inner_text()  # the model's name; paths behind "details"
        page.locator("#server-details summary").click()
        sync_api.expect(page.locator("#server-info")).to_contain_text("a-long-folder-name")
        _score(page, "I was charged twice " * 30, "WEB-PHONE-" + "X" * 60)
        page.locator("#result-details summary").click()
        sync_api.expect(page.locator("#result-info")).to_contain_text("cached")
        wide = page.evaluate(
            """() => [document.documentElement.scrollWidth, window.innerWidth,
                      [...document.querySelectorAll('body *')].filter(n => n.getBoundingClientRect().right >
                        window.innerWidth + 0.5).map(n => n.tagName + '#' + n.id + '.' + n.className).slice(0, 5)]"""
        )
        assert wide[0] <= wide[1] and wide[2] == [], wide
        page.close()


class FitState:
    """What /v1/health says of a starter fit in the background (triage.serve.starter_fit.StarterFit.as_dict)."""

    def __init__(self) -> None:
        self.state = {"state": "fitting", "rows_done": 120, "rows": 475, "rows_per_s": 0.7, "eta_s": 507.0}
        self.state |= {"criteria_done": None, "criteria": 5, "elapsed_s": 171.0, "error": None}

    def as_dict(self) -> dict[str, Any]:
        return dict(self.state)


def test_a_starter_fit_in_the_background_is_said_on_the_page_until_it_is_in(browser: Any) -> None:
    with serving(FakeEngine(), _settings()) as (base, worker):
        fit = FitState()
        worker.starter = fit
        page = browser.new_page()
        page.goto(base + "/")
        notice = page.locator('#notices [data-key="starter-fit"]')
        sync_api.expect(notice).to_have_text(
            "Fitting the starter head: 120 of 475 example tickets read, about 8 min 27 s left at this machine's "
            "0.7 tickets/s; decisions are zero-shot until it is in."
        )
        fit.state |= {"state": "fitting head", "rows_done": 475, "criteria_done": 2, "eta_s": 30.0}
        sync_api.expect(notice).to_contain_text("(2 of 5 criteria, about 30 s left)", timeout=10_000)
        fit.state |= {"state": "done", "eta_s": None}
        sync_api.expect(notice).to_have_count(0, timeout=10_000)  # the head is in: nothing left to say
        page.close()
