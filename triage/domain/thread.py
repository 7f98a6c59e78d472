"""Threads: a ticket as an ordered list of messages, written append-only into the prompt.

A support ticket is rarely one message: the customer writes, an agent answers, the
customer writes again. A :class:`Message` has a role (``customer``, ``agent`` or
``note``) and text. The ticket block holds the messages in order:

* the first message as today's ticket text (a customer's) or under its role's heading;
* every later one after a blank line, under a heading the model reads naturally
  (``Agent reply:``, ``Customer reply:``, ``Internal note:``).

A one-message customer ticket is therefore written exactly as a plain ticket is, and
a thread with one more message is the same text with more at the end: each turn's
prompt starts with the last turn's, so its KV state can be reused
(:mod:`triage.scoring.prefix_store`).

When a thread no longer fits the context it is **compacted**: the first customer
message is kept (cut on its own to half the room when it is longer:
:meth:`triage.scoring.prompt.PromptBuilder.cut`), the middle is dropped with a marker,
and as many of the latest messages as fit are kept. The cut is chosen so that the later
messages use at most half of the room the first leaves, and it is worked out from the
messages alone, turn by turn, so that the following turns append to the same compacted
text (a new stable prefix) instead of moving the cut every turn. A fresh score of the
same thread compacts it the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from triage.errors import InputError

ROLES = ("customer", "agent", "note")
_HEADINGS = {"customer": "Customer reply:", "agent": "Agent reply:", "note": "Internal note:"}
_FIRST_HEADINGS = {"customer": "", "agent": "Agent:", "note": "Internal note:"}
DROP_MARK = "[... {n} earlier {what} left out ...]"


@dataclass(frozen=True)
class Message:
    """One message of a thread: who wrote it and what (cleaned text)."""

    role: str
    text: str


def piece(message: Message, first: bool) -> str:
    """How ``message`` is written in the ticket block (without the blank line before it)."""
    heading = (_FIRST_HEADINGS if first else _HEADINGS)[message.role]
    return f"{heading}\n{message.text}" if heading else message.text


def drop_mark(n: int) -> str:
    """The marker written where ``n`` messages were left out."""
    return DROP_MARK.format(n=n, what="message" if n == 1 else "messages")


def render(messages: Sequence[Message], dropped: int = 0) -> str:
    """The thread's text for the ticket block, with messages ``1 .. dropped`` left out.

    Messages are joined by a blank line; text only ever grows at the end as messages
    are added (with ``dropped`` fixed).
    """
    if not messages:
        raise ValueError("a thread has at least one message")
    parts = [piece(messages[0], True)]
    if dropped:
        parts.append(drop_mark(dropped))
    parts += [piece(m, False) for m in messages[1 + dropped :]]
    return "\n\n".join(parts)


def compaction(sizes: Sequence[int], mark: int, room: int) -> int:
    """How many messages after the first to leave out so that the thread fits ``room`` tokens.

    Args:
        sizes: each message's tokens as written (with its heading and the blank line).
        mark: the drop marker's tokens.
        room: the tokens the ticket block may take.

    Worked out turn by turn (as if the messages had come one at a time): while the kept
    messages fit, nothing moves; when the next message would not fit, the cut moves on
    until the messages after the first (marker and latest messages) use at most half of
    the room the first leaves, or only the latest message is left after the marker. So
    one compaction serves the turns that follow.
    """
    dropped = 0
    target = sizes[0] + (room - sizes[0]) // 2 if sizes else 0
    for m in range(1, len(sizes) + 1):  # the thread as it was after m messages
        if _kept(sizes[:m], dropped, mark) <= room:
            continue
        while dropped < m - 2 and _kept(sizes[:m], dropped, mark) > target:
            dropped += 1
    return dropped


def _kept(sizes: Sequence[int], dropped: int, mark: int) -> int:
    return sizes[0] + (mark if dropped else 0) + sum(sizes[1 + dropped :])


@dataclass(frozen=True)
class Compacted:
    """A thread as it goes into the prompt."""

    text: str
    dropped: int  # messages left out after the first


def compact(messages: Sequence[Message], room: int, count: Callable[[str], int]) -> Compacted:
    """The thread's text, compacted (:func:`compaction`) when it does not fit ``room`` tokens.

    ``count`` gives a text's tokens. Counting each message on its own can be off by a
    token at each seam (BPE merges across it); a token of slack per message covers it.
    """
    if len(messages) < 3:
        return Compacted(render(messages), 0)
    sizes = [count(piece(m, i == 0)) + 2 for i, m in enumerate(messages)]
    mark = count(drop_mark(len(messages))) + 2
    dropped = compaction(sizes, mark, room)
    return Compacted(render(messages, dropped), dropped)


# -- rows ----------------------------------------------------------------------------
def messages_from(value: object, clean: Callable[[str], str]) -> tuple[Message, ...]:
    """A row's ``messages`` field as messages, each text cleaned with ``clean``.

    Raises:
        InputError: not a non-empty list, or a message that is not an object with a known
            ``role`` and some text (the message's number is named).
    """
    if not isinstance(value, list):
        raise InputError(f"field 'messages' must be a list of {{'role', 'text'}} objects, got {type(value).__name__}")
    if not value:
        raise InputError("field 'messages' is empty; a thread needs at least one message")
    out: list[Message] = []
    for i, m in enumerate(value, 1):
        if not isinstance(m, dict):
            raise InputError(f"message {i} is a {type(m).__name__}, not an object with 'role' and 'text'")
        role, text = m.get("role", "customer"), m.get("text")
        if not isinstance(role, str) or role.strip().lower() not in ROLES:
            raise InputError(f"message {i} has role {role!r}; use one of {', '.join(ROLES)}")
        if not isinstance(text, str):
            raise InputError(f"message {i} has no 'text' string")
        cleaned = clean(text)
        if not cleaned:
            raise InputError(f"message {i} has no text (empty once cleaned); remove it or give its text")
        out.append(Message(role.strip().lower(), cleaned))
    return tuple(out)


def row_body(obj: Mapping[str, object]) -> tuple[str | None, object]:
    """A row's ticket: ``(text, None)``, ``(None, messages)``, or raise when it is neither or both.

    Raises:
        InputError: both ``text`` and ``messages``, or neither (as a string / a list).
    """
    has_text, has_messages = obj.get("text") is not None, obj.get("messages") is not None
    if has_text and has_messages:
        raise InputError("the row has both 'text' and 'messages'; give one (a thread's text is its messages)")
    if has_messages:
        return None, obj["messages"]
    body = obj.get("text")
    if not isinstance(body, str):
        raise InputError("field 'text' is missing or not a string (or give 'messages': [{'role', 'text'}, ...])")
    return body, None
