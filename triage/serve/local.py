"""A server on a free local port in a thread of this process: for the tests and bench/serve_http.py.

``triage serve`` runs uvicorn in the main thread; this runs the same app the same way, in a
thread, and stops it (and the engine thread) when the block ends.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from triage.serve.app import ServeSettings, create_app
from triage.serve.worker import DEFAULT_QUEUE_LIMIT, EngineWorker, fit_policy


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(
    engine: Any,
    settings: ServeSettings,
    *,
    queue_limit: int = DEFAULT_QUEUE_LIMIT,
    fits: Any = None,
    timeout: float = 30.0,
) -> Iterator[tuple[str, EngineWorker]]:
    """Serve ``engine`` (not closed at the end) on a free port; yields the base URL and the worker.

    Raises:
        RuntimeError: the server did not start within ``timeout`` seconds.
    """
    import uvicorn

    settings = replace(settings, port=free_port(), host="127.0.0.1")
    worker = EngineWorker(
        engine,
        fits or fit_policy(engine),
        queue_limit=queue_limit,
        history_path=settings.history_path,
        owns_engine=False,
    )
    worker.start()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(worker, settings),
            host="127.0.0.1",
            port=settings.port,
            access_log=False,
            log_level="warning",
            lifespan="off",
        )
    )
    thread = threading.Thread(target=server.run, name="triage-serve-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            worker.stop()
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{settings.port}", worker
    finally:
        server.should_exit = True
        thread.join(timeout)
        worker.stop()
