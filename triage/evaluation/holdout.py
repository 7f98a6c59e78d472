"""``learn --holdout F``: the learned head beside zero-shot and TF-IDF on rows it never saw.

The held-out rows are those whose id hash (:func:`triage.learning.labelled.split_bucket`) is at
least ``1 - F``: exactly the dev rows of ``triage eval --split 1-F``, so both commands hold out
the same tickets. The head is fitted on the other rows only; the TF-IDF baseline is fitted on
the same training labels; zero-shot is the label readout as it stands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console
from rich.table import Table

from triage.domain.pack import Pack
from triage.domain.ticket import printable
from triage.errors import TriageError
from triage.evaluation import metrics
from triage.evaluation.report import print_confusion
from triage.evaluation.runner import gold
from triage.evaluation.variants import readings
from triage.learning.scorer import Scored, stack_features

if TYPE_CHECKING:
    from triage.scoring.head import Head

VARIANTS = ("learned", "zero-shot", "tfidf")
LEGEND = (
    "  balanced acc: the share of each option's tickets decided right, averaged over the options "
    "(chance is one in the number of options); what the verdict compares",
    "  95% CI: where balanced acc would likely fall on other tickets like these (few rows: a wide range)",
    "  macro-F1: per option, the balance of tickets missed and tickets wrongly given that option, averaged",
    "  ECE: how far the shown probabilities are from how often they are right (0: honest bars)",
    "  accuracy: the share of all tickets decided right (the common options weigh most)",
    "  zero-shot: the model's readout alone (what triage uses without a head); tfidf: a keyword model "
    "fitted on the same labels, for comparison",
)


def holdout_metrics(
    pack: Pack, head: Head, train: Scored, held: Scored, criteria: Sequence[str] | None = None
) -> dict[str, dict[str, object]]:
    """Per learned criterion (applied or not yet: this check decides it): ``{"n", "options", "learned",
    "zero-shot", "tfidf"}``, each a metrics dict (:func:`triage.evaluation.metrics.summarize`) or
    ``{"refused": why}``.
    """
    from triage.evaluation.baseline import fit_predict

    out: dict[str, dict[str, object]] = {}
    for crit in pack.criteria:
        if not head.has(crit.id) or (criteria is not None and crit.id not in criteria):
            continue
        have = [i for i, r in enumerate(held.rows) if crit.id in r.labels]
        if not have:
            out[crit.id] = {"n": 0, "options": [o.id for o in crit.options]}
            continue
        k = len(crit.options)
        outs = [held.outcomes[i] for i in have]
        rows = [held.rows[i] for i in have]
        y = gold(rows, crit)
        zero = readings(crit, outs, None).raw
        x = stack_features(outs, crit.id)
        learned = np.stack([head.apply(crit.id, f, lp) for f, lp in zip(x, zero, strict=True)])
        entry: dict[str, object] = {"n": len(y), "options": [o.id for o in crit.options]}
        entry["learned"] = metrics.summarize(learned, y, k)
        entry["zero-shot"] = metrics.summarize(zero, y, k)
        tr = [i for i, r in enumerate(train.rows) if crit.id in r.labels]
        try:
            lp = fit_predict(
                [train.rows[i].ticket.text for i in tr],
                gold([train.rows[i] for i in tr], crit),
                [r.ticket.text for r in rows],
                k,
            )
            entry["tfidf"] = metrics.summarize(lp, y, k)
        except TriageError as exc:
            entry["tfidf"] = {"refused": exc.message}
        out[crit.id] = entry
    return out


def print_holdout(results: dict[str, dict[str, Any]], console: Console, *, fraction: float, fit_n: int) -> None:
    """What the columns mean (:data:`LEGEND`), then one table per criterion (balanced accuracy, macro-F1, ECE per
    variant) and the head's confusion matrix."""
    console.print(
        f"held out {fraction:g} of the rows by id hash (as eval --split {1 - fraction:g}); "
        f"the head was fitted on {fit_n}",
        markup=False,
        highlight=False,
    )
    for line in LEGEND:
        console.print(line, style="dim", markup=False, highlight=False)
    for cid, entry in results.items():
        if not entry.get("n"):
            console.print(f"{printable(cid)}: no held-out row is labelled", style="yellow", markup=False)
            continue
        table = Table(title=printable(f"{cid}: held-out n={entry['n']}"), title_justify="left")
        for col in ("variant", "balanced acc", "95% CI", "macro-F1", "ECE", "accuracy"):
            table.add_column(col, justify="left" if col == "variant" else "right")
        for v in VARIANTS:
            m = entry.get(v) or {}
            if "refused" in m or not m:
                table.add_row(v, "refused", "", "", "", "")
                continue
            lo, hi = m["balanced_accuracy_ci95"]
            table.add_row(
                v,
                f"{m['balanced_accuracy']:.3f}",
                f"{lo:.2f}-{hi:.2f}",
                f"{m['macro_f1']:.3f}",
                f"{m['ece']:.3f}",
                f"{m['accuracy']:.3f}",
            )
        console.print(table)
        print_confusion(entry["options"], entry["learned"]["confusion"], f"{cid}: learned head, held-out rows", console)


def brief(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The figures kept in the head's report (no confusion matrices or intervals)."""
    keep = ("n", "balanced_accuracy", "macro_f1", "ece", "accuracy")
    return {
        cid: {
            v: ({k: e[v][k] for k in keep if k in e[v]} if "refused" not in e[v] else e[v]) for v in VARIANTS if v in e
        }
        | {"n": e.get("n", 0)}
        for cid, e in results.items()
    }
