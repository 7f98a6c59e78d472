"""``triage serve``: a local HTTP API and a web page on one resident engine (docs/serve.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from triage.errors import InputError
from triage.settings import SETTINGS

if TYPE_CHECKING:
    from triage.domain.pack import Pack
    from triage.serve.app import ServeSettings

NAME = "serve"
ORDER = 15
HELP = "serve the engine over a local HTTP API, with a web page of live decisions"
DESCRIPTION = """\
Load the model once and answer HTTP requests on it, one ticket at a time, first
come first served (docs/serve.md):

  POST /v1/score    {"id", "text"} and optional "pack", "criteria", "history":
                    the triage.result/3 JSON `triage score` prints; with Accept:
                    text/event-stream, events queued, prefilled, one criterion
                    per criterion, result
  POST /v1/prefill  a /v1/score body: its ticket read ahead of its score (the page
                    does so as the agent types); what it computed, as JSON
  POST /v1/label    {"id", "labels": {criterion: option}}: as `triage label` does
  GET  /v1/tickets  the history's newest tickets, each with its latest result and labels
                    (long threads summarised, long texts cut: a bounded answer)
  GET  /v1/tickets/ID  one ticket of the history whole
  GET  /v1/health   model, packs, head and calibration, hit rate, queue, and
                    how far a starter head's fit is (below)
  GET  /openapi.json
  GET  /            a web page: paste a ticket, watch the cards fill in, answer them

Scored tickets are kept in the history, as the app keeps them, so the page's
answers are kept as labels and a reload or a second tab shows them again;
--no-history keeps none (the page then offers no labels and says why).

On a model's first start with the built-in pack (no starter head yet) it
serves at once, zero-shot, and fits the starter head between requests: one
line says so, then the rows' progress with the time left; decisions say
"starter" from the request after it is in.

Every request is scored as `triage score` scores (options read by name, all
tails in one batch), and the stored head and calibration are chosen by the
same policy, so the numbers are those `triage score` prints.

Safe by default: it listens on 127.0.0.1 only. Any other --host needs a token,
from TRIAGE_SERVE_TOKEN or --token-file PATH (--token TOKEN works too, but `ps`
shows it to every local user): every API request must then send
"Authorization: Bearer TOKEN" (401 otherwise). A request names a pack by its
name, one of those loaded with --pack at start-up; it never names a file.
Bodies must be application/json; a ticket over --max-ticket-bytes is 413; a
bad field is 422, naming it; a full queue is 503 with Retry-After. No CORS
headers unless --allow-origin. A client that goes away cancels its request.
Headers must arrive within --header-timeout, a body within --body-timeout
(408), and at most --max-connections are held open (fewer when the
descriptor limit is low): at the limit, the connection that has waited
longest without a whole request is closed. SIGTERM or Ctrl-C answers the
waiting requests 503 at once and stops the running score inside its decode.

examples:
  triage serve
  curl -s localhost:8787/v1/score -H 'Content-Type: application/json' \\
       -d '{"id": "T-1", "text": "I was charged twice"}'
  triage serve --no-history                     # score only: nothing kept, no labels
  openssl rand -hex 16 > ~/.triage-token && chmod 600 ~/.triage-token
  triage serve --host 0.0.0.0 --token-file ~/.triage-token"""

DEFAULT_PORT = 8787


def add_arguments(p: argparse.ArgumentParser) -> None:
    from triage.commands._flags import add_model_options, add_prompt_option, add_removed_flags, add_setting
    from triage.serve.limits import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS
    from triage.serve.requests import DEFAULT_MAX_TICKET_BYTES

    p.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other needs a token)"
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    add_model_options(p)
    add_setting(
        p,
        "pack",
        metavar="PATH",
        action="append",
        help="a criteria pack requests may name (by its name); repeat for more; the first is the default "
        f"(default: the config's pack, else {SETTINGS['pack'].unset})",
    )
    add_prompt_option(p)
    from triage.commands._token import add_token_options

    add_token_options(p, "the bearer token every API request must send (needed off localhost)")
    p.add_argument(
        "--allow-origin",
        metavar="ORIGIN",
        help="let pages of this one origin call the API (CORS), e.g. https://example.zendesk.com",
    )
    add_setting(p, "serve_queue_limit", type=int, metavar="N", default=None)
    p.add_argument(
        "--max-ticket-bytes",
        type=int,
        metavar="N",
        default=None,
        help=f"largest ticket text in bytes of UTF-8; larger gets 413 (default {DEFAULT_MAX_TICKET_BYTES})",
    )
    keep = p.add_mutually_exclusive_group()
    keep.add_argument(
        "--history",
        action="store_true",
        help='keep every scored ticket in the history unless its request says "history": false (the default; '
        "so the page, /v1/label and `triage label` can label it)",
    )
    keep.add_argument(
        "--no-history",
        action="store_true",
        help='keep no ticket in the history unless its request says "history": true; the page then offers no labels',
    )
    p.add_argument("--history-file", metavar="PATH", help="the history file (default: the user data dir's)")
    p.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        default=DEFAULT_MAX_CONNECTIONS,
        help="connections held open at most (default %(default)s; fewer when the descriptor limit is low); at the "
        "limit the one that has waited longest without a whole request is closed",
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        metavar="S",
        default=DEFAULT_HEADER_TIMEOUT,
        help="seconds a request's headers may take to arrive (default %(default)g); later: 408, closed",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        metavar="S",
        default=DEFAULT_BODY_TIMEOUT,
        help="seconds a request's body may take to arrive after its headers (default %(default)g); later: 408",
    )
    p.add_argument("--no-head", action="store_true", help="do not apply any learned head")
    p.add_argument("--no-calibration", action="store_true", help="do not apply any calibration")
    add_removed_flags(p)


def check_origin(value: str) -> str:
    """``--allow-origin``: exactly one origin (``scheme://host[:port]``), as a browser's ``Origin`` header
    writes it; a default port is dropped, an internationalised host is written in punycode (IDNA).

    Raises:
        InputError: a wildcard, a path (a trailing ``/`` too), a query, user info, two origins, no scheme or host.
    """
    from urllib.parse import urlsplit

    def refuse(why: str, hint: str = "give scheme and host, e.g. https://example.zendesk.com") -> InputError:
        return InputError(f"--allow-origin {value!r} is not one origin: {why}", hint=hint)

    text = value.strip()
    if "," in text or any(c.isspace() for c in text) or text.count("://") > 1:
        raise refuse("it holds more than one", "a server allows one origin; run one server per origin")
    if "*" in text:
        raise refuse("a wildcard matches any site", "name the one site, e.g. https://example.zendesk.com")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise refuse("it needs http:// or https:// and a host")
    if parts.username is not None or parts.password is not None:
        raise refuse("an origin holds no user name or password")
    try:
        port = parts.port
    except ValueError:
        raise refuse("its port is not a port") from None
    if parts.path or parts.query or parts.fragment or text.endswith(("?", "#")):
        fixed = f"{parts.scheme}://{parts.netloc}"
        raise refuse("it has a path; a browser's Origin header never does", f"use {fixed}")
    host = parts.hostname
    if not host.isascii():  # browsers send an internationalised host in punycode (IDNA): match that
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise refuse(
                "its host cannot be written in punycode (IDNA)",
                "write the host as the browser's Origin header does, e.g. https://xn--bcher-kva.example",
            ) from None
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}[parts.scheme]
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


def _positive(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{what} must be a whole number of at least 1, not {value!r}")
    return value


def settings_of(args: argparse.Namespace, config: dict[str, object]) -> tuple[ServeSettings, int]:
    """The :class:`~triage.serve.app.ServeSettings` of the command line and config; checked before the model loads.

    Raises:
        InputError: another host without a token, a bad port or limit, a pack that cannot be read, two packs
            of one name.
    """
    from triage.commands._token import token_of
    from triage.domain.pack import resolve_pack
    from triage.serve.app import LOOPBACK, ServeSettings
    from triage.serve.requests import DEFAULT_MAX_TICKET_BYTES
    from triage.settings import Settings
    from triage.store.config import config_source

    token = token_of(args, lambda m: _say(f"triage: {m}"))
    if args.host not in LOOPBACK and token is None:
        raise InputError(
            f"--host {args.host} would let other machines reach the model; that needs a token",
            hint="set TRIAGE_SERVE_TOKEN or pass --token-file PATH, or leave out --host to stay on 127.0.0.1",
        )
    if not 1 <= args.port <= 65535:
        raise InputError(f"--port {args.port} is not a port (1 to 65535)")
    allow_origin = check_origin(args.allow_origin) if args.allow_origin is not None else None
    for name in ("header_timeout", "body_timeout"):
        value = getattr(args, name)
        if not 0 < value <= 3600:
            raise InputError(f"--{name.replace('_', '-')} must be a number of seconds above 0 (at most 3600)")
    wanted = Settings.of(config)
    paths = args.pack or [wanted.pack]
    packs: dict[str, Pack] = {}
    for path in paths:
        pack = resolve_pack(path)
        if pack.name in packs:
            raise InputError(f"two packs are named {pack.name!r}", hint="requests name packs by name; rename one")
        packs[pack.name] = pack
    if args.queue_limit is not None:
        queue_limit = _positive(args.queue_limit, "--queue-limit")
    else:
        queue_limit = _positive(wanted.serve_queue_limit, config_source("serve_queue_limit", wanted.serve_queue_limit))
    max_ticket = _positive(args.max_ticket_bytes or DEFAULT_MAX_TICKET_BYTES, "--max-ticket-bytes")
    _positive(args.max_connections, "--max-connections")
    settings = ServeSettings(
        packs=packs,
        host=args.host,
        port=args.port,
        token=token,
        allow_origin=allow_origin,
        max_ticket_bytes=max_ticket,
        history=not args.no_history,
        history_path=Path(args.history_file).expanduser() if args.history_file else None,
        body_timeout=args.body_timeout,
    )
    return settings, queue_limit


def _say(line: str) -> None:
    from triage.domain.ticket import printable

    print(printable(line), file=sys.stderr, flush=True)


def _check_history(path: Path | None) -> None:
    """Open the history now: one that cannot be written stops the server before the model loads, and one that
    was damaged and moved aside is said, naming both files."""
    from triage.store.history import History
    from triage.store.paths import user_dirs

    target = path if path is not None else user_dirs().history_db

    def aside() -> set[Path]:
        if not target.parent.is_dir():
            return set()
        return {p for p in target.parent.glob(f"{target.name}.bad-*") if not p.name.endswith(("-wal", "-shm"))}

    before = aside()
    history = History.open_writable(path)
    notice = history.notice
    history.close()
    moved = sorted(aside() - before)
    if moved:
        _say(
            f"triage: note: the history {target} was damaged; it was moved aside to {moved[-1]} "
            f"and a new, empty history was started at {target}"
        )
    elif notice:
        _say(f"triage: note: {notice}")


def run(args: argparse.Namespace) -> int:
    import logging
    from importlib.util import find_spec

    if find_spec("starlette") is None or find_spec("uvicorn") is None:
        raise InputError(
            "triage serve needs the ASGI stack of the serve extra",
            hint="pip install 'triage[serve]' (Starlette and uvicorn)",
        )
    from triage.scoring.loader import load_engine
    from triage.scoring.options import ScoreOptions
    from triage.serve.app import create_app
    from triage.serve.server import Gate, bind, build_server, connection_cap
    from triage.serve.worker import EngineWorker
    from triage.session import FitRequest, Session
    from triage.settings import Settings
    from triage.store.config import load_config

    config = load_config()
    settings, queue_limit = settings_of(args, config)
    try:
        max_connections = connection_cap(args.max_connections)
    except ValueError as exc:
        raise InputError(f"--max-connections: {exc}") from None
    try:  # the port is taken now: one in use is said before the model loads, never after "serving"
        sock = bind(args.host, args.port)
    except OSError as exc:
        raise InputError(str(exc.strerror), hint="pass another --port, or stop what listens there") from None
    try:
        if settings.history or settings.history_path is not None:
            _check_history(settings.history_path)
        engine = load_engine(
            args.model,
            n_ctx=args.n_ctx,
            threads=args.threads,
            prompt_style=args.prompt,
            notice=lambda m: _say(f"triage: {m}"),
        )
        request = FitRequest.of(no_head=args.no_head, no_calibration=args.no_calibration, config=config)
        from triage.learning.starter import needs_fit
        from triage.serve.starter_fit import StarterFit

        # no starter head yet: serve at once, zero-shot, and fit it between requests (GET /v1/health: how far)
        fit = (
            StarterFit(engine, settings.default_pack, say=lambda m: _say(f"triage: {m}"))
            if needs_fit(engine, settings.default_pack, request)
            else None
        )
        session = Session(
            engine, request=request, history_path=settings.history_path, keep_features=Settings.of(config).keep_features
        )
        for note in session.fits(settings.default_pack, ScoreOptions()).notes:  # every request's options (not criteria)
            _say(f"triage: {'' if note.applied else 'note: '}{note.text}")
        for pack in settings.packs.values():
            engine.hold_stable(pack)  # computed (or restored) now, not on the first request
        engine.hold_stable(settings.default_pack)  # the default's stays resident
        worker = EngineWorker(session, queue_limit=queue_limit)
        if fit is not None:
            worker.starter = fit
            worker.run_first(fit.run)
        worker.start()
        app = create_app(worker, settings)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("triage: %(message)s"))
        logging.getLogger("triage.serve").addHandler(handler)
        logging.getLogger("triage.serve").setLevel(logging.INFO)
        gate = Gate(max_connections, args.header_timeout, args.body_timeout)
        where = f"http://{'[' + args.host + ']' if ':' in args.host else args.host}:{args.port}/"
        lowered = (
            f", {max_connections} connections (the descriptor limit)" if max_connections < args.max_connections else ""
        )

        def started() -> None:
            _say(
                f"triage: serving {engine.name} with pack {settings.default_pack.name} on {where} "
                f"(queue limit {queue_limit}{lowered}; Ctrl-C stops)"
            )
            if settings.token is not None:
                _say("triage: a bearer token is required on every API request (Authorization: Bearer ...)")
            if args.host not in ("127.0.0.1", "localhost", "::1"):
                _say(f"triage: listening on {args.host}: other machines can reach this server")

        server = build_server(app, worker, gate, on_started=started)
        try:
            server.run(sockets=[sock])
        finally:
            worker.stop()  # a starter fit still scoring its rows stops at the next one
            if fit is not None and not fit.join(5.0):
                _say("triage: note: the starter head's fit was still running at the stop; it is not stored")
    finally:
        sock.close()
    return 0
