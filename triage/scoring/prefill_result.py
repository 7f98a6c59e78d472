"""What a prefill did: the ticket's prompt computed up to its tails, ahead of its score."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrefillResult:
    """One prefill of a ticket's prompt (everything before its tails).

    Args:
        tokens: the prompt's tokens before the tails (stable block and ticket block).
        cached: how many of them were already computed when the prefill began.
        evaluated: how many it computed.
        ms: its wall time.
        complete: False when it was cancelled before the end (what it computed is kept).
    """

    tokens: int
    cached: int
    evaluated: int
    ms: float
    complete: bool = True
