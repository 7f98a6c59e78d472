"""Scoring with the lab's options: the engine's seams filled from :class:`~triage.lab.options.LabOptions`.

:func:`seams` gives the readout strategy (the label readout or letters in the options' orderings,
with the content-free prior divided out when asked: :mod:`triage.lab.prior`) and the schedule
(``fanout`` or ``serial``); :func:`score` and the functions beside it pass them to the engine's
``score`` with the product's part of the options (``criteria``). ``LabOptions()`` scores exactly as
the product does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from triage.domain.pack import Pack
from triage.domain.result import TicketResult
from triage.domain.ticket import Ticket
from triage.lab.options import LabOptions
from triage.lab.prior import Prior, WithPrior, priors_of
from triage.lab.seams import plain_readout, schedule_for
from triage.scoring.readout import ReadoutKind
from triage.scoring.run import RawReadouts, ScoreEvent, TicketScored
from triage.scoring.schedule import Schedule

if TYPE_CHECKING:
    from triage.scoring.engine import Engine


def readout_for(engine: Engine, pack: Pack, options: LabOptions) -> ReadoutKind:
    """The readout strategy of ``options`` for ``engine`` and ``pack`` (a prior is computed on first use)."""
    plain = plain_readout(options)
    return WithPrior(plain, prior(engine, pack, options)) if options.prior else plain


def prior(engine: Engine, pack: Pack, options: LabOptions | None = None) -> Prior:
    """Content-free prior: each criterion's option log-probs for an "N/A" ticket, computed with ``options``'
    readout, orderings and mode, once for ``engine`` (:mod:`triage.lab.prior`)."""
    return priors_of(engine).get(pack, options or LabOptions())


def seams(engine: Engine, pack: Pack, options: LabOptions, schedule: Schedule | None = None) -> dict[str, Any]:
    """``readout=`` and ``schedule=`` for the engine's ``score`` (``schedule``: one of bench's, instead of
    the one ``options.mode`` names)."""
    return {"readout": readout_for(engine, pack, options), "schedule": schedule or schedule_for(options)}


def score(
    engine: Engine,
    ticket: Ticket | str,
    pack: Pack,
    options: LabOptions | None = None,
    *,
    schedule: Schedule | None = None,
    **kw: Any,
) -> Iterator[ScoreEvent]:
    """``engine.score`` with ``options``' seams (``kw``: the engine's other arguments)."""
    options = options or LabOptions()
    return engine.score(ticket, pack, options.product, **seams(engine, pack, options, schedule), **kw)


def scored(
    engine: Engine, ticket: Ticket | str, pack: Pack, options: LabOptions | None = None, **kw: Any
) -> TicketScored:
    """:func:`score`'s final event."""
    final = None
    for event in score(engine, ticket, pack, options, **kw):
        if isinstance(event, TicketScored):
            final = event
    assert final is not None
    return final


def score_ticket(
    engine: Engine, ticket: Ticket | str, pack: Pack, options: LabOptions | None = None, **kw: Any
) -> TicketResult:
    """:func:`score`'s final result."""
    return scored(engine, ticket, pack, options, **kw).result


def raw_readouts(
    engine: Engine, ticket: Ticket | str, pack: Pack, options: LabOptions, **kw: Any
) -> tuple[TicketResult, RawReadouts]:
    """The result and each criterion's per-ordering readings (eval computes every debiasing variant from them)."""
    schedule = kw.pop("schedule", None)
    return engine.raw_readouts(ticket, pack, options.product, **seams(engine, pack, options, schedule), **kw)


def readouts_and_features(
    engine: Engine, ticket: Ticket | str, pack: Pack, options: LabOptions, read: str | None = None, **kw: Any
) -> tuple[TicketResult, RawReadouts, dict[str, np.ndarray]]:
    """:func:`raw_readouts` and the answer position's features (label readout only; ``read``: as the engine's)."""
    schedule = kw.pop("schedule", None)
    got = seams(engine, pack, options, schedule)
    return engine.readouts_and_features(ticket, pack, options.product, read, **got, **kw)
