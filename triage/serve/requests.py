"""The bodies ``triage serve`` accepts, checked field by field.

A bad field is a :class:`Invalid` (answered 422, naming the field); a ticket past the size
limit is a :class:`TooLarge` (413); a body whose object keys are not Unicode text (a lone
surrogate escape such as ``"\\ud800"``) is :class:`Malformed` (400). Nothing here reads a
file: a request names a pack by the name of one the server loaded at start-up, never by a path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from triage.settings import RETIRED

DEFAULT_MAX_TICKET_BYTES = 64 << 10  # 64 KiB of UTF-8: far more than a context of 4,096 tokens holds
MAX_ID_CHARS = 200
_SURROGATE = re.compile("[\ud800-\udfff]")


_ASCII_DIGITS = re.compile("[0-9]+")


def query_int(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """The query parameter ``name`` as a whole number from ``low`` to ``high`` (``default`` when absent).

    Only ASCII digits are a number (``str.isdigit`` also takes ``²``, ``①``, Arabic-Indic and fullwidth
    digits); at most as many digits as ``high`` has are read, so 5,000 nines cost nothing.

    Raises:
        Invalid: anything else, naming the field.
    """
    raw = params.get(name)
    if raw is None:
        return default
    if len(raw) <= len(str(high)) and _ASCII_DIGITS.fullmatch(raw) and low <= int(raw) <= high:
        return int(raw)
    shown = raw[:40].encode("ascii", "backslashreplace").decode("ascii") + ("..." if len(raw) > 40 else "")
    raise Invalid(name, f"{name} must be a whole number from {low} to {high} in ASCII digits, not {shown!r}")


class Invalid(Exception):
    """A request field that cannot be used (HTTP 422)."""

    def __init__(self, field: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.hint = hint


class Malformed(Exception):
    """A body that is JSON but not text a request can be made of (HTTP 400)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def check_keys(value: object) -> None:
    """Refuse a body whose object keys, at any depth, hold a lone UTF-16 surrogate (``"\\udc80"``):
    no field has such a name, and it cannot be written back as UTF-8 in an error naming the field.

    Raises:
        Malformed: such a key (the error says where, escaped).
    """
    stack = [value]
    while stack:  # the body's depth is bounded by the JSON reader (64)
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, inner in item.items():
                if isinstance(key, str) and _SURROGATE.search(key):
                    shown = key.encode("utf-8", "backslashreplace").decode("utf-8")[:60]
                    raise Malformed(
                        f"the body has a key that is not Unicode text ({shown} holds a lone surrogate escape)",
                        hint="send field names as plain text; every field name this API knows is ASCII",
                    )
                stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)


class TooLarge(Exception):
    """A body or ticket past its limit (HTTP 413)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class ScoreRequest:
    """``POST /v1/score``: one ticket, its pack and criteria (None: the server's default pack, every criterion).

    It is scored as ``triage score`` scores: ``ScoreOptions()``, options read by name.
    """

    id: str | None
    text: str | None
    pack: str | None = None
    messages: list[object] | None = None  # a thread: [{"role", "text"}, ...] (checked by make_ticket)
    criteria: tuple[str, ...] | None = None
    history: bool | None = None


@dataclass(frozen=True)
class LabelRequest:
    """``POST /v1/label``: the right option for criteria of a ticket kept in the history."""

    id: str
    labels: dict[str, str]


SCORE_FIELDS = ("id", "text", "messages", "pack", "criteria", "history")
REMOVED_FIELDS = ("readout", "mode", "orderings", "prior")  # answered 422 with what replaced them
LABEL_FIELDS = ("id", "labels")


def _object(body: object, fields: tuple[str, ...], removed: tuple[str, ...] = ()) -> Mapping[str, object]:
    if not isinstance(body, Mapping):
        raise Invalid(
            "body",
            f"the body must be a JSON object, not {type(body).__name__}",
            hint='e.g. {"id": "T-1", "text": "..."}',
        )
    for key in body:
        if key in removed:
            hint = f"leave it out; the fields: {', '.join(fields)}"
            raise Invalid(str(key), f"field {key!r} was removed: {RETIRED[key]}", hint=hint)
        if key not in fields:
            raise Invalid(str(key), f"unknown field {str(key)!r}", hint=f"the fields: {', '.join(fields)}")
    return body


def _ticket_id(body: Mapping[str, object], *, required: bool) -> str | None:
    value = body.get("id")
    if value is None:
        if required:
            raise Invalid("id", "field 'id' is required (the ticket's id)")
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise Invalid("id", f"field 'id' must be a string or an integer, not {type(value).__name__}")
    text = str(value)
    if not text.strip():
        raise Invalid("id", "field 'id' is empty", hint="leave it out to use the ticket's hash")
    if len(text) > MAX_ID_CHARS:
        raise Invalid("id", f"field 'id' is longer than {MAX_ID_CHARS} characters")
    return text


def _flag(body: Mapping[str, object], key: str) -> bool | None:
    value = body.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise Invalid(key, f"field {key!r} must be true or false, not {value!r}")


def parse_score(body: object, *, max_ticket_bytes: int = DEFAULT_MAX_TICKET_BYTES) -> ScoreRequest:
    """A ``/v1/score`` body, checked.

    Raises:
        Invalid: a missing, unknown, removed (``readout``, ``mode``, ...) or ill-typed field (named).
        TooLarge: a text of more than ``max_ticket_bytes`` bytes of UTF-8.
    """
    body = _object(body, SCORE_FIELDS, REMOVED_FIELDS)
    text, messages = body.get("text"), body.get("messages")
    if text is not None and messages is not None:
        raise Invalid("messages", "give 'text' or 'messages', not both (a thread's text is its messages)")
    ticket_text: str | None = None  # None: a thread's messages
    if messages is not None:
        if not isinstance(messages, list):
            raise Invalid(
                "messages", f"field 'messages' must be a list of {{role, text}}, not {type(messages).__name__}"
            )
        parts = [t for m in messages if isinstance(m, Mapping) and isinstance(t := m.get("text"), str)]
        text_for_size = "".join(parts)
    elif text is None:
        raise Invalid("text", "field 'text' is required (the ticket's text), or 'messages' for a thread")
    elif not isinstance(text, str):
        raise Invalid("text", f"field 'text' must be a string, not {type(text).__name__}")
    else:
        text_for_size = ticket_text = text
    size = len(text_for_size.encode("utf-8", "surrogatepass"))
    if size > max_ticket_bytes:
        raise TooLarge(f"the ticket is {size:,} bytes; this server scores tickets of at most {max_ticket_bytes:,}")
    pack = body.get("pack")
    if pack is not None and (not isinstance(pack, str) or not pack.strip()):
        raise Invalid("pack", "field 'pack' must be the name of a pack the server loaded (GET /v1/health lists them)")
    criteria = body.get("criteria")
    if criteria is not None:
        if isinstance(criteria, str):
            criteria = [c for c in criteria.split(",")]
        if (
            not isinstance(criteria, list)
            or not all(isinstance(c, str) and c.strip() for c in criteria)
            or not criteria
        ):
            raise Invalid("criteria", "field 'criteria' must be a non-empty list of criterion ids (strings)")
        criteria = tuple(dict.fromkeys(c.strip() for c in criteria))
    return ScoreRequest(
        id=_ticket_id(body, required=False),
        text=ticket_text,
        messages=messages,
        pack=pack,
        criteria=criteria,
        history=_flag(body, "history"),
    )


def parse_label(body: object) -> LabelRequest:
    """A ``/v1/label`` body, checked (the options are checked against the ticket's result later).

    Raises:
        Invalid: a missing, unknown or ill-typed field (named).
    """
    from triage.domain.ticket import safe_id

    body = _object(body, LABEL_FIELDS)
    tid = _ticket_id(body, required=True)
    assert tid is not None
    tid = safe_id(tid)  # as make_ticket keeps an id: a lone surrogate is U+FFFD, never a 500 from SQLite
    labels = body.get("labels")
    if not isinstance(labels, Mapping) or not labels:
        raise Invalid(
            "labels", "field 'labels' must be a non-empty object {criterion: option}", hint='e.g. {"queue": "shipping"}'
        )
    out: dict[str, str] = {}
    for crit, option in labels.items():
        if not isinstance(option, str) or not option.strip():
            raise Invalid(f"labels.{crit}", f"label {crit!r} must be an option id or label (a non-empty string)")
        out[str(crit)] = option.strip()
    return LabelRequest(tid, out)
