"""``GET /v1/tickets``' response, bounded: each ticket summarised, the whole one at ``GET /v1/tickets/{id}``.

A listing shows what a list needs, never a thread of thousands of messages: of a thread, the first
:data:`FIRST` message and the last :data:`LAST` (``message_count`` says how many it has,
``messages_left_out`` how many are not shown), and every text (a plain ticket's, each message's)
at most :data:`TEXT_CHARS` characters (``cut``: true on what was shortened). ``summarised`` is
true when anything was left out or cut; ``GET /v1/tickets/{id}`` then gives the ticket whole. So
a listing of ``limit`` tickets holds at most ``limit * (FIRST + LAST + 1)`` texts of
:data:`TEXT_CHARS` characters besides each ticket's result and labels (whose size the pack bounds).
"""

from __future__ import annotations

from collections.abc import Mapping

FIRST = 1  # a thread's first messages shown in a listing (what the ticket was about)
LAST = 3  # and its last (where it stands)
TEXT_CHARS = 1000  # characters of one listed text


def _cut(text: str) -> tuple[str, bool]:
    return (text, False) if len(text) <= TEXT_CHARS else (text[:TEXT_CHARS], True)


def summarise(ticket: Mapping[str, object]) -> dict[str, object]:
    """``ticket`` (:func:`triage.serve.tickets.recent_tickets`' entry, whole) as a listing shows it."""
    out = dict(ticket)
    whole = ticket.get("text")
    text, cut = _cut(whole if isinstance(whole, str) else "")
    out["text"] = text
    summarised = cut
    if cut:
        out["text_cut"] = True
    messages = ticket.get("messages")
    if isinstance(messages, list):  # a thread (None: a plain ticket)
        n = len(messages)
        shown = messages if n <= FIRST + LAST else [*messages[:FIRST], *messages[n - LAST :]]
        listed = []
        for m in shown:
            m_text, m_cut = _cut(m["text"])
            listed.append({**m, "text": m_text, **({"cut": True} if m_cut else {})})
            summarised = summarised or m_cut
        out["messages"] = listed
        out["message_count"] = n
        out["messages_left_out"] = n - len(shown)
        summarised = summarised or n > len(shown)
    out["summarised"] = summarised
    return out


def summarise_listing(listing: Mapping[str, object]) -> dict[str, object]:
    """A whole listing (``{"history", "tickets"}``) with every ticket :func:`summarise`\\ d."""
    tickets = listing["tickets"]
    if not isinstance(tickets, list):
        raise TypeError(f"a listing's tickets are a list, not {type(tickets).__name__}")
    return {**listing, "tickets": [summarise(t) for t in tickets]}
