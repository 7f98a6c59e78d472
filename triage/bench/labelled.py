"""A labelled set scored once for the benches that fit heads on it (``bench/learning_loop.py``, ``bench/refit.py``).

Each ticket is scored as ``triage score`` and ``triage learn`` score it (the label readout in
fanout, with the answer-position features), through eval's readout cache, so a second run
scores nothing; the benches then only fit and apply heads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rich.console import Console

    from triage.domain.pack import Pack
    from triage.learning.cache import Outcome
    from triage.learning.labelled import LabelledRow


@dataclass
class ScoredSet:
    """The usable rows of a labelled set, each scored once, and what fitting a head on them needs."""

    pack: Pack
    rows: list[LabelledRow]  # in file order
    outcomes: list[Outcome]  # each row's score
    features: dict[str, np.ndarray]  # per criterion, (n, F): what a head reads on every row
    raw: dict[str, np.ndarray]  # per criterion, (n, K): the raw label-readout log-probs
    ident: dict[str, Any]  # the engine's keys, as fit_head takes them (triage.learning.learn.engine_keys)
    model: str  # the engine's name
    seconds: float  # scoring time (cache reads included)
    hits: int
    scored: int

    def inputs(self, idx: Sequence[int]) -> tuple[dict[str, Any], dict[str, Any], dict[str, list[int]]]:
        """What a head is fitted on from rows ``idx`` (:func:`triage.learning.scorer.fit_inputs`)."""
        from triage.learning.scorer import fit_inputs

        return fit_inputs(self.pack, [self.rows[i].labels for i in idx], [self.outcomes[i] for i in idx])

    def fit(self, idx: Sequence[int], name: str, *, inputs: Any = None, **fit_kw: Any) -> Any:
        """The head ``triage learn`` fits on rows ``idx`` (its defaults: CV, balanced, backoff for rare options),
        or None when none of them is labelled. ``inputs``: :meth:`inputs` of the same rows, computed already
        (a bench that times the fit alone); ``fit_kw``: other ``fit_head`` keywords (a fit policy to compare)."""
        from triage.learning import learn as learn_mod

        features, logprobs, labels = self.inputs(idx) if inputs is None else inputs
        if not labels:
            return None
        head, _ = learn_mod.fit_head(
            self.pack,
            features,
            logprobs,
            labels,
            name=name,
            min_per_option=learn_mod.MIN_PER_OPTION,
            rare="backoff",
            **self.ident,
            **fit_kw,
        )
        return head


def score_labelled(
    dataset: Path,
    *,
    pack: Path | None,
    model: str | None,
    n_ctx: int,
    limit: int,
    part: str,
    console: Console,
    notice: Callable[[str], None],
) -> ScoredSet:
    """Score the first ``limit`` usable rows of ``dataset`` (a folder with ``criteria.toml`` and ``tickets.jsonl``,
    or a labelled JSONL whose pack is ``pack``, default ``criteria.toml`` beside it); ``part`` names the
    progress line on ``console``."""
    from triage.domain.pack import load_pack
    from triage.evaluation.labelled_runs import score_sets
    from triage.evaluation.variants import readings
    from triage.learning import learn as learn_mod
    from triage.learning.labelled import read_labelled
    from triage.learning.scorer import stack_features
    from triage.scoring.loader import load_engine

    folder = dataset if dataset.is_dir() else dataset.parent
    the_pack = load_pack(pack or folder / "criteria.toml")
    source = dataset / "tickets.jsonl" if dataset.is_dir() else dataset
    rows = read_labelled(str(source), the_pack, partial=True).limit(limit).rows
    engine = load_engine(model, n_ctx=n_ctx, notice=notice)
    t0 = time.perf_counter()
    with engine:
        run_ = score_sets(engine, the_pack, [(part, rows)], console, "label", features=True, prior=False)
        seconds = time.perf_counter() - t0
        scored = run_.sets[0]
        return ScoredSet(
            pack=the_pack,
            rows=scored.rows,
            outcomes=scored.outcomes,
            features={c.id: stack_features(scored.outcomes, c.id) for c in the_pack.criteria},
            raw={c.id: readings(c, scored.outcomes, None).raw for c in the_pack.criteria},
            ident=learn_mod.engine_keys(engine),
            model=engine.name,
            seconds=seconds,
            hits=run_.hits,
            scored=run_.misses,
        )
