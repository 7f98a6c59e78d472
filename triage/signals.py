"""The one signal policy: SIGTERM (what ``timeout``, systemd and docker send) is handled like Ctrl-C.

Both raise :class:`KeyboardInterrupt` in the main thread, so every clean-up path of an
interrupt runs for a termination too: records already written stay whole, a JSON array
is closed, a download's partial files and its pip child are removed. The exit status
says which it was: 130 for SIGINT, 143 for SIGTERM (128 + the signal's number).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_received: list[int] = []
_pending: list[int] = []
_deferring = 0
HANDLED = (signal.SIGINT, signal.SIGTERM)


def _on_signal(signum: int, _frame: object) -> None:
    """Raise KeyboardInterrupt, unless native code is running (:func:`deferred`): then only note it.

    A Python handler runs wherever the main thread next runs Python code, and inside a
    ctypes callback (llama.cpp's abort callback, called during a decode) an exception is
    printed and dropped by ctypes: the interrupt would be lost and the decode would go on.
    """
    _received.append(signum)
    if _deferring:
        _pending.append(signum)
        return
    raise KeyboardInterrupt


def install() -> None:
    """Handle SIGTERM as SIGINT from now on, both deferred inside native code (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGTERM, _on_signal)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_signal)


def pending() -> bool:
    """True when a signal arrived during :func:`deferred` (the abort callback stops the decode on it)."""
    return bool(_pending)


@contextmanager
def deferred() -> Iterator[None]:
    """Run native code that calls back into Python: a signal is noted, then raised when it returns."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        if not _deferring and _pending:
            _pending.clear()
            raise KeyboardInterrupt


def exit_code() -> int:
    """130 after Ctrl-C, 143 after SIGTERM."""
    return 128 + (signal.SIGTERM if signal.SIGTERM in _received else signal.SIGINT)


def word() -> str:
    """``terminated`` after SIGTERM, else ``interrupted``."""
    return "terminated" if signal.SIGTERM in _received else "interrupted"


@contextmanager
def held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back while one record is written: a signal lands after it, never inside.

    A Python-level handler, not a signal mask: llama.cpp's threads may be the ones the
    signal is delivered to, and Python then interrupts the main thread anyway.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    previous = {s: signal.signal(s, lambda signum, _frame: got.append(signum)) for s in HANDLED}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for signum in got:
            handler = previous[signal.Signals(signum)]
            if handler is signal.default_int_handler or handler is _on_signal:
                handler(signum, None)
            if callable(handler):
                handler(s, None)
