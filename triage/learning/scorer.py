"""Labelled rows scored into what a head is fitted on: each ticket's readouts and answer-position features.

:class:`Scorer` gets a ticket's :class:`~triage.learning.cache.Outcome` from the readout cache, or scores
it once and stores it; :func:`score_rows` runs it over rows; :func:`fit_inputs` assembles a head's
inputs (the one assembly ``triage learn``, the starter fit, the app's re-fit and eval share).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from triage.domain.pack import Criterion, Pack
from triage.domain.ticket import Ticket
from triage.errors import TriageError
from triage.learning.cache import CacheKey, Outcome, ReadoutCache, Reads
from triage.learning.labelled import BadRow, LabelledRow
from triage.scoring.cue import TAIL, check_read
from triage.scoring.head import FEATURES as FEATURES_KIND
from triage.scoring.options import DEFAULT_MODE, DEFAULT_ORDERINGS, DEFAULT_READOUT

if TYPE_CHECKING:
    from triage.domain.result import TicketResult
    from triage.scoring.engine import Engine
    from triage.scoring.prompt import PromptBuilder
    from triage.scoring.run import RawReadouts


class Scorer:
    """Gets each ticket's :class:`Outcome` from the cache, or scores it once and stores it.

    Args:
        engine: a loaded :class:`triage.scoring.engine.Engine`.
        pack: the criteria pack.
        cache: the readout cache.
        readout: ``label``, the product's (the lab's scorer reads the others: :mod:`triage.lab.scorer`).
    """

    def __init__(
        self, engine: Engine, pack: Pack, cache: ReadoutCache, readout: str = DEFAULT_READOUT, read: str = TAIL
    ) -> None:
        self.engine = engine
        self.pack = pack
        self.cache = cache
        self.readout = readout
        self.read = check_read(read)
        if self.read != TAIL and readout != "label":
            raise TriageError("the shared read position reads options by name: use --readout label", exit_code=2)
        self.orderings, self.mode = self.reading(readout)
        # The mode is part of the key (batch shapes round differently); serial keeps the bare orderings,
        # as every readout cached before the mode was recorded was scored serially. A shared read
        # position adds its name: every criterion is then read at the cue (triage.scoring.cue).
        how = self.orderings if self.mode == "serial" else f"{self.orderings}@{self.mode}"
        how += "" if self.read == TAIL else f"+{self.read}"
        # The attention kernels too, when they are not the ones every cached entry was computed with.
        attention = getattr(getattr(engine, "native", None), "attention", "flash")
        how += "" if attention == "flash" else f"+{attention}"
        self.key = CacheKey(engine.sha256, pack.hash, engine.format_for(readout).id, engine.n_ctx, how)
        self.features = False  # also get each criterion's answer-position features (learned heads)
        self.scored = 0
        self.scoring_s = 0.0

    def reading(self, readout: str) -> tuple[str, str]:
        """``(orderings, mode)`` of ``readout`` as this scorer scores it: the product's (``none``, ``fanout``) for the
        label readout, its one reading. The lab's scorer (:class:`triage.lab.scorer.LabScorer`) reads others.

        Raises:
            TriageError: another readout (the lab measures those).
        """
        if readout != DEFAULT_READOUT:
            raise TriageError(f"readout {readout!r} is the lab's: score it with triage.lab.scorer.LabScorer")
        return DEFAULT_ORDERINGS, DEFAULT_MODE

    def decode(self, ticket: Ticket, features: bool) -> tuple[TicketResult, RawReadouts, dict[str, np.ndarray]]:
        """Score ``ticket`` as the product does (with the answer position's features when asked, or when read
        at a shared cue)."""
        from triage.scoring.options import ScoreOptions

        if self.read != TAIL:
            return self.engine.readouts_and_features(ticket, self.pack, ScoreOptions(), read=self.read)
        if features:
            return self.engine.readouts_and_features(ticket, self.pack, ScoreOptions())
        result, raw = self.engine.raw_readouts(ticket, self.pack, ScoreOptions())
        return result, raw, {}

    def builder(self) -> PromptBuilder:
        """The prompt builder this scorer's prompts come from (for the budget's cut)."""
        return self.engine.builder(self.pack)

    def outcome(self, ticket: Ticket) -> tuple[Outcome, bool]:
        """(outcome, True when it came from the cache).

        With :attr:`features` set (the label readout only), the outcome also holds
        each criterion's answer-position features, cached beside the readouts; a
        ticket cached without them is scored again.
        """
        text_key = self.text_key(ticket)
        hit = self.cached(text_key)
        if hit is not None:
            return hit, True
        t0 = time.perf_counter()
        result, raw, feats = self.decode(ticket, self.features)
        if not self.features:
            feats = {}
        ms = (time.perf_counter() - t0) * 1000
        if not result.complete:
            raise TriageError(f"ticket {ticket.id} was not scored completely: {'; '.join(result.warnings)}")
        warnings = [w for w in result.warnings if not w.startswith("stable prefix changed")]
        out = Outcome(raw, warnings, ms, feats or None)
        self.store(text_key, out)
        self.scored += 1
        self.scoring_s += ms / 1000
        return out, False

    def text_key(self, ticket: Ticket) -> str:
        """What names ``ticket`` in the cache: the sha256 of its text as the prompts read it.

        That is the ticket's own sha256 when it fits the ticket budget (:data:`~triage.scoring.prompt.TICKET_TOKENS`),
        else the sha256 of the text after the budget's cut (:meth:`~triage.scoring.prompt.PromptBuilder.cut`): a
        readout is a function of the text scored, so a ticket cut to another budget is another entry, and one
        that no budget cuts is scored once for them all. Tokenizes the ticket (no weights are loaded for it).
        """
        import hashlib

        cut = self.builder().cut(ticket.text, self.engine.n_ctx, ticket.messages)
        return ticket.sha256 if cut.text == ticket.text else hashlib.sha256(cut.text.encode("utf-8")).hexdigest()

    def cached(self, sha256: str) -> Outcome | None:
        """The cached outcome of the text named ``sha256`` (:meth:`text_key`) under this scorer's key (with its
        features when :attr:`features` is set: one cached without them is a miss), or None."""
        wanted = (FEATURES_KIND, [c.id for c in self.pack.criteria]) if self.features else None
        return self.cache.get(self.key, sha256, wanted)

    def store(self, sha256: str, out: Outcome) -> None:
        """Cache ``out`` (and its features, if any) for the text named ``sha256`` (:meth:`text_key`) under this
        scorer's key."""
        self.cache.put(self.key, sha256, out)
        if out.features:
            self.cache.put_features(self.key, sha256, FEATURES_KIND, out.features)


@dataclass
class Scored:
    """Rows that were scored, their outcomes, and rows the engine could not score."""

    rows: list[LabelledRow] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    failed: list[BadRow] = field(default_factory=list)
    known: int = 0  # rows whose outcome was at hand (kept in the history), not scored

    @property
    def cut(self) -> int:
        """How many tickets had their middle cut to fit the context."""
        return sum(o.cut for o in self.outcomes)


class OutcomeSource(Protocol):
    """What :func:`score_rows` asks: a ticket's outcome and whether it came from a cache (a :class:`Scorer`, or
    the Ray workers' returns)."""

    def outcome(self, ticket: Ticket) -> tuple[Outcome, bool]: ...


def score_rows(
    scorer: OutcomeSource,
    rows: Sequence[LabelledRow],
    on_row: Callable[[bool], None] | None = None,
    known: dict[str, Outcome] | None = None,
) -> Scored:
    """Score every row; ``on_row(hit)`` is called after each (for a progress bar).

    ``known``: outcomes already at hand, by ticket sha256; those rows are not scored (a hit).
    """
    out = Scored()
    for row in rows:
        if known is not None and row.ticket.sha256 in known:
            out.rows.append(row)
            out.outcomes.append(known[row.ticket.sha256])
            out.known += 1
            if on_row:
                on_row(True)
            continue
        try:
            outcome, hit = scorer.outcome(row.ticket)
        except TriageError as exc:
            out.failed.append(BadRow(row.line, f"line {row.line} (id {row.id}): not scored: {exc.message}"))
            hit = False
        else:
            out.rows.append(row)
            out.outcomes.append(outcome)
        if on_row:
            on_row(hit)
    return out


def identity_read(reads: Reads) -> tuple[np.ndarray, float]:
    """The pack-order readout in option space (as float64), and its coverage.

    The pack order is the identity ordering, so its letter positions are the option indices already.
    """
    for order, lp, cov in reads:
        if tuple(order) == tuple(sorted(order)):
            out = np.empty(len(order), dtype=np.float64)
            out[np.asarray(order)] = lp
            return out, cov
    raise ValueError("the readouts hold no pack-order (identity) ordering")


def raw_readouts(criterion: Criterion, outcomes: Sequence[Outcome]) -> np.ndarray:
    """One criterion's pack-order log-probs over many outcomes, (n, k): what zero-shot decides from."""
    raw = [identity_read(out.readouts[criterion.id])[0] for out in outcomes]
    return np.asarray(raw).reshape((len(outcomes), len(criterion.options)))


def stack_features(outcomes: Sequence[Outcome], cid: str) -> np.ndarray:
    """One criterion's answer-position features over many outcomes, (n, F).

    Raises:
        TriageError: an outcome was scored without features.
    """
    if any(o.features is None or cid not in o.features for o in outcomes):
        raise TriageError("the learned variant needs each ticket's answer-position features; score with features on")
    return np.stack([o.features[cid] for o in outcomes])  # type: ignore[index]


def fit_inputs(
    pack: Pack, labels: Sequence[Any], outcomes: Sequence[Outcome]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, list[int]]]:
    """What a head is fitted on, per criterion with labels: ``(features, raw log-probs, gold option indices)``.

    ``labels[i]`` is row i's ``{criterion: option id}`` and ``outcomes[i]`` its score (eval's cache, a fresh
    score, or a history row's kept inputs through :func:`triage.learning.sources.kept_outcome`): the one
    assembly ``triage learn``, the app's re-fit and the learning-loop replay share.
    """
    features, logprobs, gold_idx = {}, {}, {}
    for crit in pack.criteria:
        have = [i for i, lab in enumerate(labels) if crit.id in lab]
        if not have:
            continue
        outs = [outcomes[i] for i in have]
        ids = [o.id for o in crit.options]
        features[crit.id] = stack_features(outs, crit.id)
        logprobs[crit.id] = raw_readouts(crit, outs)
        gold_idx[crit.id] = [ids.index(labels[i][crit.id]) for i in have]
    return features, logprobs, gold_idx
