"""A server on a free local port in a thread of this process: for the tests and bench/serve_http.py.

``triage serve`` runs the same server (:func:`triage.serve.server.build_server`: uvicorn with the
connection limits) in the main thread; this runs it in a thread, and stops it (and the engine
thread) when the block ends.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from triage.scoring.protocol import ScoringEngine
from triage.serve.app import ServeSettings, create_app
from triage.serve.server import DEFAULT_MAX_CONNECTIONS, Gate, bind, build_server
from triage.serve.worker import DEFAULT_QUEUE_LIMIT, EngineWorker
from triage.session import Session


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(
    engine: ScoringEngine,
    settings: ServeSettings,
    *,
    queue_limit: int = DEFAULT_QUEUE_LIMIT,
    timeout: float = 30.0,
    gate: Gate | None = None,
    chore: Callable[[Callable[[], None]], None] | None = None,
) -> Iterator[tuple[str, EngineWorker]]:
    """Serve ``engine`` (not closed at the end) on a free port of 127.0.0.1; yields the base URL and the worker.

    ``gate`` sets the connection limits (default: those of ``triage serve``); ``chore`` runs on the engine
    thread between requests from the start (:meth:`EngineWorker.run_first`, as a starter fit does).

    Raises:
        RuntimeError: the server did not start within ``timeout`` seconds.
    """
    sock = bind("127.0.0.1", 0)
    settings = replace(settings, port=sock.getsockname()[1], host="127.0.0.1")
    gate = gate or Gate(max_connections=DEFAULT_MAX_CONNECTIONS, body_timeout=settings.body_timeout)
    from triage.learning.fit import FitRequest
    from triage.store.config import load_config

    # the fit policy with no explicit file, and the ``starter`` setting as `triage serve` reads it (config, then
    # TRIAGE_STARTER): a stand-in's shipped starter head applies only where the setting is on
    session = Session(engine, history_path=settings.history_path, request=FitRequest.of(config=load_config()))
    worker = EngineWorker(session, queue_limit=queue_limit, owns_engine=False)
    if chore is not None:
        worker.run_first(chore)
    worker.start()
    server = build_server(create_app(worker, settings), worker, gate, lifespan="off")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="triage-serve-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            worker.stop()
            sock.close()
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{settings.port}", worker
    finally:
        server.should_exit = True
        thread.join(timeout)
        worker.stop()
        sock.close()
