"""What a scoring engine offers the layers above it: the app, ``serve``, the CLI, the session, eval, bench.

:class:`~triage.scoring.engine.Engine` is the real one (llama.cpp); :class:`~triage.scoring.lazy.LazyEngine`
loads the weights on first use, and the tests' ``FakeEngine`` streams scripted events. Front ends type
against :class:`ScoringEngine`, never against ``Any`` or a concrete engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from triage.domain.pack import Pack
from triage.domain.result import ModelInfo, TicketResult
from triage.domain.ticket import Ticket

if TYPE_CHECKING:  # annotations only: importing the protocol loads no engine (nor llama.cpp)
    from triage.errors import TriageError
    from triage.scoring.decide import Calibrator
    from triage.scoring.head import Head
    from triage.scoring.options import ScoreOptions
    from triage.scoring.prefill_result import PrefillResult
    from triage.scoring.prompt import PromptBuilder, PromptFormat
    from triage.scoring.readout import ReadoutKind
    from triage.scoring.run import Progress, RawReadouts, ScoreEvent, TicketScored
    from triage.scoring.schedule import Schedule
    from triage.scoring.speed import Speed
    from triage.scoring.tokenizer import Tokenizer


class ModelIdentity(Protocol):
    """What the policy reads of the model: an :class:`~triage.scoring.engine.Engine`, or what Ray nodes reported."""

    @property
    def sha256(self) -> str: ...

    def format_for(self, kind: str) -> PromptFormat: ...


@runtime_checkable
class ScoringEngine(Protocol):
    """One loaded model that scores tickets against packs (its calls are serialised by the engine)."""

    name: str
    sha256: str
    stand_in: bool
    model_path: Path

    @property
    def n_ctx(self) -> int:
        """The context size in tokens."""
        ...

    @property
    def model_info(self) -> ModelInfo:
        """The ``model`` object of the result schema (JSON: name, path, sha256, stand_in...)."""
        ...

    def format_for(self, kind: str = ...) -> PromptFormat:
        """This model's prompt format (its ``id`` keys stored prefixes, heads and calibrations)."""
        ...

    def stable_key(self, pack: Pack, kind: str = ...) -> str:
        """Names the stable block's cached state: model, prompt format, pack."""
        ...

    def score(
        self,
        ticket: Ticket | str,
        pack: Pack,
        options: ScoreOptions | None = None,
        *,
        cancel: Callable[[], bool] | None = None,
        calibration: Calibrator | None = None,
        head: Head | None = None,
        features: bool = False,
        schedule: Schedule | None = None,
        readout: ReadoutKind | None = None,
        progress: Callable[[Progress], None] | None = None,
    ) -> Iterator[ScoreEvent]:
        """Score one ticket, yielding ``Prefilled``, ``CriterionScored``... then ``TicketScored``.

        ``schedule`` and ``readout`` are the seams (default the product's: fanout, the label readout)."""
        ...

    def score_many(
        self,
        tickets: Iterable[Ticket],
        pack: Pack,
        options: ScoreOptions | None = None,
        *,
        calibration: Calibrator | None = None,
        head: Head | None = None,
        features: bool = False,
    ) -> Iterator[tuple[Ticket, TicketScored | TriageError]]:
        """Score a backlog one ticket per decode: ``(ticket, TicketScored or the TriageError that stopped it)``."""
        ...

    def prefill(self, ticket: Ticket | str, pack: Pack, *, cancel: Callable[[], bool] | None = None) -> PrefillResult:
        """Compute ``ticket``'s prompt up to its tails and keep it, so that its score costs only the rest."""
        ...

    def score_ticket(self, ticket: Ticket | str, pack: Pack, options: ScoreOptions | None = None) -> TicketResult:
        """Score one ticket and return only the final result."""
        ...

    def raw_readouts(
        self, ticket: Ticket | str, pack: Pack, options: ScoreOptions | None = None, **kw: Any
    ) -> tuple[TicketResult, RawReadouts]:
        """Score and also return each criterion's raw readouts: ``{criterion id: [(order, log-probs, coverage)]}``
        (``kw``: as :meth:`score`'s)."""
        ...

    def forget(self, ticket_id: str | None = None) -> None:
        """Drop the kept state of one ticket (None: of all)."""
        ...

    def close(self) -> None:
        """Free the model."""
        ...


class AppEngine(ScoringEngine, Protocol):
    """What the app needs beyond scoring: the tokenizer (its live token count), the prompt builder, and the
    rate measured over the last scores (its "about N s")."""

    speed: Speed

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer."""
        ...

    def builder(self, pack: Pack, readout: ReadoutKind | str = ...) -> PromptBuilder:
        """The prompt builder for ``pack``."""
        ...


Cancel = Callable[[], bool]
"""A caller's cancel check: True stops the score between decodes or inside one."""
