"""Learned heads of the real shape with random weights: what a learned criterion costs, without labels.

A head's cost does not depend on its weights (one matrix-vector product per criterion), and where it
reads (``read``) decides which tokens the engine evaluates. Benches and tests use these to time and
check every criterion learned without fitting anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from triage.scoring.head import ATTENTION, CriterionHead, Head

if TYPE_CHECKING:
    from triage.domain.pack import Pack
    from triage.scoring.engine import Engine


def random_head(
    engine: Engine,
    pack: Pack,
    read: str,
    *,
    only: set[str] | None = None,
    attention: str = ATTENTION,
    scale: float = 0.05,
    seed: int = 0,
) -> Head:
    """A head on every criterion of ``pack`` (or those in ``only``) for ``engine``'s model, reading at ``read``."""
    rng = np.random.default_rng(seed)
    n = len(engine.feature_ids)
    crits = {
        c.id: CriterionHead(
            [o.id for o in c.options],
            [o.id for o in c.options],
            rng.normal(0, scale, (len(c.options), n + len(c.options))),
            np.zeros(len(c.options)),
        )
        for c in pack.criteria
        if only is None or c.id in only
    }
    fmt = engine.format_for("label").id
    return Head(
        engine.sha256,
        pack.hash,
        fmt,
        engine.native.n_vocab,
        engine.native.n_embd,
        crits,
        name=f"random ({read})",
        read=read,
        attention=attention,
    )
