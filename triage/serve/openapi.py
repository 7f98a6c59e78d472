"""The OpenAPI 3.1 document of ``triage serve`` (``GET /openapi.json``), written out by hand.

It is kept true to the routes and to :mod:`triage.serve.requests` by tests/test_serve.py (every
route is in it, and every field a request may hold).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from triage import __version__
from triage.serve import listing


class Documented(Protocol):
    """What the document says of the server's settings (:class:`~triage.serve.app.ServeSettings`; a protocol, as
    the app imports this module)."""

    token: str | None
    max_ticket_bytes: int

    @property
    def packs(self) -> Mapping[str, object]: ...


def _json(schema: str) -> dict[str, object]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}


def _responses(first: dict[str, object], common: dict[str, object], rest: dict[str, object]) -> dict[str, object]:
    """An operation's responses: its own first, the ones every route shares, then the rest of its own."""
    return {**first, **common, **rest}


def _err(description: str) -> dict[str, object]:
    return {"description": description, "content": _json("Error")}


def openapi(settings: Documented) -> dict[str, object]:
    """The document; ``settings`` (:class:`~triage.serve.app.ServeSettings`) gives the packs and limits."""
    packs = list(settings.packs)
    score_body = {
        "type": "object",
        "oneOf": [{"required": ["text"]}, {"required": ["messages"]}],
        "additionalProperties": False,
        "properties": {
            "id": {
                "type": ["string", "integer"],
                "maxLength": 200,
                "description": "the ticket's id (default: the first 12 hex digits of its text's sha256)",
            },
            "text": {
                "type": "string",
                "description": f"the ticket (at most {settings.max_ticket_bytes} bytes of UTF-8)",
            },
            "messages": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["role", "text"],
                    "properties": {
                        "role": {"type": "string", "enum": ["customer", "agent", "note"]},
                        "text": {"type": "string"},
                    },
                },
                "description": "a thread instead of text: its messages in order. Sent again under the same id with "
                "more messages, only the new ones are evaluated (the result's thread.reused says how many tokens "
                "were not)",
            },
            "pack": {
                "type": "string",
                "enum": packs,
                "description": "a pack the server loaded, by name (default: the first)",
            },
            "criteria": {
                "oneOf": [{"type": "array", "items": {"type": "string"}, "minItems": 1}, {"type": "string"}],
                "description": "score only these criteria of the pack (ids; or one comma-separated string)",
            },
            "history": {
                "type": "boolean",
                "description": "keep the ticket and its result in the history, "
                "so /v1/label can label it (default: yes, unless the server runs with --no-history)",
            },
        },
    }
    label_body = {
        "type": "object",
        "required": ["id", "labels"],
        "additionalProperties": False,
        "properties": {
            "id": {"type": ["string", "integer"]},
            "labels": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "minProperties": 1,
                "description": "criterion id -> option id or label",
            },
        },
    }
    ticket_required = ["id", "text", "messages", "status", "result", "labels"]
    ticket_properties: dict[str, object] = {
        "id": {"type": "string"},
        "text": {"type": "string", "description": "the ticket (a thread: as the prompt writes it)"},
        "messages": {
            "type": ["array", "null"],
            "description": "a thread's messages [{role, text}], in order; null for a plain ticket",
        },
        "status": {
            "type": "string",
            "enum": ["running", "done", "cancelled", "failed", ""],
            "description": "its newest score's status ('' when never scored)",
        },
        "result": {
            "oneOf": [{"$ref": "#/components/schemas/Result"}, {"type": "null"}],
            "description": "its newest finished result (what /v1/label checks labels against)",
        },
        "labels": {
            "type": "object",
            "description": "criterion id -> {option, kind, shown_option, origin, given_at}: its labels now "
            "(given_at: the message count it was given on; null where it does not stand)",
        },
    }
    ticket = {"type": "object", "required": ticket_required, "properties": ticket_properties}
    listed = {
        "type": "object",
        "required": [*ticket_required, "summarised"],
        "properties": {
            **ticket_properties,
            "text": {
                "type": "string",
                "description": f"the ticket's text, at most {listing.TEXT_CHARS} characters (text_cut: it was longer)",
            },
            "messages": {
                "type": ["array", "null"],
                "description": f"a thread's first {listing.FIRST} and last {listing.LAST} messages [{{role, text}}] "
                f"(each text at most {listing.TEXT_CHARS} characters; cut: true when it was longer); "
                "null for a plain ticket",
            },
            "message_count": {"type": "integer", "description": "a thread's messages in all"},
            "messages_left_out": {"type": "integer", "description": "a thread's messages not shown here"},
            "text_cut": {"type": "boolean"},
            "summarised": {
                "type": "boolean",
                "description": "true when a message was left out or a text cut: GET /v1/tickets/{id} gives it whole",
            },
        },
    }
    ticket_list = {
        "type": "object",
        "required": ["history", "tickets"],
        "properties": {
            "history": {"type": "string", "description": "the history file"},
            "tickets": {
                "type": "array",
                "description": "newest first (by the ticket's last change), each summarised (a bounded response)",
                "items": listed,
            },
        },
    }
    one_ticket = {
        "type": "object",
        "required": ["history", "ticket"],
        "properties": {"history": {"type": "string", "description": "the history file"}, "ticket": ticket},
    }
    secured: list[dict[str, list[str]]] = [{"bearer": []}] if settings.token else []
    common: dict[str, object] = {
        "400": _err("the body's keys are not Unicode text, or the request is not HTTP/1.1"),
        "401": _err("no or a wrong bearer token"),
        "408": _err("the headers or the body did not arrive in time"),
        "421": _err("a Host header that is not this loopback server's"),
        "503": _err("the server is stopping, or at its limit of open connections"),
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "triage serve",
            "version": __version__,
            "description": "Score support tickets with the local model; see docs/serve.md.",
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "ScoreRequest": score_body,
                "LabelRequest": label_body,
                "TicketList": ticket_list,
                "Ticket": one_ticket,
                "Result": {
                    "type": "object",
                    "description": "triage.result/3, as `triage score` prints it (docs/schema.md)",
                    "required": ["schema", "ticket_id", "criteria"],
                },
                "PrefillResult": {
                    "type": "object",
                    "description": "what a prefill did: the ticket's prompt up to its tails (stable block and ticket "
                    "block), computed ahead of its score",
                    "required": ["ticket_id", "tokens", "cached", "evaluated", "ms", "complete"],
                    "properties": {
                        "ticket_id": {"type": "string"},
                        "tokens": {"type": "integer", "description": "the prompt's tokens before the tails"},
                        "cached": {"type": "integer", "description": "how many were computed before it began"},
                        "evaluated": {"type": "integer", "description": "how many it computed"},
                        "ms": {"type": "number", "description": "its wall time"},
                        "complete": {
                            "type": "boolean",
                            "description": "false: a newer prefill (or the client going away) stopped it mid-way; "
                            "what it computed is kept",
                        },
                    },
                },
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {"type": "string"},
                        "field": {"type": "string"},
                        "hint": {"type": "string"},
                    },
                },
            },
        },
        "security": secured,
        "paths": {
            "/v1/score": {
                "post": {
                    "summary": "score one ticket",
                    "description": "With Accept: text/event-stream the answer is a stream of events: queued, "
                    "prefilled, one criterion per criterion, then result (or error).",
                    "requestBody": {"required": True, "content": _json("ScoreRequest")},
                    "responses": {
                        "200": {
                            "description": "the result",
                            "content": {**_json("Result"), "text/event-stream": {"schema": {"type": "string"}}},
                        },
                        **common,
                        "409": _err(
                            "history: true, and the history cannot be written (locked, a newer schema), or refused the "
                            "result of a ticket it scored"
                        ),
                        "413": _err("the ticket or body is too large"),
                        "422": _err(
                            "a field is missing or wrong (named in field); the configured head or calibration cannot "
                            "be read or does not fit; the engine refused or failed on this ticket"
                        ),
                        "500": _err("an unexpected failure inside the score (the server's log has the traceback)"),
                        "503": _err("the queue is full, or the server is stopping; see Retry-After"),
                    },
                }
            },
            "/v1/prefill": {
                "post": {
                    "summary": "read one ticket ahead of its score, while the agent is still pasting or typing",
                    "description": "The body, limits and pack choice of /v1/score. The ticket's prompt up to its "
                    "tails is computed on the engine, in the queue's order, so that the score of that ticket (or of "
                    "a longer or edited version of it) then costs only the tails and what changed. A newer prefill "
                    "cancels an older one still waiting or running. Nothing is kept in the history.",
                    "requestBody": {"required": True, "content": _json("ScoreRequest")},
                    "responses": {
                        "200": {"description": "what the prefill did", "content": _json("PrefillResult")},
                        **common,
                        "409": _err("a newer prefill replaced this one before it began"),
                        "413": _err("the ticket or body is too large"),
                        "422": _err("a field is missing or wrong (named in field)"),
                        "503": _err("the queue is full, or the server is stopping; see Retry-After"),
                    },
                }
            },
            "/v1/label": {
                "post": {
                    "summary": "record the right option for criteria of a ticket kept in the history",
                    "requestBody": {"required": True, "content": _json("LabelRequest")},
                    "responses": {
                        "200": {"description": "the labels stored"},
                        **common,
                        "422": _err("unknown ticket, criterion or option (named in field)"),
                        "409": _err("the history cannot be written (locked by another process, a newer schema)"),
                    },
                }
            },
            "/v1/tickets": {
                "get": {
                    "summary": "the history's newest tickets, each with its latest result and its labels",
                    "description": "What the page lists under Recent tickets when the server keeps a history: "
                    "a reload shows the tickets and their labels again.",
                    "parameters": [
                        {
                            "name": "limit",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50},
                        }
                    ],
                    "responses": _responses(
                        {
                            "200": {"description": "the tickets", "content": _json("TicketList")},
                        },
                        common,
                        {
                            "409": _err("the history cannot be read (a newer schema, locked when opened)"),
                            "422": _err("a bad limit (field limit): ASCII digits only, 1 to 200"),
                        },
                    ),
                }
            },
            "/v1/tickets/{ticket_id}": {
                "get": {
                    "summary": "one ticket of the history, whole: every message, no text cut",
                    "description": "The listing summarises long threads and cuts long texts (summarised: true); "
                    "this gives the newest ticket of that id as it is kept.",
                    "parameters": [{"name": "ticket_id", "in": "path", "required": True, "schema": {"type": "string"}}],
                    "responses": _responses(
                        {
                            "200": {"description": "the ticket", "content": _json("Ticket")},
                        },
                        common,
                        {
                            "404": _err("the history holds no ticket of that id (field id)"),
                            "409": _err("the history cannot be read (a newer schema, locked when opened)"),
                        },
                    ),
                }
            },
            "/v1/health": {
                "get": {
                    "summary": "model, packs, head and calibration, hit rate, queue, and how far a starter head's "
                    "fit in the background is (starter: state, rows_done, rows, rows_per_s, eta_s; null: none)",
                    "responses": {"200": {"description": "the server's state"}},
                }
            },
            "/openapi.json": {
                "get": {"summary": "this document", "responses": {"200": {"description": "OpenAPI 3.1"}}}
            },
        },
    }
