"""The engine host: one engine, closed only when nobody scores or tokenizes with it."""

from __future__ import annotations

import threading
import time

from fake_engine import FakeEngine

from triage.tui.engine_host import EngineHost


def test_load_waits_for_borrowers_before_closing_the_old_engine() -> None:
    engines = [FakeEngine(name="a"), FakeEngine(name="b")]
    host = EngineHost(lambda requested, notice: engines.pop(0))
    first, _ = host.load(None)
    released = threading.Event()

    def tokenize() -> None:
        with host.borrow() as engine:
            assert engine is first
            released.wait(5)
            assert not first.closed  # still open while borrowed

    reader = threading.Thread(target=tokenize)
    reader.start()
    time.sleep(0.05)
    loader = threading.Thread(target=host.load, args=("b",))
    loader.start()
    time.sleep(0.1)
    assert loader.is_alive() and not first.closed
    released.set()
    loader.join(5)
    reader.join(5)
    assert first.closed and host.engine is not None and host.engine.name == "b"


def test_borrow_without_an_engine_gives_none_and_close_is_safe() -> None:
    host = EngineHost(lambda requested, notice: FakeEngine())
    with host.borrow() as engine:
        assert engine is None
    host.close()
    engine, notices = host.load(None)
    host.close()
    assert engine.closed and host.engine is None and notices == []  # type: ignore[attr-defined]


def test_close_gives_up_when_a_score_holds_the_engine() -> None:
    host = EngineHost(lambda requested, notice: FakeEngine())
    engine, _ = host.load(None)
    with host.lock:
        done = threading.Thread(target=host.close, kwargs={"timeout": 0.1})
        done.start()
        done.join(2)
    assert not engine.closed  # type: ignore[attr-defined]
