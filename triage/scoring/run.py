"""One ticket being scored: the run context a schedule works on, and the events it yields.

A :class:`Run` carries everything one score needs and gathers: the ticket's prompts,
the readout and its reader, the token counts and timing, the cancel check, and each criterion's raw
readouts as they come in. Schedules (:mod:`triage.scoring.schedule`) fill it; at the end
it makes the ticket's result (:meth:`Run.ticket_result`), which the engine yields as :class:`TicketScored`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from triage.domain.pack import Pack
from triage.domain.result import CriterionResult, ModelInfo, ThreadInfo, TicketResult, Timing, Tokens
from triage.domain.thread import Message
from triage.domain.ticket import Ticket
from triage.model.native import Cancelled
from triage.scoring.decide import Decider
from triage.scoring.prompt import TicketPrompts
from triage.scoring.prompt_spec import PromptSpec
from triage.scoring.readout import LABEL, Reader, Reading, Readings, ReadoutKind

# criterion id -> [(order, position log-probs, coverage), ...]
RawReadouts = dict[str, list[tuple[tuple[int, ...], np.ndarray, float]]]


@dataclass
class Prefilled:
    """The prefix is in the cache; tails come next."""

    prompts: TicketPrompts
    tokens: Tokens
    prefill_ms: float
    criteria: int


@dataclass
class Progress:
    """How far one score's decoding has got, told while a decode runs (``score(..., progress=...)``).

    ``phase`` is ``stable`` while the pack's stable block is computed (once per pack and model,
    when it is neither resident nor stored) and ``ticket`` for the rest: the ticket's tokens and
    the tails, ``total`` being the tokens this score evaluates (``Tokens.evaluated``, less a
    stable block computed in it).
    """

    phase: str
    done: int
    total: int

    @property
    def share(self) -> float:
        """``done`` as a share of ``total`` (1.0 for nothing to do)."""
        return min(1.0, self.done / self.total) if self.total else 1.0


class Meter:
    """Adds up the progress of the decodes of one phase and tells it as :class:`Progress`."""

    def __init__(self, phase: str, total: int, tell: Callable[[Progress], None]) -> None:
        self.phase, self.total, self.tell = phase, total, tell
        self.base = 0  # tokens of this phase's finished decodes

    def report(self, done: int, of: int) -> None:
        """One decode's ``(done, of)`` (:meth:`triage.model.native.NativeModel.decode`'s ``progress``)."""
        self.tell(Progress(self.phase, min(self.total, self.base + done), self.total))
        if done >= of:
            self.base += of


@dataclass
class CriterionScored:
    """One criterion is done (streamed as soon as it is)."""

    result: CriterionResult


@dataclass
class TicketScored:
    """The whole ticket is done (or was cancelled: ``result.complete`` is False).

    ``readouts`` and ``features`` are what eval and ``triage learn`` read besides the
    result: each criterion's raw per-ordering readouts, and (label readout, when asked)
    the answer position's features. They are not part of the saved result.
    """

    result: TicketResult
    readouts: RawReadouts = field(default_factory=dict)
    features: dict[str, np.ndarray] = field(default_factory=dict)


ScoreEvent = Prefilled | CriterionScored | TicketScored  # Progress is told through a callback, inside decodes


@dataclass
class Run:
    """What one score of one ticket needs and gathers.

    Args:
        prompts: the ticket's prompts (only the chosen criteria's).
        reader: how the tails are decoded and read.
        decider: turns a criterion's readouts into its result.
        stop: the caller's cancel check (None: nothing to ask, so no abort callback either).
        stable_key: names the stable block's stored state.
        stable_note: why the stable block changed since the last one, said if its prefill is paid.
        ticket_id: names the ticket's kept state (a thread that grows comes back under it).
        messages: the ticket's messages (a plain ticket: one).
        on_progress: told how far the decodes have got (None: nobody asked).
        readout: how a criterion's readings combine, and what the result calls them (the engine's readout seam).
    """

    prompts: TicketPrompts
    reader: Reader
    decider: Decider
    stop: Callable[[], bool] | None
    stable_key: str
    stable_note: str | None = None
    ticket_id: str | None = None
    messages: tuple[Message, ...] = ()
    reuse: ThreadInfo = field(default_factory=ThreadInfo)
    tokens: Tokens = field(default_factory=Tokens)
    timing: Timing = field(default_factory=Timing)
    warnings: list[str] = field(default_factory=list)
    stable_ready: bool = False  # sequence 0 starts with the whole stable block
    accs: dict[int, Readings] = field(default_factory=dict)
    results: dict[int, CriterionResult] = field(default_factory=dict)
    # criteria whose features are not handed back: read at the shared position when the caller did not
    # ask for that position (the history keeps features as tail features; see triage.scoring.cue)
    unreturned: frozenset[int] = frozenset()
    on_progress: Callable[[Progress], None] | None = None
    meter: Meter | None = None
    readout: ReadoutKind = LABEL

    def measure(self, phase: str, total: int) -> Callable[[int, int], None] | None:
        """Start telling ``phase``'s progress over ``total`` tokens; what its decodes report to (None:
        nobody listens)."""
        if self.on_progress is None:
            self.meter = None
            return None
        self.meter = Meter(phase, total, self.on_progress)
        return self.meter.report

    @property
    def progress(self) -> Callable[[int, int], None] | None:
        """What a decode of the current phase reports to (None: nobody listens)."""
        return self.meter.report if self.meter is not None else None

    def plan(self) -> Callable[[int, int], None] | None:
        """The ticket's tokens and tails are known (after the prefix's cached part is): count them as
        ``tokens.evaluated`` and start the ``ticket`` phase (those tokens, but a stable block computed
        in this score: that was the ``stable`` phase)."""
        self.tokens.evaluated = (self.tokens.prefix - self.tokens.prefix_cached) + self.tokens.tails
        computed = self.tokens.stable - self.tokens.stable_cached if self.stable_ready else 0
        return self.measure("ticket", self.tokens.evaluated - computed)

    @property
    def chosen(self) -> list[int]:
        """The criteria scored, in pack order."""
        return sorted({s.criterion for s in self.prompts.prompts})

    def check(self) -> None:
        """Raise :class:`~triage.model.native.Cancelled` when the caller asked to stop."""
        if self.stop is not None and self.stop():
            raise Cancelled()

    def record(self, spec: PromptSpec, read: Reading, cost: tuple[float, int]) -> None:
        """Keep ``spec``'s reading and its cost ``(ms, tokens)``."""
        acc = self.accs.setdefault(spec.criterion, Readings())
        acc.orders.append(spec.order)
        acc.reads.append(read)
        acc.ms += cost[0]
        acc.tokens += cost[1]

    def done(self, ci: int) -> CriterionScored:
        """Decide criterion ``ci`` from its readouts; the event that streams it."""
        acc = self.accs[ci]
        answer = self.readout.combine(self.decider.pack.criteria[ci].id, acc)
        self.results[ci] = self.decider.result(ci, acc, answer, self.reader)
        return CriterionScored(self.results[ci])

    def prefilled(self) -> Prefilled:
        """The event saying the prefix is in."""
        return Prefilled(self.prompts, self.tokens, self.timing.prefill_ms, len(self.chosen))

    def count_tokens(self) -> Tokens:
        """The token counts known before decoding: prefix, stable block, ticket, tails, whole prompts."""
        prompts = self.prompts
        return Tokens(
            prefix=len(prompts.prefix),
            stable=len(prompts.stable),
            ticket=prompts.ticket_tokens,
            tails=sum(len(prompts.tail(s)) + self.reader.extra_tokens(s) for s in prompts.prompts),
            full_prompts=prompts.full_tokens,
        )

    def ticket_result(
        self, ticket: Ticket, pack: Pack, how: tuple[ModelInfo, str, str], complete: bool
    ) -> TicketResult:
        """The final result of this run; ``how`` is the model's info, the prompt format id and the schedule's name."""
        model, prompt_format, mode = how
        head = self.decider.head
        applied = head is not None and any(head.covers(pack.criteria[ci].id) for ci in self.chosen)
        return TicketResult(
            ticket_id=ticket.id,
            ticket_sha256=ticket.sha256,
            model=model,
            pack={"name": pack.name, "version": pack.version, "hash": pack.hash},
            prompt_format=prompt_format,
            mode=mode,
            orderings=self.readout.read_as.orderings,
            readout=self.readout.read_as.readout,
            prior=self.readout.read_as.prior,
            criteria=[self.results[ci] for ci in sorted(self.results)],
            timing=self.timing,
            tokens=self.tokens,
            warnings=self.warnings,
            calibration=self.decider.calibration.name if self.decider.calibration is not None else None,
            head=head.name if applied and head is not None else None,
            complete=complete,
            created_at=time.time(),
            thread=self.reuse,
        )

    def raw(self, ids: list[str]) -> tuple[RawReadouts, dict[str, np.ndarray]]:
        """Per criterion id (``ids[ci]``) the raw readouts and, when gathered, the features."""
        raw: RawReadouts = {}
        feats: dict[str, np.ndarray] = {}
        for ci, acc in sorted(self.accs.items()):
            raw[ids[ci]] = [(o, r.position_logprobs, r.coverage) for o, r in zip(acc.orders, acc.reads, strict=True)]
            if acc.reads and acc.reads[0].features is not None and ci not in self.unreturned:
                feats[ids[ci]] = acc.reads[0].features
        return raw, feats
