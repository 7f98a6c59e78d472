"""Re-learning from the history alone, in seconds: what the app's background worker runs.

It fits on the labelled tickets whose score kept what a head reads for this model,
prompt format and pack (:mod:`triage.store.training`), with the same fit as
``triage learn`` (:func:`triage.scoring.learn.fit_head`: CV, balanced, backoff for rare
options, temperature), and stores the head where ``triage score`` and the app find it
(the fit policy then applies it from the next ticket on). Tickets whose kept inputs
are gone are left out and counted: ``triage learn --history`` scores them.

It scores nothing, so it never waits for the engine: it may run beside a score.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.errors import TriageError
from triage.evaluation.runner import fit_inputs
from triage.evaluation.sources import kept_outcome
from triage.scoring import learn as learn_mod
from triage.store import features as feat
from triage.store.history import History
from triage.store.training import training_rows


@dataclass
class Relearned:
    """The stored head (None when nothing could be learned, ``why`` says), from how many labels."""

    head: Any
    labels: int
    why: str | None = None
    notes: list[str] = field(default_factory=list)


def learn_from_history(path: Path, engine: Any, pack: Any, *, store: bool = True) -> Relearned:
    """Fit a head on the labels of the history at ``path`` and store it (see the module docstring).

    Args:
        engine: the loaded engine (its identity: sha256, prompt format, vocabulary and width).

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
    outcomes = [kept_outcome(r.kept, []) for r in rows]
    features, logprobs, labels = fit_inputs(pack, [r.labels for r in rows], outcomes)
    n = sum(len(v) for v in labels.values())
    if not labels:
        return Relearned(None, 0, "no labelled ticket with kept features yet", notes)
    head, outcomes = learn_mod.fit_head(
        pack,
        features,
        logprobs,
        labels,
        **learn_mod.engine_keys(engine),
        name=f"{pack.name} head learned from {n} labels",
        min_per_option=learn_mod.MIN_PER_OPTION,
        rare="backoff",
    )
    if not head.criteria:
        why = "; ".join(o.refused for o in outcomes if o.refused) or "no criterion could be learned"
        return Relearned(None, n, why, notes)
    head.report.update({"history": True, "rows": len(rows)})
    if store:
        from triage.scoring.head import store_head

        store_head(head)
    return Relearned(head, n, None, notes + [w for o in outcomes for w in o.warnings])
