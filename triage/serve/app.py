"""The Starlette app of ``triage serve``: routes, the bearer token, CORS, the event stream, the page.

:func:`create_app` builds it around one :class:`~triage.serve.worker.EngineWorker`; the command
(:mod:`triage.commands.serve`), the tests and bench all use it.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from triage.domain.pack import Pack
from triage.errors import TriageError
from triage.scoring.options import ScoreOptions
from triage.serve.prefill import Prefills
from triage.serve.requests import (
    DEFAULT_MAX_TICKET_BYTES,
    MAX_ID_CHARS,
    Invalid,
    Malformed,
    ScoreRequest,
    TooLarge,
    check_keys,
    parse_label,
    parse_score,
    query_int,
)
from triage.serve.tickets import one_ticket, recent_tickets, record_labels
from triage.serve.worker import TERMINAL, EngineWorker, Job, QueueFull, Stopping, history_error, history_locked

log = logging.getLogger("triage.serve")

LOOPBACK = ("127.0.0.1", "localhost", "::1")
TICKETS_DEFAULT, TICKETS_MAX = 50, 200  # GET /v1/tickets?limit=
STATIC = {  # every file the page needs, by URL path: nothing else is ever read from disk for a request
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
    "/static/icon.svg": ("icon.svg", "image/svg+xml"),
}
_PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def log_safe(value: object, limit: int = 200) -> str:
    """``value`` for a log line: every character that is not printable ASCII escaped (``\\x1b``, ``\\u202e``),
    cut to ``limit`` characters. Nothing from a request reaches a log line any other way."""
    text = str(value)
    cut = len(text) > limit
    out = text[:limit].encode("ascii", "backslashreplace").decode("ascii")
    out = "".join(c if 32 <= ord(c) < 127 else f"\\x{ord(c):02x}" for c in out)
    return out + ("..." if cut else "")


@dataclass
class ServeSettings:
    """How the server answers: its packs, limits, token, CORS origin and history default.

    Attributes:
        packs: the packs requests may name (by ``Pack.name``); the first is the default.
        host, port: where it listens (checked against the ``Host`` header on loopback, against DNS rebinding).
        token: the bearer token every API request needs (None: none, only on loopback).
        allow_origin: the one origin allowed cross-origin requests (None: no CORS headers at all).
        history: keep scored tickets in the history when a request does not say (``--history``).
        history_path: that history file (None: the user data dir's).
    """

    packs: dict[str, Pack]
    host: str = "127.0.0.1"
    port: int = 8787
    token: str | None = None
    allow_origin: str | None = None
    max_ticket_bytes: int = DEFAULT_MAX_TICKET_BYTES
    history: bool = False
    history_path: Path | None = None
    body_timeout: float = 30.0  # seconds a request's body may take to arrive, from its headers (408)

    @property
    def hosts(self) -> frozenset[str]:
        """The ``Host`` headers a loopback server without a token answers (with the port; without it on port
        80, where a browser leaves the default port out)."""
        names = ("127.0.0.1", "localhost", "[::1]")
        return frozenset({f"{h}:{self.port}" for h in names} | (set(names) if self.port == 80 else set()))

    @property
    def default_pack(self) -> Pack:
        return next(iter(self.packs.values()))

    @property
    def max_body_bytes(self) -> int:
        """A body may hold the text JSON-escaped (up to 6 bytes a byte, ``\\u00e9``) and the other fields."""
        return self.max_ticket_bytes * 6 + (16 << 10)


class JSON(JSONResponse):
    """JSON as UTF-8; a string that cannot be UTF-8 (a lone surrogate) is written as a ``\\u`` escape
    instead of failing the response (a 500 from inside the error path)."""

    def render(self, content: object) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def error_body(message: str, field_name: str | None = None, hint: str | None = None) -> dict[str, object]:
    """The one error body: ``{"error": message, "field": name, "hint": what to do}``."""
    body: dict[str, object] = {"error": message}
    if field_name is not None:
        body["field"] = field_name
    if hint:
        body["hint"] = hint
    return body


def error(
    status: int,
    message: str,
    *,
    field_name: str | None = None,
    hint: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """An error response: :func:`error_body` with its status."""
    return JSON(error_body(message, field_name, hint), status_code=status, headers=headers)


class Guard:
    """ASGI middleware: the ``Host`` check, the bearer token, and the access log (escaped).

    The page and its assets need no token (they hold no data; the page asks for the token and
    sends it with every API call); ``/v1/*`` and ``/openapi.json`` do.
    """

    def __init__(self, app: ASGIApp, settings: ServeSettings) -> None:
        self.app = app
        self.settings = settings
        self.hosts = settings.hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = {"code": 0, "complete": False}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                status["complete"] = True
            await send(message)

        refusal = self._refusal(scope)
        failed = False
        try:
            if refusal is not None:
                await refusal(scope, receive, sending)
            else:
                await self.app(scope, receive, sending)
        except Exception:
            failed = True
            raise
        finally:
            client = scope.get("client") or ("-", 0)
            log.info(
                "%s %s %s %d %.1fms",
                log_safe(client[0]),
                log_safe(scope.get("method")),
                log_safe(scope.get("path")),
                # a response that never ended: 499 when its client went away (an event stream), 500 on an error
                status["code"] if status["complete"] else 500 if failed else 499,
                (time.perf_counter() - t0) * 1000,
            )

    def _refusal(self, scope: Scope) -> Response | None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        s = self.settings
        if s.host in LOOPBACK and s.token is None and headers.get("host", "").lower() not in self.hosts:
            return error(
                421,
                "this server answers only requests addressed to it on localhost",
                hint=f"use http://127.0.0.1:{s.port}/",
            )
        path = scope.get("path", "")
        if s.token is None or path in STATIC or scope.get("method") == "OPTIONS":
            return None
        given = headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), s.token.encode()):
            return error(
                401,
                "a bearer token is required" if not given else "the bearer token is wrong",
                hint="send the header Authorization: Bearer <the token given to triage serve --token>",
                headers={"WWW-Authenticate": 'Bearer realm="triage"'},
            )
        return None


class TimedOut(Exception):
    """The body did not arrive within the body timeout (HTTP 408)."""


class ClientGone(Exception):
    """The client closed the connection before its body arrived (logged 499)."""


async def read_json(request: Request, limit: int, timeout: float = 30.0) -> Any:
    """The body as JSON, read at most ``limit`` bytes within ``timeout`` seconds.

    Raises:
        TooLarge: a longer body (said before reading it when the request declares its length).
        Invalid: not ``application/json``, not UTF-8, not JSON (field ``body``).
        Malformed: JSON whose object keys are not Unicode text (a lone surrogate escape).
        TimedOut: the body took longer than ``timeout`` seconds.
        ClientGone: the client went away before the body was read.
    """
    from triage.bounded import Bounded, loads_json

    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        # a browser sends any other type cross-origin without asking first (no preflight)
        raise Invalid(
            "body",
            f"the body must be sent as application/json, not {kind or 'no type'}",
            hint="add the header Content-Type: application/json",
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"the body is {int(declared):,} bytes; this server reads at most {limit:,}")
    chunks = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise TooLarge(f"the body is over {limit:,} bytes, the most this server reads")
                chunks.append(chunk)
    except TimeoutError:
        raise TimedOut(f"the body did not arrive within {timeout:g} s ({size:,} bytes came)") from None
    except ClientDisconnect:
        raise ClientGone() from None
    try:
        text = b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid("body", "the body is not UTF-8 text") from None
    del chunks
    try:
        body = loads_json(text)
    except Bounded as exc:
        raise Invalid("body", f"the body is not usable JSON: {exc}") from None
    except ValueError as exc:
        raise Invalid("body", f"the body is not JSON: {exc}") from None
    check_keys(body)
    return body


def body_error(exc: Exception) -> Response:
    """The answer to a body that could not be read or used (413, 400, 422, 408, 499)."""
    if isinstance(exc, TooLarge):
        return error(413, exc.message, hint="send a shorter ticket (a ticket is cut to the context anyway)")
    if isinstance(exc, Malformed):
        return error(400, exc.message, field_name="body", hint=exc.hint)
    if isinstance(exc, Invalid):
        return error(422, exc.message, field_name=exc.field, hint=exc.hint)
    if isinstance(exc, TimedOut):
        return error(
            408, str(exc), hint="send the whole request at once", headers={"Connection": "close"}
        )  # the rest of a late body is never read: the connection closes
    return error(499, "the client went away")


BODY_ERRORS = (TooLarge, Malformed, Invalid, TimedOut, ClientGone)


def prepare(req: ScoreRequest, settings: ServeSettings, loop: asyncio.AbstractEventLoop) -> Job:
    """The job of a checked request: its pack, its options (``ScoreOptions()``, as `triage score`) and its ticket.

    Raises:
        Invalid: an unknown pack or criterion, a ticket with nothing to score.
    """
    from triage.domain.ticket import make_ticket
    from triage.errors import InputError
    from triage.scoring.options import parse_criteria

    if req.pack is None:
        pack = settings.default_pack
    elif req.pack in settings.packs:
        pack = settings.packs[req.pack]
    else:
        raise Invalid(
            "pack",
            f"no pack named {req.pack!r} on this server",
            hint=f"its packs: {', '.join(settings.packs)} (start it with --pack FILE for more)",
        )
    try:
        criteria = parse_criteria(",".join(req.criteria), pack, "criteria") if req.criteria is not None else None
    except TriageError as exc:
        raise Invalid("criteria", exc.message, hint=exc.hint) from None
    options = ScoreOptions(criteria=criteria)
    try:
        ticket = make_ticket(req.text, req.id, req.messages)
    except InputError as exc:
        raise Invalid("text" if req.messages is None else "messages", exc.message) from None
    keep = settings.history if req.history is None else req.history
    return Job(ticket, pack, options, keep, loop)


def sse(kind: str, data: object) -> bytes:
    """One server-sent event: ``event: kind`` and its JSON ``data`` on one line."""
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode("utf-8")


def _failure(data: dict[str, Any]) -> JSONResponse:
    status = int(data.get("status", 500))
    headers = {"Retry-After": "5"} if status == 503 else None
    return error(status, str(data.get("error")), hint=data.get("hint"), headers=headers)


class JSONErrorCORS(CORSMiddleware):
    """Starlette's CORS middleware, with a refused preflight answered as the one JSON error."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        what = bytes(response.body).decode("utf-8", "replace").removeprefix("Disallowed CORS ")
        refused = error(
            response.status_code,
            f"this cross-origin request is not allowed ({what})",
            hint="only the origin given to --allow-origin may call this server, with GET or POST and the "
            "Authorization and Content-Type headers",
        )
        for key in ("vary",):
            if key in response.headers:
                refused.headers[key] = response.headers[key]
        return refused


def create_app(worker: EngineWorker, settings: ServeSettings) -> Starlette:
    """The app: ``POST /v1/score``, ``POST /v1/prefill``, ``POST /v1/label``, ``GET /v1/health``,
    ``GET /openapi.json``, the page."""
    from triage.serve.openapi import openapi

    static_dir = resources.files("triage.serve") / "static"
    assets = {path: ((static_dir / name).read_bytes(), kind) for path, (name, kind) in STATIC.items()}

    async def page(request: Request) -> Response:
        body, kind = assets[request.url.path]
        headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
        if kind.startswith("text/html"):
            headers["Content-Security-Policy"] = _PAGE_CSP
        return Response(body, media_type=kind, headers=headers)

    async def score(request: Request) -> Response:
        try:
            req = parse_score(
                await read_json(request, settings.max_body_bytes, settings.body_timeout),
                max_ticket_bytes=settings.max_ticket_bytes,
            )
            job = prepare(req, settings, asyncio.get_running_loop())
        except BODY_ERRORS as exc:
            return body_error(exc)
        del req  # a waiting request holds its ticket once, in the job (docs/serve.md: memory per waiting request)
        try:
            ahead = worker.submit(job)
        except Stopping:
            return error(
                503,
                "the server is stopping; this request was not scored",
                hint="send it again once triage serve runs again",
                headers={"Retry-After": "5"},
            )
        except QueueFull as exc:
            return error(
                503,
                f"the queue is full: {exc}",
                hint=f"retry in {exc.retry_after} s",
                headers={"Retry-After": str(exc.retry_after)},
            )
        if "text/event-stream" in request.headers.get("accept", ""):
            return StreamingResponse(
                _stream(job, ahead),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        return await _answer(job, request)

    async def _stream(job: Job, ahead: int) -> AsyncIterator[bytes]:
        try:
            yield sse("queued", {"ticket_id": job.ticket.id, "ahead": ahead})
            while True:
                kind, data = await job.events.get()
                yield sse(kind, data)
                if kind in TERMINAL:
                    return
        finally:  # the client went away (the stream is cancelled), or the result is out
            if not job.finished:
                job.cancel()

    async def _answer(job: Job, request: Request) -> Response:
        try:
            while True:
                try:
                    kind, data = await asyncio.wait_for(job.events.get(), 0.2)
                except TimeoutError:
                    if await request.is_disconnected():
                        job.cancel()
                        return error(499, "the client went away")
                    continue
                if kind == "result":
                    return JSON(data)
                if kind == "error":
                    return _failure(data)
        finally:
            if not job.finished:
                job.cancel()

    prefills = Prefills()

    async def prefill(request: Request) -> Response:
        """``POST /v1/prefill`` (:mod:`triage.serve.prefill`): a score request's body, its ticket read ahead."""
        try:
            req = parse_score(
                await read_json(request, settings.max_body_bytes, settings.body_timeout),
                max_ticket_bytes=settings.max_ticket_bytes,
            )
            job = prefills.take(prepare(req, settings, asyncio.get_running_loop()))
        except BODY_ERRORS as exc:
            return body_error(exc)
        del req
        try:
            worker.submit(job)
        except Stopping:
            return error(503, "the server is stopping", headers={"Retry-After": "5"})
        except QueueFull as exc:
            return error(
                503,
                f"the queue is full: {exc}",
                hint=f"retry in {exc.retry_after} s",
                headers={"Retry-After": str(exc.retry_after)},
            )
        answer = await _answer(job, request)
        if job.reason == "superseded" and not job.started:
            return error(409, "a newer prefill replaced this one before it began", hint="nothing to do: it is moot")
        return answer

    async def label(request: Request) -> Response:
        from starlette.concurrency import run_in_threadpool

        try:
            req = parse_label(await read_json(request, 64 << 10, settings.body_timeout))
        except BODY_ERRORS as exc:
            return body_error(exc)
        try:
            stored = await run_in_threadpool(record_labels, settings.history_path, req.id, req.labels)
        except Invalid as exc:
            return error(422, exc.message, field_name=exc.field, hint=exc.hint)
        except (TriageError, sqlite3.OperationalError) as exc:
            if isinstance(exc, sqlite3.OperationalError) and not history_locked(exc):
                raise
            e = history_error(exc)
            return error(409, e["error"], hint=e["hint"])
        return JSON({"ticket_id": req.id, "stored": stored})

    async def tickets(request: Request) -> Response:
        from starlette.concurrency import run_in_threadpool

        from triage.serve.listing import summarise_listing

        try:
            limit = query_int(request.query_params, "limit", TICKETS_DEFAULT, 1, TICKETS_MAX)
        except Invalid as exc:
            return error(422, exc.message, field_name=exc.field)
        unknown = sorted(set(request.query_params) - {"limit"})
        if unknown:
            return error(422, f"unknown parameter {log_safe(unknown[0], 40)!r}", field_name=unknown[0][:40])
        try:
            listed = await run_in_threadpool(recent_tickets, settings.history_path, limit)
        except (TriageError, sqlite3.OperationalError) as exc:
            if isinstance(exc, sqlite3.OperationalError) and not history_locked(exc):
                raise
            e = history_error(exc)
            return error(409, e["error"], hint=e["hint"])
        return JSON(summarise_listing(listed))

    async def ticket(request: Request) -> Response:
        from starlette.concurrency import run_in_threadpool

        ticket_id = request.path_params["ticket_id"]
        if request.query_params:
            name = sorted(request.query_params)[0]
            return error(422, f"unknown parameter {log_safe(name, 40)!r}", field_name=name[:40])
        if not ticket_id.strip() or len(ticket_id) > MAX_ID_CHARS:
            return error(422, f"a ticket id is 1 to {MAX_ID_CHARS} characters", field_name="id")
        try:
            found = await run_in_threadpool(one_ticket, settings.history_path, ticket_id)
        except Invalid as exc:
            return error(404, exc.message, field_name=exc.field, hint=exc.hint)
        except (TriageError, sqlite3.OperationalError) as exc:
            if isinstance(exc, sqlite3.OperationalError) and not history_locked(exc):
                raise
            e = history_error(exc)
            return error(409, e["error"], hint=e["hint"])
        return JSON(found)

    async def health(request: Request) -> Response:
        return JSON(health_of(worker, settings))

    async def schema(request: Request) -> Response:
        return JSON(openapi(settings))

    routes = [Route(path, page, methods=["GET"]) for path in STATIC]
    routes += [
        Route("/v1/score", score, methods=["POST"]),
        Route("/v1/prefill", prefill, methods=["POST"]),
        Route("/v1/label", label, methods=["POST"]),
        Route("/v1/tickets", tickets, methods=["GET"]),
        Route("/v1/tickets/{ticket_id:path}", ticket, methods=["GET"]),
        Route("/v1/health", health, methods=["GET"]),
        Route("/openapi.json", schema, methods=["GET"]),
    ]
    middleware = []
    if settings.allow_origin:
        middleware.append(
            Middleware(
                JSONErrorCORS,
                allow_origins=[settings.allow_origin],
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type"],
                max_age=600,
            )
        )
    middleware.append(Middleware(Guard, settings=settings))

    async def bad_request(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", log_safe(request.method), log_safe(request.url.path))
        return error(500, "internal error; see the server's log")

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return error(404, "no such route", hint="GET /openapi.json lists the routes of this server")
        if exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            return error(
                405,
                f"{log_safe(request.method, 20)} is not allowed on {log_safe(request.url.path, 80)}",
                hint=f"use {allowed}" if allowed else None,
                headers={"Allow": allowed} if allowed else None,
            )
        return error(exc.status_code, str(exc.detail), headers=exc.headers)

    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: http_error, Exception: bad_request},
    )


def health_of(worker: EngineWorker, settings: ServeSettings) -> dict[str, object]:
    """``GET /v1/health``: the model, the packs, what decides (head, calibration), the hit rate, the queue, and
    how far a starter head's fit in the background is (``starter``)."""
    engine = worker.engine
    fits = worker.session.fits(settings.default_pack, ScoreOptions())
    return {
        "status": "ok",
        "model": engine.model_info,
        "n_ctx": engine.n_ctx,
        "packs": [
            {
                "name": p.name,
                "version": p.version,
                "hash": p.hash,
                "default": i == 0,
                "criteria": [c.id for c in p.criteria],
            }
            for i, p in enumerate(settings.packs.values())
        ],
        "head": fits.head_path,
        "calibration": fits.calibration_path,
        "fit_notes": [n.text for n in fits.notes],
        "queue": {"waiting": worker.waiting, "running": int(worker.busy), "limit": worker.queue_limit},
        "history": {"default": settings.history, "path": str(settings.history_path) if settings.history_path else None},
        # the starter head fitted in the background on a first start (triage.serve.starter_fit); None: no fit ran
        "starter": worker.starter.as_dict() if worker.starter is not None else None,
        "max_ticket_bytes": settings.max_ticket_bytes,
        **worker.stats.as_dict(),
    }
