"""A client of a running ``triage serve``, on the standard library only (``http.client``): ``score --server``.

:class:`ServeClient` keeps one keep-alive connection to the server and sends ``GET /v1/health`` and
``POST /v1/score`` (JSON, not the event stream: a whole ``triage.result/3`` record per ticket).

What can go wrong is said in one line, the way the rest of the CLI says it:

* the whole run cannot go on (nothing listens, an unknown host, no or a wrong token, not a triage
  server, a request field the server refuses for every ticket such as ``pack`` or ``criteria``, the
  queue still full after :data:`BUSY_TRIES` waits of its ``Retry-After``, a proxy's 502):
  :class:`~triage.errors.TriageError` (exit 2 for what the user must fix, 1 otherwise);
* one ticket cannot be scored (413, 422 on ``text``, ``messages`` or ``id``, a 500 inside its score):
  :class:`TicketRefused`, and the next ticket is sent.

It never imports the ASGI stack: a machine without the serve extra can be a client.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from triage.errors import InputError, TriageError

BUSY_TRIES = 3  # a 503 (the queue is full) is waited out this many times, then the run stops
MAX_WAIT_S = 30.0  # the longest one Retry-After is waited
TICKET_FIELDS = ("text", "messages", "id")  # a 422 on these is the ticket's own fault: the next is sent


class TicketRefused(Exception):
    """The server could not score this one ticket (413, 422 on its text, messages or id, 500)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def parse_url(url: str) -> tuple[str, str, int, str]:
    """``(scheme, host, port, path prefix)`` of a server URL such as ``http://127.0.0.1:8787``.

    Raises:
        InputError: not an http:// or https:// URL with a host, or a bad port.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(
            f"--server {url!r} is not an http:// or https:// URL",
            hint="give the address `triage serve` prints, e.g. --server http://127.0.0.1:8787",
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise InputError(f"--server {url!r} has a bad port") from None
    if parts.query or parts.fragment:
        raise InputError(f"--server {url!r} has a query or fragment; give the server's address only")
    return parts.scheme, parts.hostname, port, parts.path.rstrip("/")


class ServeClient:
    """Requests to one ``triage serve``.

    Args:
        url: the server's address (``http://host:port``, optionally with a path prefix).
        token: the bearer token the server was started with, or None.
        timeout: seconds to wait for an answer (a score waits in the server's queue first).
        say: where to say that a busy server is being waited out (one line each time).
    """

    def __init__(
        self, url: str, token: str | None = None, *, timeout: float = 600.0, say: Callable[[str], None] | None = None
    ) -> None:
        self.scheme, self.host, self.port, self.prefix = parse_url(url)
        self.url = f"{self.scheme}://{self.host if ':' not in self.host else f'[{self.host}]'}:{self.port}{self.prefix}"
        self.token = token
        self.timeout = timeout
        self.say = say or (lambda line: None)
        self._conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        """Close the connection (a new request opens another)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> ServeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the two calls ------------------------------------------------------------------
    def health(self) -> dict[str, object]:
        """``GET /v1/health``: the model, the packs, the queue.

        Raises:
            TriageError: the server cannot be reached, refuses the token, or is not a triage server.
        """
        status, _, body = self._request("GET", "/v1/health")
        if status != 200:
            self._fail(status, body, {})
        data = _json(body)
        if not isinstance(data, dict) or "model" not in data or "packs" not in data:
            raise self._not_triage()
        return data

    def score(self, request: Mapping[str, object]) -> dict[str, object]:
        """``POST /v1/score`` of one ticket: the ``triage.result/3`` record, as ``triage score`` writes it.

        Raises:
            TicketRefused: this ticket cannot be scored (the next one may be).
            TriageError: no ticket can be (see the module's docstring).
        """
        payload = json.dumps(request, ensure_ascii=False).encode("utf-8")
        for attempt in range(1, BUSY_TRIES + 2):
            status, headers, body = self._request("POST", "/v1/score", payload)
            if status == 200:
                from triage.domain.result import SCHEMA

                data = _json(body)
                if not isinstance(data, dict) or data.get("schema") != SCHEMA:
                    got = data.get("schema") if isinstance(data, dict) else None
                    raise TriageError(
                        f"the server at {self.url} answered {got or 'something else'}, not {SCHEMA}",
                        hint="run the same triage version on both sides",
                        exit_code=2,
                    )
                return data
            if status == 503 and attempt <= BUSY_TRIES:
                wait = _retry_after(headers.get("retry-after"))
                self.say(f"the server's queue is full (503); waiting {wait:g} s ({attempt} of {BUSY_TRIES})")
                time.sleep(wait)
                continue
            err = _error_of(body)
            if status in (413, 500) or (status == 422 and err.get("field") in TICKET_FIELDS):
                raise TicketRefused(status, _message(status, err))
            self._fail(status, body, err, tries=attempt)
        raise AssertionError("unreachable")

    # -- plumbing -----------------------------------------------------------------------
    def _headers(self, body: bytes | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "triage-score"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _connect(self) -> http.client.HTTPConnection:
        if self._conn is None:
            kind = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            self._conn = kind(self.host, self.port, timeout=self.timeout)
        return self._conn

    def _request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
        """One request; a kept-alive connection the server closed meanwhile is opened again once."""
        for fresh in (self._conn is None, True):
            conn = self._connect()
            try:
                conn.request(method, self.prefix + path, body, self._headers(body))
                response = conn.getresponse()
                data = response.read()
                return response.status, {k.lower(): v for k, v in response.getheaders()}, data
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if fresh:
                    raise self._unreachable(exc) from None
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise self._unreachable(exc) from None
        raise AssertionError("unreachable")

    def _unreachable(self, exc: BaseException) -> TriageError:
        if isinstance(exc, ConnectionRefusedError):
            why = "connection refused (nothing listens there)"
        elif isinstance(exc, socket.gaierror):
            why = f"unknown host {self.host!r}"
        elif isinstance(exc, TimeoutError | socket.timeout):
            why = f"no answer within {self.timeout:g} s"
        elif isinstance(exc, http.client.RemoteDisconnected | ConnectionResetError | BrokenPipeError):
            why = "the connection was closed before an answer"
        else:
            why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return TriageError(
            f"cannot reach the server at {self.url}: {why}",
            hint="start it with `triage serve` (it prints its address), "
            "or check --server / TRIAGE_SERVER / the config's server",
            exit_code=2,
        )

    def _not_triage(self) -> TriageError:
        return TriageError(
            f"{self.url} does not answer as `triage serve` does",
            hint="check --server / TRIAGE_SERVER / the config's server: it should be the address `triage serve` prints",
            exit_code=2,
        )

    def _fail(self, status: int, body: bytes, err: Mapping[str, object], *, tries: int = 1) -> None:
        """Raise the TriageError of a status that stops the run."""
        err = err or _error_of(body)
        if status == 401:
            raise TriageError(
                f"the server at {self.url} "
                + ("needs a token" if not self.token else "refused the token (a wrong one)")
                + " (401)",
                hint="set TRIAGE_SERVE_TOKEN or pass --token-file PATH: the token `triage serve` was started with",
                exit_code=2,
            )
        if status == 404:
            raise self._not_triage()
        if status == 503:
            raise TriageError(
                f"the server at {self.url} is busy: its queue was still full after {tries} tries (503)",
                hint="try again later, or start the server with a larger --queue-limit",
            )
        if status == 422 or status == 421 or status == 409:
            raise TriageError(
                f"the server at {self.url} refused the request: {_message(status, err)}",
                hint=_hint(err),
                exit_code=2,
            )
        raise TriageError(f"the server at {self.url} failed: {_message(status, err)}", hint=_hint(err))


def _json(body: bytes) -> object:
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


def _error_of(body: bytes) -> dict[str, object]:
    """The server's ``{"error", "field", "hint"}``, or ``{}`` for a body that is not one (a proxy's page)."""
    data = _json(body)
    return data if isinstance(data, dict) and isinstance(data.get("error"), str) else {}


def _hint(err: Mapping[str, object]) -> str | None:
    hint = err.get("hint")
    return hint if isinstance(hint, str) else None


def _message(status: int, err: Mapping[str, object]) -> str:
    text = err.get("error") or http.client.responses.get(status, "an unexpected answer")
    field = err.get("field")
    return f"{text} (HTTP {status}{f', field {field}' if field else ''})"


def _retry_after(value: str | None) -> float:
    try:
        return min(MAX_WAIT_S, max(0.0, float(value or 1)))
    except ValueError:
        return 1.0
