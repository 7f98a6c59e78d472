"""A ticket's run context (:class:`~triage.scoring.run.Run`), built before any decode.

From one engine's prompt builder and reader for the pack and readout (the engine's readout seam, a
:class:`~triage.scoring.readout.ReadoutKind`; the product's is :data:`~triage.scoring.readout.LABEL`):
the ticket's prompts (only the chosen criteria's tails), the learned head checked against the engine,
the reader told whether to gather features and where to read them (:mod:`triage.scoring.cue`), the
stable block's key and change note, the token counts and the prompt's warnings. The engine's ``score``
(and the lab's packed decodes) start every score here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from triage.domain.pack import Pack
from triage.domain.ticket import Ticket
from triage.errors import TriageError
from triage.scoring.cue import shared_read
from triage.scoring.decide import Decider
from triage.scoring.options import ScoreOptions
from triage.scoring.protocol import ModelIdentity
from triage.scoring.readout import LABEL, ReadoutKind
from triage.scoring.run import Run
from triage.scoring.setup_check import check_head

if TYPE_CHECKING:
    import numpy as np

    from triage.scoring.prefix_store import PrefixStore
    from triage.scoring.prompt import PromptBuilder
    from triage.scoring.readout import Reader


class RunEngine(ModelIdentity, Protocol):
    """What a run is started from: the engine's builder and reader, its sizes, its resident state and the stable
    block's names (:class:`~triage.scoring.engine.Engine`; a protocol, as the engine imports this module)."""

    feature_ids: np.ndarray
    resident: PrefixStore

    @property
    def n_ctx(self) -> int: ...

    def prepared(self, pack: Pack, readout: ReadoutKind) -> tuple[PromptBuilder, Reader]: ...

    def stable_key(self, pack: Pack, kind: str = ...) -> str: ...

    def stable_parts(self, pack: Pack, kind: str = ...) -> dict[str, str]: ...


def start_run(
    engine: RunEngine,
    ticket: Ticket,
    pack: Pack,
    options: ScoreOptions,
    how: tuple[Decider, bool, str | None],
    readout: ReadoutKind = LABEL,
) -> Run:
    """The run context of one score of ``ticket`` on ``engine`` (with its lock held), read with ``readout``.

    ``how`` is the decider, whether to gather the answer position's features, and the read position
    (None: where the head was fitted).

    Raises:
        TriageError: the pack cannot be read this way, a criterion is unknown, or the head does not fit.
    """
    decider, want_features, read = how
    kind = readout.name
    builder, reader = engine.prepared(pack, readout)
    orders = [readout.orders(len(c.options)) for c in pack.criteria]
    prompts = builder.build(ticket.text, orders, n_ctx=engine.n_ctx, messages=ticket.messages)
    if options.criteria is not None:
        chosen = pack.criterion_indices(options.criteria)
        prompts = replace(prompts, prompts=[s for s in prompts.prompts if s.criterion in chosen])
    head = decider.head if reader.takes_head else None  # a head reads options by name
    if head is not None and (why := check_head(head, engine=engine, pack=pack, readout=kind, read=read)):
        raise TriageError(f"the learned head {head.name} does not fit: {why}")
    # the features cost a gather: only when a head or the caller reads them
    reader = reader.with_features(engine.feature_ids if head is not None or want_features else None)
    prompts, reader = shared_read(prompts, reader, (builder, pack, head), read)
    store = engine.resident.store
    run = Run(
        prompts,
        reader,
        replace(decider, head=head),
        None,
        engine.stable_key(pack, kind),
        stable_note=store.note_change(engine.stable_parts(pack, kind)) if store is not None else None,
        ticket_id=ticket.id,
        messages=ticket.thread,
        readout=readout,
    )
    run.reuse.messages, run.reuse.dropped = len(ticket.thread), prompts.dropped
    run.tokens = run.count_tokens()
    run.warnings = list(prompts.warnings)
    if read is None:  # a shared head's features go back only to a caller that asked for that position
        run.unreturned = getattr(reader, "shared", frozenset())
    return run
