"""Messages the app's workers and widgets post, named in the past tense.

Scoring messages carry the id of the submission they belong to: the main
screen drops those of a submission that is no longer current, so a stale
result never overwrites a newer one (history still records it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from textual.message import Message

from triage.domain.result import CriterionResult, TicketResult, Tokens

if TYPE_CHECKING:
    from triage.scoring.head import Head
    from triage.scoring.prefill_result import PrefillResult


@dataclass
class ModelLoaded(Message):
    """The engine is up."""

    load: int  # which load this answers (older ones are stale)
    name: str
    stand_in: bool
    n_ctx: int
    notices: list[str]
    seconds: float


@dataclass
class ModelLoadFailed(Message):
    """No engine: the model is missing, unknown or broken."""

    load: int
    requested: str | None
    message: str
    hint: str | None
    first_run: bool = False  # nothing asked for and nothing installed: offer to get a model


@dataclass
class TicketEdited(Message):
    """The ticket text changed and then stayed still for a moment (debounced)."""


@dataclass
class TicketReadAhead(Message):
    """The ticket in the box was prefilled (read up to its tails) while the agent paused: ``text``, and what the
    prefill did."""

    text: str
    result: PrefillResult


@dataclass
class TicketPasted(Message):
    """A paste landed in the ticket box (auto-score listens). ``replaced``: it replaced the scored ticket's
    text (a new ticket; ctrl+z brings the old text back)."""

    replaced: bool = False


@dataclass
class TokensCounted(Message):
    """The ticket's token count, computed off the UI thread.

    Attributes:
        stamp: when the count was asked for (``time.monotonic()``); older counts are dropped.
        tokens: tokens of the cleaned ticket text.
        budget: tokens the ticket may have before it is shortened.
        n_ctx: the context size the budget is for.
        estimated: counted with Qwen3's tokenizer because the model is not loaded yet.
        seconds: about how long scoring it takes at the engine's measured rate (None: not known yet).
    """

    stamp: float
    tokens: int
    budget: int
    n_ctx: int
    estimated: bool
    seconds: float | None = None

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TokensCounted)


@dataclass
class TicketPrefilled(Message):
    """The engine has the ticket's prefix in its cache; criteria come next."""

    submission: int
    tokens: Tokens
    prefill_ms: float
    criteria: int


@dataclass
class DecodeProgressed(Message):
    """How far the engine's decode has got (:class:`triage.scoring.run.Progress`), told while it runs.

    ``phase``: ``stable`` (the pack's stable block, once) or ``ticket``; ``done`` of ``total`` tokens.
    """

    submission: int
    phase: str
    done: int
    total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DecodeProgressed) and message.submission == self.submission


@dataclass
class CriterionDecided(Message):
    """One criterion's decision, streamed as soon as it is ready."""

    submission: int
    result: CriterionResult


@dataclass
class TicketDecided(Message):
    """The ticket is done (``result.complete`` is False when it was cancelled); its score worker has kept it in
    the history already (what a learned head reads too)."""

    submission: int
    result: TicketResult


@dataclass
class HeadLearned(Message):
    """The background re-fit stored a new head (``head`` None: nothing could be learned; ``why`` says)."""

    head: Head | None
    labels: int
    seconds: float
    why: str | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class ScoreFailed(Message):
    """Scoring stopped with an error."""

    submission: int
    message: str
