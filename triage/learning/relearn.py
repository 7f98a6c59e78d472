"""Re-learning from the history alone, in seconds: what the app's background worker runs.

It fits on the labelled tickets whose score kept what a head reads for this model,
prompt format and pack (:mod:`triage.store.training`), with the same fit as
``triage learn`` (:func:`triage.learning.learn.fit_head`: CV, balanced, backoff for rare
options, temperature), and stores the head where ``triage score`` and the app find it
(the fit policy then applies it from the next ticket on). Tickets whose kept inputs
are gone are left out and counted: ``triage learn --history`` scores them.

It scores nothing of the team's, so it waits for the engine only on the built-in pack's first re-fit, which
scores the starter rows at the tails once (eval's readout cache keeps them for every later one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage.errors import TriageError
from triage.learning import learn as learn_mod
from triage.learning.scorer import fit_inputs
from triage.learning.sources import kept_outcome
from triage.learning.starter import fit_set, is_builtin, rows_info, starter_rows
from triage.store import features as feat
from triage.store.history import History
from triage.store.training import training_rows

if TYPE_CHECKING:
    from triage.domain.pack import Pack
    from triage.learning.cache import Outcome
    from triage.learning.labelled import LabelledRow
    from triage.scoring.head import Head
    from triage.scoring.protocol import ScoringEngine


@dataclass
class Relearned:
    """The stored head (None when nothing could be learned, ``why`` says), from how many labels."""

    head: Head | None
    labels: int
    why: str | None = None
    notes: list[str] = field(default_factory=list)


def learn_from_history(
    path: Path, engine: ScoringEngine, pack: Pack, *, store: bool = True, starter: bool = True
) -> Relearned:
    """Fit a head on the labels of the history at ``path`` and store it (see the module docstring).

    Args:
        engine: the loaded engine (its identity: sha256, prompt format, vocabulary and width).
        starter: on the built-in pack, fit on the starter rows too (:mod:`triage.learning.starter`); their
            tail features come from eval's readout cache, and the first re-fit scores them there once.

    Raises:
        TriageError: the engine has no model to learn for.
    """
    native = getattr(engine, "native", None)
    if native is None:
        raise TriageError("this engine has no model to learn for")
    prompt_format = engine.format_for("label").id
    ident = feat.Identity(engine.sha256, prompt_format, pack.hash)
    with History.open(path) as history:  # a connection of this thread's own
        got = training_rows(history, pack, ident)
    rows = [r for r in got.rows if not r.needs_scoring]
    notes = got.notes()
    if got.to_score:
        notes.append(
            f"{got.to_score} labelled ticket(s) have no kept features and were left out "
            "(`triage learn --history` scores them)"
        )
    kept = [kept_outcome(r.kept, []) for r in rows]
    features, logprobs, labels = fit_inputs(pack, [r.labels for r in rows], kept)
    n = sum(len(v) for v in labels.values())
    if not labels:
        return Relearned(None, 0, "no labelled ticket with kept features yet", notes)
    weights, with_starter = None, None
    if starter and is_builtin(pack):  # the built-in pack: the starter rows beside the team's labels
        with_starter = fit_set(pack, [r.labels for r in rows], kept, *_starter_at_tails(engine, pack))
        features, logprobs, labels = with_starter.features, with_starter.logprobs, with_starter.labels
        weights = with_starter.weights
        notes.append(f"learned {with_starter.said()}")
    head, outcomes = learn_mod.fit_head(
        pack,
        features,
        logprobs,
        labels,
        **learn_mod.engine_keys(engine),
        name=f"{pack.name} head learned from {n} labels",
        min_per_option=learn_mod.MIN_PER_OPTION,
        rare="backoff",
        weights=weights,
    )
    if with_starter is not None:
        rows_info(with_starter, head)
    if not head.criteria:
        why = "; ".join(o.refused for o in outcomes if o.refused) or "no criterion could be learned"
        return Relearned(None, n, why, notes)
    head.report.update({"history": True, "rows": len(rows)})
    if store:
        from triage.learning.fitstore import store_head

        store_head(head)
    return Relearned(head, n, None, notes + [w for o in outcomes for w in o.warnings])


def _starter_at_tails(engine: Any, pack: Pack) -> tuple[list[LabelledRow], list[Outcome]]:
    """The starter rows and their outcomes at the tails, where the history keeps a team's features."""
    from triage.learning.cache import ReadoutCache
    from triage.learning.scorer import Scorer, score_rows
    from triage.scoring.cue import TAIL

    with ReadoutCache() as cache:
        scorer = Scorer(engine, pack, cache, "label", TAIL)
        scorer.features = True
        scored = score_rows(scorer, starter_rows(pack))
    return scored.rows, scored.outcomes
