"""Token counts for the ticket box, computed in a worker thread. No Textual here.

Counting runs off the UI thread, but the ``tokenizers`` library holds the GIL
while it encodes one string, so a megabyte in one call would still stall the
UI for most of a second. Text is therefore encoded in whitespace-bounded
chunks (the count matches the whole-text count: Qwen's pre-tokenizer splits
before a space anyway), which lets the UI thread run between chunks.

With a loaded engine the count also says what scoring will cost: the tokens the
ticket's decode evaluates (the ticket cut to its budget, its block and every
criterion's tail) and, at the rate the engine measured on its last decodes
(:class:`~triage.scoring.speed.Speed`), about how many seconds that takes. Where
the last score of the pack measured them, its tails (a head read at the shared
position evaluates one short cue, not every question) and the thread's tokens it
kept (a reply evaluates only what is new) replace the builder's figures, so that
the tokens estimated are those the rate was measured on.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from triage.domain.pack import Pack
from triage.scoring.options import DEFAULT_READOUT
from triage.scoring.prompt import PromptBuilder, PromptFormat
from triage.scoring.speed import Speed
from triage.scoring.tokenizer import Tokenizer

CHUNK_CHARS = 16_384
QWEN3_FORMAT = PromptFormat("chat", think=True)  # the product model's format, for estimates before it loads

# Qwen3 builders per pack and readout, for estimates before the model loads.
_qwen3_builders: dict[tuple[str, str], PromptBuilder] = {}
# Per builder and option orders: the tokens a ticket's decode evaluates besides the ticket's own.
_overheads: weakref.WeakKeyDictionary[PromptBuilder, dict[str, int]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class TokenCount:
    """A ticket's size against the room it has in the context."""

    tokens: int
    budget: int
    n_ctx: int
    estimated: bool
    decode_tokens: int = 0  # what scoring it evaluates (stable block resident): the cut ticket, its block, the tails
    seconds: float | None = None  # at the engine's measured rate (None: no engine, or nothing measured yet)

    @property
    def over(self) -> bool:
        """The ticket will be shortened (its middle cut) to fit."""
        return self.tokens > self.budget


def chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    """Pieces of about ``size`` characters, each cut just before a space when there is one."""
    i = 0
    while i < len(text):
        j = min(len(text), i + size)
        if j < len(text):
            k = text.rfind(" ", i + 1, j)
            if k > i:
                j = k
        yield text[i:j]
        i = j


def count_tokens(tok: Tokenizer, text: str, cancelled: Callable[[], bool] = lambda: False) -> int | None:
    """Tokens of ``text``; None when ``cancelled()`` turned True part-way."""
    total = 0
    for piece in chunks(text):
        if cancelled():
            return None
        total += len(tok.encode(piece))
    return total


def ticket_budget(builder: PromptBuilder, n_ctx: int) -> int:
    """Tokens a ticket may have before the builder shortens it: the ticket budget, or less when
    ``n_ctx`` leaves less (:meth:`~triage.scoring.prompt.PromptBuilder.ticket_room`, the builder's own cut)."""
    return builder.ticket_room(n_ctx)


def decode_overhead(
    builder: PromptBuilder, orders: list[list[tuple[int, ...]]], n_ctx: int, tails: int | None = None
) -> int:
    """Tokens a ticket's decode evaluates besides the ticket's own (stable block resident): the ticket
    block's own text and every prompt's tail, measured on a one-character ticket with the builder itself.
    ``tails``: the tails a score of this pack evaluated (measured), in place of the builder's."""
    known = _overheads.setdefault(builder, {})
    key = f"{orders!r}@{n_ctx}"
    if key not in known:
        probe = builder.build("x", orders, n_ctx=n_ctx)
        known[key] = len(probe.prefix) - len(probe.stable) - probe.ticket_tokens
        known[key + ":tails"] = sum(len(probe.tail(s)) for s in probe.prompts)
    return known[key] + (known[key + ":tails"] if tails is None else tails)


def count_ticket(
    text: str,
    pack: Pack,
    orders: list[list[tuple[int, ...]]],
    *,
    builder: PromptBuilder | None,
    n_ctx: int,
    cancelled: Callable[[], bool] = lambda: False,
    readout: str = DEFAULT_READOUT,
    speed: Speed | None = None,
    tails: int | None = None,
    kept: int = 0,
) -> TokenCount | None:
    """Count a cleaned ticket with the engine's builder, or estimate with Qwen3's tokenizer.

    Args:
        text: the cleaned ticket text.
        pack: the active pack.
        orders: per criterion, the option orders that will be asked.
        builder: the loaded engine's prompt builder, or None before it loads.
        n_ctx: the context size (the engine's, or the configured one).
        cancelled: polled between chunks.
        readout: ``label`` or ``letter`` (for the estimate's prompt, before the model loads).
        speed: the loaded engine's measured rate, for :attr:`TokenCount.seconds`.
        tails: the tails the last score of this pack evaluated (None: the builder's, every question's).
        kept: ticket tokens whose state the engine kept from the thread's last score (not evaluated again).
    """
    estimated = builder is None
    if builder is None:
        from triage.scoring.tokenizer import qwen3_tokenizer

        builder = _qwen3_builders.get((pack.hash, readout))
        if builder is None:
            builder = _qwen3_builders[(pack.hash, readout)] = PromptBuilder(
                pack, QWEN3_FORMAT.with_readout(readout), qwen3_tokenizer()
            )
    n = count_tokens(builder.tok, text, cancelled)
    if n is None:
        return None
    budget = ticket_budget(builder, n_ctx)
    work = max(0, min(n, budget) - kept) + decode_overhead(builder, orders, n_ctx, tails)
    return TokenCount(n, budget, n_ctx, estimated, work, speed.seconds(work) if speed is not None else None)
