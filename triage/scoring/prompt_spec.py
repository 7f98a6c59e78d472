"""One full prompt of a ticket: which criterion, its options' order, its tokens (built by
:mod:`triage.scoring.prompt`, decoded by a schedule, read by a readout)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PromptSpec:
    """One full prompt of a ticket: a criterion asked with its options in one order."""

    criterion: int  # index into pack.criteria
    order: tuple[int, ...]  # order[j] = option index shown at letter j
    tokens: tuple[int, ...]
