"""The HTTP server of ``triage serve``: uvicorn, with the connection limits it lacks, and a shutdown that
answers every request.

uvicorn times out only idle keep-alive connections: a client that sends half a request line, or
headers without their end, holds its connection (a file descriptor) for ever. A thousand of them
used up the descriptors; ``accept()`` then failed in a loop (a traceback each time on stderr) and
an authorised request could not get in. So :class:`GuardedH11` (uvicorn's h11 protocol) adds:

* a **header timeout**: a request's headers must arrive within ``header_timeout`` seconds of the
  connection opening (or of the previous answer on it); else ``408`` (the JSON error) and close;
* a **body timeout**: the body must arrive within ``body_timeout`` seconds of the headers (the app
  answers 408 itself when it reads the body; this closes a connection that keeps dripping after);
* a **cap on open connections**, below the process's descriptor limit whatever that is: at the
  cap, the connection that has waited longest without a whole request is closed to make room
  (``503``, the JSON error), so half-sent requests can never keep a whole one out; when every
  connection carries a whole request, the new one is answered 503 and closed.

What it closes is counted and said in one log line at most every 10 seconds, never once per
connection. :class:`TriageServer` stops the engine worker first on SIGTERM or Ctrl-C (waiting
requests are answered 503 at once, the running score stops inside its decode), then closes
connections that hold no whole request, then lets uvicorn finish. This module is the only one
that knows uvicorn's protocol internals (uvicorn 0.30 and later).
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import resource
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypedDict, Unpack

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from triage.serve.limits import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from triage.serve.worker import EngineWorker

log = logging.getLogger("triage.serve")

RESERVED_FDS = 48  # for the rest of the process: 15 when idle (stdio, the loop, the log, the history's 3), the model,
# the history opened again by a label or tickets request
# asyncio accepts up to its backlog argument in one go, and a connection is admitted (or a victim's descriptor
# freed) only a few loop iterations after its accept: about four batches are in flight at once, budgeted as five.
ACCEPT_BATCH = 16
IN_FLIGHT = 5 * ACCEPT_BATCH
LISTEN_BACKLOG = 1024  # the kernel's queue of connections not yet accepted (they hold no descriptor of ours)
LINGER_MAX = 16  # connections closed with an answer that are kept open a moment, so the answer is read (not reset)
LINGER_S = 2.0
SWEEP_S = 0.25
SUMMARY_EVERY_S = 10.0


def descriptor_limit() -> int:
    """The process's soft limit on open file descriptors (RLIMIT_NOFILE)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def connection_cap(requested: int, limit: int | None = None) -> int:
    """The most connections to hold open: ``requested``, lowered so that they, the descriptors the rest of the
    process needs and a burst of accepts always fit under the descriptor limit.

    Raises:
        ValueError: the limit leaves fewer than 8 connections (the message says how to raise it).
    """
    limit = descriptor_limit() if limit is None else limit
    room = limit - RESERVED_FDS - IN_FLIGHT - LINGER_MAX
    if room < 8:
        raise ValueError(
            f"the descriptor limit ({limit}) leaves room for {max(room, 0)} connections; "
            f"raise it (ulimit -n {RESERVED_FDS + IN_FLIGHT + LINGER_MAX + 64} or more)"
        )
    return min(requested, room)


def json_error_response(status: int, reason: str, body: dict[str, object]) -> bytes:
    """A whole HTTP/1.1 response with the JSON error ``body``, closing the connection."""
    data = json.dumps(body, ensure_ascii=True).encode("ascii")
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + data


@dataclass
class Gate:
    """The limits all connections of one server share, and what they closed (for the summary line)."""

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    open: dict[GuardedH11, None] = field(default_factory=dict)  # insertion order: oldest first
    lingering: set[GuardedH11] = field(default_factory=set)
    timed_out: int = 0
    evicted: int = 0
    refused: int = 0
    peak: int = 0
    _said: tuple[int, int, int] = (0, 0, 0)
    _sweeping: asyncio.TimerHandle | None = None
    _last_summary: float = 0.0

    def admit(self, conn: GuardedH11) -> bool:
        """Make room for ``conn`` (closing the longest-waiting connection without a whole request);
        False when there is none to close: ``conn`` is refused."""
        if len(self.open) >= self.max_connections:
            victim = min((c for c in self.open if c.incomplete), key=lambda c: c.since, default=None)
            if victim is None:
                self.refused += 1
                return False
            self.evicted += 1
            victim.close_with(
                503 if victim.owes_answer else 0,
                "Service Unavailable",
                "this connection sent no whole request, and the server was at its limit of open connections",
                "send the whole request at once",
            )
        self.open[conn] = None
        self.peak = max(self.peak, len(self.open))
        self._arm(conn.loop)
        return True

    def forget(self, conn: GuardedH11) -> None:
        self.open.pop(conn, None)

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._sweeping is None:
            self._sweeping = loop.call_later(SWEEP_S, self._sweep, loop)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        self._sweeping = None
        now = time.monotonic()
        for conn in list(self.open):
            conn.check_deadline(now)
        self.summarise(now)
        if self.open:
            self._arm(loop)

    def summarise(self, now: float, *, final: bool = False) -> None:
        """One log line saying what was closed since the last one; at most every 10 s (and at the end)."""
        counts = (self.timed_out, self.evicted, self.refused)
        if counts == self._said or (not final and now - self._last_summary < SUMMARY_EVERY_S):
            return
        t, e, r = (a - b for a, b in zip(counts, self._said, strict=True))
        self._said, self._last_summary = counts, now
        parts = []
        if t:
            parts.append(f"{t} that sent no whole request in time (408)")
        if e:
            parts.append(f"{e} without a whole request, to make room (503)")
        if r:
            parts.append(f"{r} new ones while every connection carried a request (503)")
        log.warning(
            "closed %s; at most %d connections are held open (peak %d)",
            "; ".join(parts),
            self.max_connections,
            self.peak,
        )

    def close_incomplete(self) -> None:
        """At shutdown: close every connection that holds no whole request (nothing to answer on it)."""
        for conn in list(self.open):
            if conn.incomplete:
                status = 503 if conn.owes_answer else 0
                conn.close_with(status, "Service Unavailable", "the server is stopping", "send it again later")


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a header timeout, a body deadline and the connection cap of :class:`Gate`.

    ``gate`` is set on a subclass per server (:func:`protocol_for`).
    """

    gate: Gate

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, object],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.since = time.monotonic()  # when the current phase began
        self.received = 0  # bytes of the request not yet whole
        self.phase = "head"  # head: waiting for (the rest of) the headers; body; busy: a whole request
        self.lingering = False
        self.answered_one = False  # a response went out on it: with nothing since, it is an idle keep-alive
        self._cycle_seen: object = None

    @property
    def owes_answer(self) -> bool:
        """Whether closing it needs an answer: all but an idle keep-alive connection. A new connection that
        sent nothing yet may have bytes in the kernel not yet read: closed bare, the kernel would reset it
        and the client would see no answer at all."""
        return self.received > 0 or self.phase == "body" or not self.answered_one

    @property
    def incomplete(self) -> bool:
        """Whether this connection holds no whole request (nothing the app must still answer)."""
        return self.phase != "busy" and not self.transport.is_closing()

    # -- uvicorn's protocol interface ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.gate.admit(self):
            self.close_with(
                503,
                "Service Unavailable",
                f"the server holds {self.gate.max_connections} connections, each with a request in progress",
                "retry in a few seconds",
            )

    def connection_lost(self, exc: Exception | None) -> None:
        self.gate.forget(self)
        self.gate.lingering.discard(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.lingering:  # answered and closing: the rest of what it sends is not read
            return
        if self.phase != "busy":
            self.received += len(data)
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        self.answered_one = True
        super().on_response_complete()
        if self.cycle is self._cycle_seen and not self.transport.is_closing():  # no pipelined request started
            self.phase, self.since, self.received = "head", time.monotonic(), 0
        self._follow()

    def send_400_response(self, msg: str) -> None:
        """A request h11 cannot parse: the JSON error, not uvicorn's plain text."""
        self.close_with(400, "Bad Request", f"this is not a valid HTTP/1.1 request ({msg.rstrip('.')})", None)

    # -- the deadlines ------------------------------------------------------------------------------
    def _follow(self) -> None:
        """Move to the phase the h11 state says: a new request's headers arrived; its body is whole."""
        cycle = self.cycle
        if cycle is not None and cycle is not self._cycle_seen:
            self._cycle_seen = cycle
            self.phase, self.since = "body", time.monotonic()
        if self.phase == "body" and cycle is not None and not cycle.more_body:
            self.phase = "busy"

    def check_deadline(self, now: float) -> None:
        if self.transport.is_closing():
            return
        if self.phase == "head" and now - self.since > self.gate.header_timeout:
            if self.received:
                self.gate.timed_out += 1
                self.close_with(
                    408,
                    "Request Timeout",
                    f"the request's headers did not arrive within {self.gate.header_timeout:g} s",
                    "send the whole request at once",
                )
            else:  # an idle connection (opened ahead, or kept alive): nothing to answer
                self.close_with(0, "", "", None)
        elif self.phase == "body" and now - self.since > self.gate.body_timeout + 2.0:
            # the app answers 408 when its read times out; this closes one that keeps sending after that
            self.gate.timed_out += 1
            self.close_with(
                408,
                "Request Timeout",
                f"the request's body did not arrive within {self.gate.body_timeout:g} s",
                "send the whole request at once",
            )

    def close_with(self, status: int, reason: str, message: str, hint: str | None) -> None:
        """Answer ``status`` with the JSON error (unless a response has begun, or ``status`` is 0) and close.
        A request the app is reading sees the client as gone.

        An answered connection is half-closed and kept a moment (at most :data:`LINGER_MAX` at once, for
        :data:`LINGER_S`), reading and dropping what the client still sends: closed at once with unread
        bytes, the kernel would reset it and the client could lose the answer."""
        if self.transport.is_closing() or self.lingering:
            return
        cycle = self.cycle
        answering = cycle is not None and not cycle.response_complete and self.phase != "head"
        answered = False
        if status and not (answering and cycle.response_started):
            body: dict[str, object] = {"error": message}
            if hint:
                body["hint"] = hint
            try:
                self.transport.write(json_error_response(status, reason, body))
                answered = True
            except (OSError, RuntimeError):
                pass
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app's next receive() says http.disconnect; its send() is dropped
            cycle.message_event.set()
        self.gate.forget(self)
        if answered and len(self.gate.lingering) < LINGER_MAX and self.transport.can_write_eof():
            try:
                self.transport.write_eof()  # the answer, then FIN; the client's own close ends it sooner
            except OSError:  # the client is gone already (ENOTCONN): nothing to linger for
                self.transport.close()
                return
            self.lingering = True
            self.gate.lingering.add(self)
            self.loop.call_later(LINGER_S, self.transport.close)
        else:
            self.transport.close()


def protocol_for(gate: Gate) -> type[GuardedH11]:
    """A :class:`GuardedH11` class bound to ``gate`` (uvicorn builds one instance per connection)."""
    return type("GuardedH11", (GuardedH11,), {"gate": gate})


class TriageServer(uvicorn.Server):
    """uvicorn's server; on shutdown the worker stops first, so every request gets its JSON answer."""

    def __init__(
        self, config: uvicorn.Config, worker: EngineWorker, gate: Gate, on_started: Callable[[], None] | None = None
    ) -> None:
        super().__init__(config)
        self.worker = worker
        self.gate = gate
        self.on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        for sock in sockets or []:  # asyncio listened with ACCEPT_BATCH, its batch size: the kernel may queue more
            sock.listen(LISTEN_BACKLOG)
        if self.started and self.on_started is not None:
            self.on_started()  # "serving" is said once connections are accepted, not before

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in getattr(self, "servers", []):
            server.close()  # no new connection while the queue is answered
        # the waiting requests are answered 503 now; the running score stops inside its decode
        await asyncio.get_running_loop().run_in_executor(None, self.worker.shutdown)
        self.gate.close_incomplete()
        self.gate.summarise(time.monotonic(), final=True)
        await super().shutdown(sockets)


class _OncePerMinute(logging.Filter):
    """Lets asyncio's "socket.accept() out of system resource" through once a minute, without its traceback.

    The cap keeps the server's own connections under the descriptor limit, but descriptors are the
    process's: should they run out anyway, asyncio would log a traceback for every failed accept."""

    def __init__(self) -> None:
        super().__init__()
        self.last = -60.0

    def filter(self, record: logging.LogRecord) -> bool:
        if "out of system resource" not in str(record.msg):
            return True
        now = time.monotonic()
        if now - self.last < 60.0:
            return False
        self.last = now
        record.exc_info, record.exc_text = None, None
        record.msg = f"{record.msg}: the process is out of file descriptors; raise ulimit -n or lower --max-connections"
        return True


def quiet_accept_errors() -> None:
    """Install :class:`_OncePerMinute` on asyncio's logger (once)."""
    logger = logging.getLogger("asyncio")
    if not any(isinstance(f, _OncePerMinute) for f in logger.filters):
        logger.addFilter(_OncePerMinute())


class ServerConfig(TypedDict, total=False):
    """The uvicorn settings :func:`build_server` sets (``uvicorn.Config``'s keywords of the same names)."""

    access_log: bool
    log_level: str
    server_header: bool
    timeout_graceful_shutdown: int
    loop: str
    http: type[GuardedH11]
    backlog: int
    timeout_keep_alive: int
    lifespan: Literal["auto", "on", "off"]


def build_server(
    app: Starlette,
    worker: EngineWorker,
    gate: Gate,
    on_started: Callable[[], None] | None = None,
    **config: Unpack[ServerConfig],
) -> TriageServer:
    """The server of ``app``, to run on a socket from :func:`bind` (``server.run(sockets=[sock])``).

    uvicorn's own access log is off (the app logs each request, escaped); the protocol is
    :class:`GuardedH11` bound to ``gate``; ``on_started()`` is called once it accepts connections;
    ``config`` overrides any uvicorn setting."""
    quiet_accept_errors()
    settings = ServerConfig(
        access_log=False,
        log_level="warning",
        server_header=False,
        timeout_graceful_shutdown=5,
        loop="asyncio",
        http=protocol_for(gate),
        backlog=ACCEPT_BATCH,
        timeout_keep_alive=5,
    )
    settings.update(config)
    return TriageServer(uvicorn.Config(app, **settings), worker, gate, on_started)


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (not yet listening), before anything says "serving".

    Raises:
        OSError: the port is in use, or may not be used, or the address is not this machine's; with
            ``strerror`` saying which in words.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio does: a TIME_WAIT is no conflict
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        words = {
            errno.EADDRINUSE: f"port {port} is in use on {host} (another triage serve, or another program)",
            errno.EACCES: f"port {port} may not be used by this user (ports below 1024 need privileges)",
            errno.EADDRNOTAVAIL: f"{host} is not an address of this machine",
        }.get(exc.errno or 0, f"cannot listen on {host}:{port}: {exc.strerror or exc}")
        raise OSError(exc.errno, words) from None
    except BaseException:
        sock.close()
        raise
    return sock
