"""Map an export's label values to a criterion's options: by id, label or alias, never by guess.

A value matches an option when, case and spacing ignored, it equals the option's id (as is,
or made readable: ``billing_and_payments`` = ``Billing and payments``), its label, or one of
its ``aliases``. A value that matches nothing is counted (:class:`Unmapped`), and the caller
decides (``--unmapped skip|error``) whether its rows are left out or the command stops.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from triage.domain.pack import Criterion, option_names, value_key

SHOW_UNMAPPED = 8


class OptionMatcher:
    """The options of one criterion, by every name a label value may use."""

    def __init__(self, criterion: Criterion) -> None:
        self.criterion = criterion
        self._by: dict[str, str] = {}
        for o in criterion.options:  # the first option that has a name keeps it
            for name in option_names(o):
                self._by.setdefault(value_key(name), o.id)

    def match(self, value: str) -> str | None:
        """The option id ``value`` names, or None."""
        return self._by.get(value_key(value))


@dataclass
class Unmapped:
    """Label values that matched no option, per criterion, with how many rows had each."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, criterion_id: str, value: str) -> None:
        """Count one row whose value for ``criterion_id`` matched no option."""
        self.counts.setdefault(criterion_id, Counter())[" ".join(value.split())] += 1

    def rows(self, criterion_id: str) -> int:
        """How many rows had an unmapped value for this criterion."""
        return sum(self.counts.get(criterion_id, Counter()).values())

    def __bool__(self) -> bool:
        return any(self.counts.values())

    def describe(self, criterion: Criterion, column: str) -> str:
        """One line: the unmapped values of a criterion, most frequent first, and its options."""
        c = self.counts.get(criterion.id, Counter())
        shown = ", ".join(f"{v!r} ({n})" for v, n in c.most_common(SHOW_UNMAPPED))
        more = f" and {len(c) - SHOW_UNMAPPED} more" if len(c) > SHOW_UNMAPPED else ""
        return (
            f"{sum(c.values())} row(s) of column {column!r} match no option of {criterion.id!r}: {shown}{more} "
            f"(options: {', '.join(o.id for o in criterion.options)})"
        )
