"""Agreement between the decisions shown and the agents' answers, measured prequentially.

Each labelled (ticket, criterion) is judged on the decision that was shown
*before* its first answer (see :mod:`triage.store.labels`): a head is never
judged on the labels it was fitted on, because no label existed when the
decision was shown. The answer is the newest one (an agent may fix a slip).

Per criterion: how many labels, agreement overall and over the newest
:data:`RECENT`, the same by what decided (learned, calibrated, zero-shot), the
trend: agreement in consecutive blocks of :data:`BLOCK` labels, oldest first,
and the agreement balanced over the answers' options (the mean, over the options
agents answered, of how often the decision shown was that option): a readout that
always shows the commonest option agrees as often as agents pick it, and is at
chance (1/K) balanced.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from triage.store.labels import Judged

RECENT = 50
BLOCK = 20
SOURCES = ("learned", "starter", "calibrated", "zero-shot")


@dataclass(frozen=True)
class Rate:
    """``agree`` of ``n`` decisions agreed with the answer."""

    n: int
    agree: int

    @property
    def rate(self) -> float | None:
        return self.agree / self.n if self.n else None


@dataclass
class CriterionAgreement:
    """Agreement on one criterion of one pack."""

    pack: str
    criterion: str
    labels: int
    corrections: int
    overall: Rate
    recent: Rate
    by_source: dict[str, Rate] = field(default_factory=dict)
    trend: list[Rate] = field(default_factory=list)  # consecutive blocks of BLOCK labels, oldest first
    balanced: float | None = None  # agreement averaged over the options answered

    def to_dict(self) -> dict[str, object]:
        def rate(r: Rate) -> dict[str, object]:
            return {"n": r.n, "agree": r.agree, "rate": r.rate}

        d = asdict(self)
        d["overall"], d["recent"] = rate(self.overall), rate(self.recent)
        d["by_source"] = {k: rate(v) for k, v in self.by_source.items()}
        d["trend"] = [rate(r) for r in self.trend]
        d["recent_window"], d["block"] = RECENT, BLOCK
        return d


def _rate(items: Sequence[Judged]) -> Rate:
    return Rate(len(items), sum(j.shown_option == j.option for j in items))


def balanced_rate(items: Sequence[Judged]) -> float | None:
    """Agreement per option answered, averaged over those options (None: no labels)."""
    by_answer: dict[str, list[Judged]] = {}
    for j in items:
        by_answer.setdefault(j.option, []).append(j)
    rates = [_rate(v).rate for v in by_answer.values()]
    return sum(r for r in rates if r is not None) / len(rates) if rates else None


def agreement(judged: Iterable[Judged], *, recent: int = RECENT, block: int = BLOCK) -> list[CriterionAgreement]:
    """Per (pack, criterion), in order of first appearance; ``judged`` oldest first."""
    groups: dict[tuple[str, str], list[Judged]] = {}
    for j in judged:
        if j.shown_option is None:
            continue  # nothing was shown: nothing to agree with
        groups.setdefault((j.pack_name or "?", j.criterion), []).append(j)
    out = []
    for (pack, crit), items in groups.items():
        by_source = {s: _rate([j for j in items if j.shown_source == s]) for s in SOURCES}
        out.append(
            CriterionAgreement(
                pack=pack,
                criterion=crit,
                labels=len(items),
                corrections=sum(j.shown_option != j.option for j in items),
                overall=_rate(items),
                recent=_rate(items[-recent:]),
                by_source={s: r for s, r in by_source.items() if r.n},
                trend=[_rate(items[i : i + block]) for i in range(0, len(items), block)],
                balanced=balanced_rate(items),
            )
        )
    return out
