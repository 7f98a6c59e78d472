"""The shared read position: one short fixed cue after the ticket that every learned criterion reads.

A learned head (:mod:`triage.scoring.head`) reads a linear image of the hidden state; it does not
need its criterion's question asked in words. With a head fitted on the *shared* position, every
criterion it covers is read at the last token of one cue that follows the ticket, and the ticket
costs its own tokens plus the cue's instead of one question tail per criterion. Criteria without
such a head (zero-shot, calibrated) keep their tails, in the same decode.

How it fits the schedules without changing them: each shared criterion keeps a
:class:`~triage.scoring.prompt.PromptSpec`, but only the first (the *carrier*) has a tail, the
cue; the others have none and occupy no sequence. :class:`SharedReader` wraps the label reader:
the carrier's read keeps the cue's logits and every other shared criterion is read from them. The
carrier comes first in prompt order, so serial, fanout (whatever its batches) and bench's full decode the
cue before any criterion reads it.

A read position is named ``tail`` (each criterion's own question) or ``shared:CUE``; heads record it
(``Head.read``) and are applied only at the position they were fitted on.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from triage.errors import TriageError
from triage.model.seq import Seq
from triage.scoring.readout import LabelReader, Reader, Reading, read

if TYPE_CHECKING:
    from triage.domain.pack import Pack
    from triage.scoring.prompt import PromptBuilder, TicketPrompts
    from triage.scoring.prompt_spec import PromptSpec

TAIL = "tail"
SHARED_KIND = "shared"  # what a result's ``readout`` says of a criterion read at the shared position

# The cue after the ticket block, as text (tokenized with the ticket, as a tail is), and whether the
# prompt's fixed suffix (close the user turn, open the assistant's, ``Answer:``) follows it.
CUES: dict[str, tuple[str, bool]] = {
    "answer": ("", True),  # the answer position of a tail, with no question: ticket, then ``Answer:``
    "end": ("", False),  # the ticket block's own last token: no cue at all (measured worse: docs/quality.md)
}
DEFAULT_CUE = "answer"  # chosen by measurement: docs/quality.md, "The shared read position"
READS = (TAIL, *(f"shared:{c}" for c in CUES))


def check_read(read: str) -> str:
    """``read`` when it names a read position this triage knows (``tail`` or ``shared:CUE``).

    Raises:
        TriageError: any other name (exit code 2).
    """
    if read == "shared":
        return f"shared:{DEFAULT_CUE}"
    if read not in READS:
        raise TriageError(
            f"unknown read position {read!r}; use {', '.join(READS)} (or shared: {DEFAULT_CUE})", exit_code=2
        )
    return read


def cue_name(read: str) -> str | None:
    """The cue of a ``shared:CUE`` read position (None for ``tail``)."""
    return read.split(":", 1)[1] if read.startswith("shared:") else None


def cue_tokens(builder: PromptBuilder, ticket_text: str, cue: str) -> tuple[int, ...]:
    """The whole prompt that ends at the shared read position: stable block, ticket block, cue."""
    text, suffix = CUES[cue]
    return builder.cue_tokens(ticket_text, text, suffix=suffix)


def share(
    prompts: TicketPrompts, builder: PromptBuilder, shared: list[int], cue: str
) -> tuple[TicketPrompts, int | None]:
    """``prompts`` with the criteria ``shared`` read at the cue: (new prompts, carrier criterion).

    The prefix is worked out again (the longest common token prefix of the remaining tails and
    the cue's prompt, at least one token short of the shortest) and verified, as the builder does.
    """
    from triage.scoring.prompt import common_prefix
    from triage.scoring.prompt_spec import PromptSpec

    shared = sorted(set(shared) & {s.criterion for s in prompts.prompts})
    if not shared:
        return prompts, None
    full = cue_tokens(builder, prompts.ticket_text, cue)
    kept = [s for s in prompts.prompts if s.criterion not in shared]
    seqs = [s.tokens for s in kept] + [full]
    prefix = common_prefix(seqs)
    prefix = prefix[: min(len(prefix), min(len(t) for t in seqs) - 1)]
    if prefix[: len(prompts.stable)] != prompts.stable:
        raise AssertionError("stable block is not a token prefix of the cue's prompt")
    specs: list[PromptSpec] = []
    carrier = shared[0]
    for ci in sorted({s.criterion for s in prompts.prompts}):
        if ci in shared:
            n = len(builder.pack.criteria[ci].options)
            specs.append(PromptSpec(ci, tuple(range(n)), full if ci == carrier else prefix))
        else:
            specs += [s for s in kept if s.criterion == ci]
    for s in specs:
        if s.tokens[: len(prefix)] != prefix:
            raise AssertionError("shared prefix is not a token prefix of every prompt")
    return replace(prompts, prefix=prefix, prompts=specs), carrier


@dataclass(frozen=True)
class SharedReader:
    """The label reader, with some criteria read at the shared cue (one decode, one position).

    Made per score (:meth:`for_run`): ``slot`` keeps the cue's logits between the carrier's read
    and the other shared criteria's.
    """

    inner: LabelReader
    shared: frozenset[int]
    carrier: int
    slot: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def reads_features(self) -> bool:
        return self.inner.reads_features

    @property
    def takes_head(self) -> bool:
        return self.inner.takes_head

    @property
    def plans(self):  # noqa: ANN201 - the inner reader's answer plans
        return self.inner.plans

    def kind(self, ci: int) -> str:
        return SHARED_KIND if ci in self.shared else self.inner.kind(ci)

    def width(self, spec: PromptSpec) -> int:
        if spec.criterion in self.shared:
            return 1 if spec.criterion == self.carrier else 0
        return self.inner.width(spec)

    def extra_tokens(self, spec: PromptSpec) -> int:
        return 0 if spec.criterion in self.shared else self.inner.extra_tokens(spec)

    def pieces(self, key: object, spec: PromptSpec, tail: tuple[int, ...], at: tuple[int, int]) -> list[Seq]:
        if spec.criterion == self.carrier:
            return [Seq((key, "cue"), at[1], at[0], tail)]
        if spec.criterion in self.shared:
            return []
        return self.inner.pieces(key, spec, tail, at)

    def read(self, key: object, spec: PromptSpec, out: dict[object, np.ndarray]) -> Reading:
        ci = spec.criterion
        if ci not in self.shared:
            return self.inner.read(key, spec, out)
        if ci == self.carrier:
            self.slot["logits"] = out[(key, "cue")]
        logits = self.slot["logits"]
        got = read(logits, self.inner.plans[ci].first)  # the answers' first tokens at the cue: the head's K inputs
        if self.inner.feature_ids is None:
            return got
        return replace(got, features=logits[self.inner.feature_ids].astype(np.float32))

    def low_coverage(self, coverage: float) -> str:
        return self.inner.low_coverage(coverage)

    def warns_coverage(self, ci: int) -> bool:
        """No coverage warning at the cue: no question was asked there, so the answers' mass means nothing."""
        return ci not in self.shared

    def with_features(self, ids: np.ndarray | None) -> SharedReader:
        return replace(self, inner=self.inner.with_features(ids), slot={})

    @classmethod
    def for_run(cls, inner: LabelReader, shared: list[int], carrier: int) -> SharedReader:
        return cls(inner, frozenset(shared), carrier, {})


def shared_read(
    prompts: TicketPrompts, reader: Reader, ctx: tuple[PromptBuilder, Pack, object], read: str | None
) -> tuple[TicketPrompts, Reader]:
    """The engine's hook: ``(prompts, reader)`` with the criteria read at the shared position, if any.

    Args:
        ctx: ``(builder, pack, head)``; the head (or None) says where it was fitted.
        read: the position asked for (checked against the head by the caller), None: the head's.

    The criteria read at the shared position are those the head covers, or, with no head and
    ``read`` shared (``triage learn --read shared``, eval), every chosen criterion.

    Raises:
        TriageError: the shared position with a readout other than label.
    """
    builder, pack, head = ctx
    where = read or str(getattr(head, "read", TAIL))  # a Head's read is a str
    cue = cue_name(where)
    if cue is None:
        return prompts, reader
    if not isinstance(reader, LabelReader):
        raise TriageError("the shared read position reads options by name: use the label readout", exit_code=2)
    chosen = sorted({s.criterion for s in prompts.prompts})
    ids = [c.id for c in pack.criteria]
    shared = [ci for ci in chosen if head is None or head.covers(ids[ci])]  # type: ignore[attr-defined]
    prompts, carrier = share(prompts, builder, shared, cue)
    if carrier is None:
        return prompts, reader
    return prompts, SharedReader.for_run(reader, shared, carrier)


def describe_read(read: str) -> str:
    """A read position in words, for messages."""
    return "each criterion's own question (tail)" if read == TAIL else f"the shared read position ({read})"
