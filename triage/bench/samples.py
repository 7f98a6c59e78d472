"""Picking a bench run's samples: by mode, a ticket's first result, per-ticket medians."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from triage.bench.stats import median

if TYPE_CHECKING:
    from triage.bench.runner import Sample
    from triage.domain.result import TicketResult


def by_mode(samples: Iterable[Sample], mode: str) -> list[Sample]:
    """The samples of one mode, in run order."""
    return [s for s in samples if s.mode == mode]


def per_ticket_ms(samples: list[Sample]) -> dict[str, dict[str, float]]:
    """{mode: {ticket id: median total ms over repeats}}."""
    acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        acc[s.mode][s.ticket.id].append(s.result.timing.total_ms)
    return {m: {t: median(v) for t, v in d.items()} for m, d in acc.items()}


def first(samples: list[Sample], mode: str, ticket_id: str) -> TicketResult | None:
    """The first repeat's result of ``ticket_id`` in ``mode``, or None."""
    for s in samples:
        if s.mode == mode and s.ticket.id == ticket_id and s.rep == 0:
            return s.result
    return None
