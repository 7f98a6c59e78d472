"""What a scoring engine offers the layers above it: the app, ``serve``, the CLI, the session, eval, bench.

:class:`~triage.scoring.engine.Engine` is the real one (llama.cpp); :class:`~triage.scoring.lazy.LazyEngine`
loads the weights on first use, and the tests' ``FakeEngine`` streams scripted events. Front ends type
against :class:`ScoringEngine`, never against ``Any`` or a concrete engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from triage.domain.pack import Pack
from triage.domain.result import TicketResult
from triage.domain.ticket import Ticket


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
    def model_info(self) -> dict[str, Any]:
        """The ``model`` object of the result schema."""
        ...

    def format_for(self, kind: str = ...) -> Any:
        """This model's prompt format (its ``id`` keys stored prefixes, heads and calibrations)."""
        ...

    def stable_key(self, pack: Pack, kind: str = ...) -> str:
        """Names the stable block's cached state: model, prompt format, pack."""
        ...

    def score(self, ticket: Ticket | str, pack: Pack, options: Any = None, **kw: Any) -> Iterator[Any]:
        """Score one ticket, yielding ``Prefilled``, ``CriterionScored``... then ``TicketScored``."""
        ...

    def score_many(self, tickets: Any, pack: Pack, options: Any = None, **kw: Any) -> Iterator[tuple[Ticket, Any]]:
        """Score a backlog one ticket per decode: ``(ticket, TicketScored or the TriageError that stopped it)``."""
        ...

    def score_ticket(self, ticket: Ticket | str, pack: Pack, options: Any = None, **kw: Any) -> TicketResult:
        """Score one ticket and return only the final result."""
        ...

    def raw_readouts(self, ticket: Ticket | str, pack: Pack, options: Any) -> tuple[TicketResult, Any]:
        """Score and also return each criterion's raw readouts."""
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

    tokenizer: Any  # triage.scoring.tokenizer.Tokenizer
    speed: Any  # triage.scoring.speed.Speed

    def builder(self, pack: Pack, kind: str = ...) -> Any:
        """The prompt builder for ``pack`` (a :class:`~triage.scoring.prompt.PromptBuilder`)."""
        ...


Cancel = Callable[[], bool]
"""A caller's cancel check: True stops the score between decodes or inside one."""
