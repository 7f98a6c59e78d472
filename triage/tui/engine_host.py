"""The one engine the app runs, behind one lock.

llama.cpp's context is not thread-safe, so everything that touches the engine
(loading, scoring, closing) holds :attr:`EngineHost.lock`. The engine comes
from an injected factory: the real one resolves and loads a GGUF, tests pass
a scripted fake. No Textual here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from triage.scoring.protocol import AppEngine

log = logging.getLogger(__name__)


EngineFactory = Callable[[str | None, Callable[[str], None]], AppEngine]
"""``factory(requested_model, notice) -> engine``; raises TriageError when there is no usable model."""


def default_engine_factory(n_ctx: int | None = None, threads: int | None = None) -> EngineFactory:
    """The real factory: resolve the model like the CLI does and load it (see
    :func:`triage.scoring.loader.load_engine`)."""

    def load(requested: str | None, notice: Callable[[str], None]) -> AppEngine:
        from triage.scoring.loader import load_engine

        return load_engine(requested, n_ctx=n_ctx, threads=threads, notice=notice)

    return load


class EngineHost:
    """Owns the loaded engine.

    Scoring, loading and closing hold :attr:`lock` (one llama.cpp context, one
    user). Token counting only reads the model's vocabulary, so it runs beside
    scoring through :meth:`borrow`, which keeps the engine from being closed
    under it.
    """

    def __init__(self, factory: EngineFactory) -> None:
        self.factory = factory
        self.engine: AppEngine | None = None
        self.lock = threading.Lock()
        self._readers = 0
        self._readers_done = threading.Condition()

    @contextmanager
    def borrow(self) -> Iterator[AppEngine | None]:
        """The current engine (or None) for tokenizing; it stays open until the block ends."""
        with self._readers_done:
            engine = self.engine
            if engine is not None:
                self._readers += 1
        try:
            yield engine
        finally:
            if engine is not None:
                with self._readers_done:
                    self._readers -= 1
                    self._readers_done.notify_all()

    def _retire(self, timeout: float | None = None) -> None:
        """Close the engine once no borrower uses it (call with :attr:`lock` held)."""
        with self._readers_done:
            old, self.engine = self.engine, None
            self._readers_done.wait_for(lambda: self._readers == 0, timeout)
        if old is not None:
            old.close()

    def load(self, requested: str | None) -> tuple[AppEngine, list[str]]:
        """Close the current engine (if any) and load another; returns it and its notices.

        Raises:
            TriageError: from the factory (no model, unknown name, bad file).
        """
        notices: list[str] = []
        with self.lock:
            self._retire()
            engine = self.factory(requested, notices.append)
            with self._readers_done:
                self.engine = engine
            return engine, notices

    def close(self, timeout: float = 3.0) -> None:
        """Free the engine; gives up after ``timeout`` s if a load or score still holds it (the process is ending)."""
        if not self.lock.acquire(timeout=timeout):
            log.warning("engine still busy after %.0f s; not closing it", timeout)
            return
        try:
            self._retire(timeout)
        finally:
            self.lock.release()
