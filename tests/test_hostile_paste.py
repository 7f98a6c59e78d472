"""Class 5 of the hardening issue (23): pasted bytes never act as keys and never reach the ticket raw.

A terminal frames a paste as ``ESC [200~ ... ESC [201~``. The bytes in between go through
:class:`triage.tui.terminal_input.PasteSafeParser` (the app's input parser on Linux) and
arrive as one Paste event; the ticket box cleans it. These tests feed raw terminal bytes
through the parser the app uses and deliver its events to the real app (pilot), so both
layers are covered: Textual's own parser typed escape sequences inside a paste in as
keys (out of order, ``^[`` left in) and let control bytes act as keys.
"""

from __future__ import annotations

import random

import pytest
from fake_engine import fake_app, wait_until
from textual import events

from triage.domain.ticket import clean_text
from triage.tui.terminal_input import PASTE_END, PASTE_START, PasteSafeDriver, PasteSafeParser

ANSI_LOG = (
    "\x1b[2m2024-05-01 10:00:01\x1b[0m \x1b[32mINFO\x1b[0m  service started\n"
    "\x1b[2m2024-05-01 10:00:02\x1b[0m \x1b[1;31mERROR\x1b[0m disk \x1b[4mfull\x1b[24m on /var\n"
    "\x1b[38;5;208mWARN\x1b[39m  retrying \x1b]8;;http://x\x07link\x1b]8;;\x07 now\n"
)


def random_bytes(n: int, seed: int = 7) -> str:
    """``n`` random bytes as a terminal's UTF-8 decoder passes them on (never the end marker)."""
    raw = bytes(random.Random(seed).getrandbits(8) for _ in range(n))
    return raw.decode("utf-8", "replace").replace(PASTE_END, "")


def parse(raw: str, chunk: int = 4096) -> list[object]:
    """Feed ``raw`` as the driver does, in reads of ``chunk`` characters, and collect the events."""
    parser = PasteSafeParser()
    out: list[object] = []
    for i in range(0, len(raw), chunk):
        out += parser.feed(raw[i : i + chunk])
    return out


@pytest.mark.parametrize("chunk", [4096, 7, 1])
@pytest.mark.parametrize(
    "content",
    [ANSI_LOG, "quit now\x11\x03\x1c\x1a\x1bq\x1b\x1b[A\x1b[1;5C", random_bytes(20_000)],
    ids=["ansi-log", "control-keys", "random-20k"],
)
def test_a_bracketed_paste_is_one_paste_event_with_every_byte(content: str, chunk: int) -> None:
    got = parse(f"ab{PASTE_START}{content}{PASTE_END}cd", chunk)
    pastes = [e for e in got if isinstance(e, events.Paste)]
    keys = [e.character for e in got if isinstance(e, events.Key)]
    assert [p.text for p in pastes] == [content.replace("\x00", "")]
    assert keys == ["a", "b", "c", "d"]  # typed around the paste: keys, in order


def test_an_escape_key_press_still_arrives() -> None:
    import time

    parser = PasteSafeParser()
    assert not list(parser.feed("\x1b"))  # could be the start of a paste marker: held a moment
    deadline = time.monotonic() + 2
    keys: list[str] = []
    while not keys and time.monotonic() < deadline:
        keys = [e.key for e in parser.tick() if isinstance(e, events.Key)]
        time.sleep(0.02)
    assert keys == ["escape"]


def test_the_app_reads_its_terminal_with_the_paste_safe_parser() -> None:
    app = fake_app()
    assert PasteSafeDriver is not None and app.get_driver_class() is PasteSafeDriver


async def deliver(raw: str) -> tuple[str, bool]:
    """Raw terminal bytes through the app's parser into the running app: (ticket text, still running)."""
    app = fake_app()
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model to load")
        app.main.ticket.focus()
        for event in parse(raw, 1024):
            app.post_message(event)
        await pilot.pause(0.3)
        return app.main.ticket.ticket_text, app.is_running


@pytest.mark.parametrize(
    "content",
    [ANSI_LOG, "refund\x11 me\x03 now\x1b\x1b[A", random_bytes(20_000)],
    ids=["ansi-log", "control-keys", "random-20k"],
)
async def test_pasted_bytes_reach_the_ticket_cleaned_and_never_act_as_keys(content: str) -> None:
    text, running = await deliver(PASTE_START + content + PASTE_END)
    assert running, "a pasted byte acted as a key and ended the app"
    assert text == clean_text(content)
    assert "\x1b" not in text and not any(ord(c) < 32 and c not in "\n\t" for c in text)


async def test_ansi_coloured_log_keeps_its_words_in_order() -> None:
    text, _running = await deliver(PASTE_START + ANSI_LOG + PASTE_END)
    assert text.splitlines() == [
        "2024-05-01 10:00:01 INFO  service started",
        "2024-05-01 10:00:02 ERROR disk full on /var",
        "WARN  retrying link now",
    ]


async def test_a_ticket_with_no_visible_characters_is_refused_in_the_app() -> None:
    app = fake_app()
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model to load")
        app.main.ticket.focus()
        app.post_message(events.Paste("\u200b\u2800 \u3164\u200d"))
        await pilot.pause(0.2)
        await pilot.press("f5")
        await wait_until(
            pilot, lambda: any("no visible characters" in n.message for n in app._notifications), what="the refusal"
        )
        assert app.main.result is None and app.is_running
