"""The OpenAPI 3.1 document of ``triage serve`` (``GET /openapi.json``), written out by hand.

It is kept true to the routes and to :mod:`triage.serve.requests` by tests/test_serve.py (every
route is in it, and every field a request may hold).
"""

from __future__ import annotations

from typing import Any

from triage import __version__


def _json(schema: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}


def _err(description: str) -> dict[str, Any]:
    return {"description": description, "content": _json("Error")}


def openapi(settings: Any) -> dict[str, Any]:
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
                "so /v1/label can label it (default: the server's --history)",
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
    secured = [{"bearer": []}] if settings.token else []
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
                "Result": {
                    "type": "object",
                    "description": "triage.result/3, as `triage score` prints it (docs/schema.md)",
                    "required": ["schema", "ticket_id", "criteria"],
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
                        "401": _err("no or a wrong bearer token"),
                        "413": _err("the ticket or body is too large"),
                        "422": _err("a field is missing or wrong (named in field)"),
                        "503": _err("the queue is full; see Retry-After"),
                    },
                }
            },
            "/v1/label": {
                "post": {
                    "summary": "record the right option for criteria of a ticket kept in the history",
                    "requestBody": {"required": True, "content": _json("LabelRequest")},
                    "responses": {
                        "200": {"description": "the labels stored"},
                        "401": _err("no or a wrong bearer token"),
                        "422": _err("unknown ticket, criterion or option (named in field)"),
                        "409": _err("the history cannot be written"),
                    },
                }
            },
            "/v1/health": {
                "get": {
                    "summary": "model, packs, head and calibration, hit rate, queue",
                    "responses": {"200": {"description": "the server's state"}},
                }
            },
            "/openapi.json": {
                "get": {"summary": "this document", "responses": {"200": {"description": "OpenAPI 3.1"}}}
            },
        },
    }
