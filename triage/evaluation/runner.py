"""The eval report: every variant's metrics on the dev rows, with calibrations and heads fitted on the
training rows. The rows are scored by :mod:`triage.learning.scorer` (through the readout cache)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from triage.domain.pack import Criterion, Pack
from triage.domain.ticket import make_ticket
from triage.errors import TriageError
from triage.evaluation import metrics
from triage.evaluation.variants import (
    CALIBRATED,
    CYCLIC,
    LEARNED,
    PRIOR,
    RAW,
    RAW_CALIBRATED,
    RAW_PRIOR,
    CriterionReadings,
    prior_from,
    readings,
)
from triage.lab.scorer import orderings_for
from triage.learning.labelled import LabelledRow, LabelledSet
from triage.learning.scorer import Scored, Scorer, stack_features
from triage.scoring.options import DEFAULT_READOUT

if TYPE_CHECKING:
    from triage.scoring.calibrate import Calibration
    from triage.scoring.head import CriterionHead, Head

SCHEMA = "triage.eval/1"


def content_free_prior(scorer: Scorer) -> dict[str, np.ndarray]:
    """The content-free prior per criterion: the engine's "N/A" ticket through ``scorer`` (and its cache)."""
    from triage.lab.prior import PRIOR_TEXT

    out, _ = scorer.outcome(make_ticket(PRIOR_TEXT, "prior"))
    return prior_from(out)


def gold(rows: Sequence[LabelledRow], criterion: Criterion) -> list[int]:
    """Gold option indices of one criterion."""
    ids = [o.id for o in criterion.options]
    return [ids.index(r.labels[criterion.id]) for r in rows]


def variant_metrics(
    logprobs: np.ndarray, y: Sequence[int], k: int, flips: list[list[int]], coverage: Sequence[float]
) -> dict[str, object]:
    """Every metric of one variant, plus the readout's flip rate and mean coverage."""
    m = metrics.summarize(logprobs, y, k)
    m["flip_rate"] = metrics.flip_rate(flips)
    m["coverage"] = float(np.mean(coverage)) if len(coverage) else float("nan")
    return m


@dataclass
class CalibrationPlan:
    """Where the calibrated variants come from: fits on training rows, or a stored file.

    With training rows, ``calibrated`` is fitted on cyclic (or, with ``prior``,
    cyclic+prior) log-probs, as ``triage calibrate`` fits it; ``raw+calibrated``
    is fitted on the pack-order readout alone, what ``triage calibrate
    --orderings none`` fits (a third of the scoring cost for three options).
    """

    train: Scored | None = None
    stored: Calibration | None = None  # a Calibration, already checked against the engine and pack
    stored_path: str | None = None
    prior: bool = False  # fit on cyclic+prior rather than cyclic
    fit_kw: dict[str, Any] = field(default_factory=dict)
    learn: bool = False  # also fit a learned head (label readout; the outcomes must hold features)
    learn_kw: dict[str, Any] = field(default_factory=dict)  # triage.learning.learn.fit_criterion's options
    curve: tuple[int, ...] = ()  # learning curve: training-row counts to fit on (first N rows)
    stored_head: Head | None = None  # a learned Head (triage learn), already checked against the engine and pack
    stored_head_path: str | None = None


def _fit(
    pack: Pack,
    train: Scored,
    prior: dict[str, np.ndarray] | None,
    *,
    orderings: str,
    use_prior: bool,
    engine_info: dict[str, Any],
    fit_kw: dict[str, object],
) -> Calibration:
    from triage.evaluation.calibrating import fit_calibration

    read = {c.id: readings(c, train.outcomes, prior) for c in pack.criteria}
    cal, _ = fit_calibration(
        pack,
        {cid: r.base(use_prior, orderings) for cid, r in read.items()},
        {c.id: gold(train.rows, c) for c in pack.criteria},
        [r.id for r in train.rows],
        model_sha256=engine_info.get("model_sha256", ""),
        prompt_format=engine_info.get("prompt_format", ""),
        orderings=orderings,
        prior=use_prior,
        name="fitted on the training rows",
        **fit_kw,
    )
    return cal


def _calibrated_entry(cal: Calibration, crit: Criterion, source: str | None) -> dict[str, object]:
    """What the report says about one criterion's calibration: parameters and holdout check, or why it was refused."""
    note = next((c for c in cal.report.get("criteria", []) if c.get("criterion") == crit.id), None)
    if crit.id not in cal.criteria:
        return {"refused": (note or {}).get("refused") or f"the calibration has no fit for {crit.id!r}"}
    p = cal.criteria[crit.id]
    return {
        "source": source,
        "base": (RAW_PRIOR if cal.orderings == "none" else PRIOR)
        if cal.prior
        else RAW
        if cal.orderings == "none"
        else CYCLIC,
        "temperature": p.temperature,
        "bias": p.bias,
        "holdout": note.get("holdout") if note else None,
        "warnings": note.get("warnings", []) if note else [],
    }


def build_report(
    pack: Pack,
    dev: Scored,
    *,
    prior: dict[str, np.ndarray] | None,
    plan: CalibrationPlan | None = None,
    baseline: bool = True,
    engine_info: dict[str, object] | None = None,
    readout: str = DEFAULT_READOUT,
) -> tuple[dict[str, Any], Calibration | None]:
    """Metrics of every variant (and the baseline) for every criterion.

    With the label readout there is one readout per criterion and no option
    order: ``raw`` is the zero-shot readout, and the variants that only exist
    for rotations (``cyclic``, ``raw+calibrated``) are left out.

    Returns:
        (the report as JSON-able data, the fitted Calibration or None).
    """
    plan = plan or CalibrationPlan()
    info = engine_info or {}
    fitted = fitted_raw = None
    label = readout == "label"
    if plan.train is not None and plan.train.rows:
        fitted = _fit(
            pack,
            plan.train,
            prior,
            orderings=orderings_for(readout),
            use_prior=plan.prior,
            engine_info=info,
            fit_kw=plan.fit_kw,
        )
        if not label:
            fitted_raw = _fit(
                pack, plan.train, prior, orderings="none", use_prior=False, engine_info=info, fit_kw=plan.fit_kw
            )
    cals = [(CALIBRATED, fitted or plan.stored, "fit" if fitted is not None else plan.stored_path)]
    if fitted_raw is not None:
        cals.append((RAW_CALIBRATED, fitted_raw, "fit"))
    criteria = []
    for crit in pack.criteria:
        k = len(crit.options)
        y = gold(dev.rows, crit)
        r = readings(crit, dev.outcomes, prior)
        variants: dict[str, Any] = {
            RAW: variant_metrics(r.raw, y, k, [[f[0]] for f in r.per_order_argmax], r.raw_coverage)
        }
        if not label:
            variants[CYCLIC] = variant_metrics(r.cyclic, y, k, r.per_order_argmax, r.coverage)
            # The flip rate is a property of the readouts: raw's is measured over the rotations too.
            variants[RAW]["flip_rate"] = variants[CYCLIC]["flip_rate"]
        if r.prior is not None:
            variants[RAW_PRIOR if label else PRIOR] = variant_metrics(r.prior, y, k, r.per_order_argmax, r.coverage)
        entry: dict[str, object] = {
            "id": crit.id,
            "options": [o.id for o in crit.options],
            "n": len(y),
            "label_counts": {o.id: sum(1 for t in y if t == i) for i, o in enumerate(crit.options)},
            "variants": variants,
            "baseline": None,
            "calibration": None,
        }
        for name, cal, source in cals:
            if cal is None:
                continue
            note = _calibrated_entry(cal, crit, source)
            entry["calibration" if name == CALIBRATED else "calibration_raw"] = note
            if "refused" in note:
                continue
            base = r.base(cal.prior, cal.orderings)
            out = np.stack([cal.apply(crit.id, row) for row in base]) if len(base) else base
            cov = r.raw_coverage if cal.orderings == "none" else r.coverage
            variants[name] = variant_metrics(out, y, k, r.per_order_argmax, cov)
        if plan.learn and plan.train is not None and plan.train.rows:
            _learned_entry(entry, crit, plan, dev, r, prior, y, baseline)
        elif plan.stored_head is not None and plan.stored_head.covers(crit.id):
            h = plan.stored_head.criteria[crit.id]
            variants[LEARNED] = _head_metrics(h, stack_features(dev.outcomes, crit.id), r, y)
            entry["learned"] = {
                "source": plan.stored_head_path,
                "c": h.info.get("C"),
                "cv": h.info.get("cv", {}),
                "backoff": h.backoff,
                "warnings": [],
            }
        if baseline and plan.train is not None and plan.train.rows:
            from triage.evaluation.baseline import fit_predict

            ytr = gold(plan.train.rows, crit)
            try:
                lp = fit_predict([t.ticket.text for t in plan.train.rows], ytr, [t.ticket.text for t in dev.rows], k)
            except TriageError as exc:
                if "scikit-learn" in exc.message:
                    raise
                entry["baseline"] = {"error": exc.message}
            else:
                m = metrics.summarize(lp, y, k)
                m["name"] = "tfidf+logreg(balanced)"
                m["train_n"] = len(ytr)
                entry["baseline"] = m
        criteria.append(entry)
    report = {
        "schema": SCHEMA,
        "pack": {"name": pack.name, "version": pack.version, "hash": pack.hash, "source": pack.source},
        "readout": readout,
        "orderings": orderings_for(readout),
        "criteria": criteria,
    }
    return report, fitted


def _head_metrics(
    head: CriterionHead, x_dev: np.ndarray, r_dev: CriterionReadings, y_dev: list[int]
) -> dict[str, object]:
    """A criterion head (:class:`triage.scoring.head.CriterionHead`) applied to the dev rows, measured."""
    k = len(r_dev.criterion.options)
    out = np.stack([head.apply(f, lp) for f, lp in zip(x_dev, r_dev.raw, strict=True)]) if len(y_dev) else r_dev.raw
    return variant_metrics(out, y_dev, k, [[0]] * len(y_dev), r_dev.raw_coverage)


def _learned_entry(
    entry: dict[str, Any],
    crit: Criterion,
    plan: CalibrationPlan,
    dev: Scored,
    r_dev: CriterionReadings,
    prior: dict[str, np.ndarray] | None,
    y_dev: list[int],
    baseline: bool,
) -> None:
    """The ``learned`` variant (fitted on every training row) and the learning curve, into ``entry``.

    ``r_dev``: the dev rows' readings of ``crit`` (:func:`readings`), computed once by the caller.
    """
    from triage.learning.learn import fit_criterion

    train = plan.train
    assert train is not None
    k = len(crit.options)
    x_tr, x_dev = stack_features(train.outcomes, crit.id), stack_features(dev.outcomes, crit.id)
    r_tr = readings(crit, train.outcomes, prior)
    y_tr = gold(train.rows, crit)

    def learned(n: int) -> tuple[dict[str, object] | None, dict[str, object]]:
        head, outcome = fit_criterion(crit, x_tr[:n], r_tr.raw[:n], y_tr[:n], **plan.learn_kw)
        return (None if head is None else _head_metrics(head, x_dev, r_dev, y_dev)), outcome.to_dict()

    m, note = learned(len(y_tr))
    entry["learned"] = note
    if m is not None:
        entry["variants"][LEARNED] = m
    curve = []
    sizes = sorted({min(n, len(y_tr)) for n in plan.curve})  # a size past the training rows is all of them
    base_tr, base_dev = r_tr.base(plan.prior, "none"), r_dev.base(plan.prior, "none")
    for n in sizes:
        point: dict[str, object] = {"n": n}
        lm, lnote = learned(n)
        point["learned"] = _brief(lm) if lm is not None else {"refused": lnote.get("refused")}
        point["calibrated"] = _curve_calibrated(crit, plan, train.rows[:n], base_tr[:n], base_dev, y_dev)
        if baseline:
            from triage.evaluation.baseline import fit_predict

            try:
                lp = fit_predict(
                    [t.ticket.text for t in train.rows[:n]], y_tr[:n], [t.ticket.text for t in dev.rows], k
                )
                point["tfidf"] = _brief(metrics.summarize(lp, y_dev, k))
            except TriageError as exc:
                point["tfidf"] = {"refused": exc.message}
        curve.append(point)
    if curve:
        entry["learning_curve"] = curve


def _brief(m: dict[str, object]) -> dict[str, object]:
    return {
        key: m[key]
        for key in ("balanced_accuracy", "balanced_accuracy_ci95", "accuracy", "ece", "ece_floor", "nll")
        if key in m
    }


def _curve_calibrated(
    crit: Criterion,
    plan: CalibrationPlan,
    rows: Sequence[LabelledRow],
    base_tr: np.ndarray,
    base_dev: np.ndarray,
    y_dev: list[int],
) -> dict[str, object]:
    """Calibration fitted on some training rows (``rows``, their log-probs ``base_tr``), measured on the dev rows."""
    from triage.evaluation.calibrating import fit_criterion as fit_cal
    from triage.scoring.calibrate import apply_vector_scaling

    kw = {k: v for k, v in plan.fit_kw.items() if k in ("min_per_option", "rare", "weighting")}
    out = fit_cal(crit, base_tr, gold(rows, crit), [r.id for r in rows], holdout=0, **kw)
    if out.refused or out.temperature is None or out.bias is None:
        return {"refused": out.refused}
    b = np.array([out.bias[o.id] for o in crit.options])
    return _brief(metrics.summarize(apply_vector_scaling(base_dev, out.temperature, b), y_dev, len(crit.options)))


def set_summary(label_set: LabelledSet, scored: Scored, limit: int | None) -> dict[str, object]:
    """The input file's part of the report: counts, skipped rows, cut tickets."""
    return {
        "path": label_set.source,
        "rows_used": len(scored.rows),
        "limit": limit,
        "skipped": len(label_set.bad) + len(scored.failed),
        "skipped_rows": [b.message for b in (*label_set.bad, *scored.failed)],
        "ignored_label_keys": label_set.ignored_criteria,
        "cut": scored.cut,
    }
