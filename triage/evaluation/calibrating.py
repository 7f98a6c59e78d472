"""Fitting a calibration (``triage calibrate``, eval's calibrated variants): per criterion, vector scaling
checked on a deterministic holdout, then refitted on every row (:mod:`triage.learning.vector_scaling`). The
file format and applying a calibration are :mod:`triage.scoring.calibrate`'s, finding one
:mod:`triage.learning.fitstore`'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from triage.evaluation.metrics import summarize
from triage.learning.labelled import split_bucket
from triage.learning.vector_scaling import L2_BIAS, L2_LOG_T, FitOutcome, fit_vector_scaling
from triage.scoring.calibrate import (
    HOLDOUT_FRACTION,
    HOLDOUT_SALT,
    MIN_PER_OPTION,
    Calibration,
    CriterionCalibration,
    apply_vector_scaling,
)

if TYPE_CHECKING:
    from triage.domain.pack import Pack


def _quality(logprobs: np.ndarray, y: Sequence[int], k: int) -> dict[str, float]:
    s = summarize(logprobs, y, k)
    return {m: float(s[m]) for m in ("nll", "ece", "balanced_accuracy", "accuracy")}  # type: ignore[arg-type]


def fit_criterion(
    criterion: Any,
    logprobs: np.ndarray,
    y: Sequence[int],
    row_ids: Sequence[str],
    *,
    min_per_option: int = MIN_PER_OPTION,
    rare: str = "refuse",
    holdout: float = HOLDOUT_FRACTION,
    l2_bias: float = L2_BIAS,
    l2_log_t: float = L2_LOG_T,
    weighting: str = "none",
) -> FitOutcome:
    """Fit one criterion, check the fit on a deterministic holdout, then refit on all rows.

    Args:
        criterion: the pack's criterion (its option ids name the biases).
        logprobs: (n, k) uncalibrated log-probs (cyclic, or cyclic + prior).
        y: gold option indices.
        row_ids: the rows' ids; the holdout is the rows whose id hashes into ``holdout``.
        min_per_option: fewest gold labels an option needs.
        rare: ``refuse`` the criterion when an option has fewer, or ``freeze`` those
            options' biases at 0 and fit the rest.
        holdout: share of rows held out for the before/after check (0 to skip it).
        weighting: ``none`` (plain NLL: probabilities match the training class mix) or
            ``balanced`` (rows weighted by 1 / their class's count: trades calibration on
            the natural mix for balanced accuracy).
    """
    k = len(criterion.options)
    ids = [o.id for o in criterion.options]
    y = [int(t) for t in y]
    counts = {ids[i]: sum(1 for t in y if t == i) for i in range(k)}
    out = FitOutcome(criterion.id, len(y), counts)
    short = [o for o, c in counts.items() if c < min_per_option]
    if short:
        detail = ", ".join(f"{o} has {counts[o]}" for o in short)
        if rare != "freeze" or len(short) > k - 2:
            out.refused = (
                f"criterion {criterion.id!r} has too few labels to fit: {detail} "
                f"(need at least {min_per_option} per option)"
            )
            return out
        out.frozen = short
        out.warnings.append(
            f"criterion {criterion.id!r}: {detail} label(s) (< {min_per_option}); their biases are held at 0"
        )
    frozen = [ids.index(o) for o in out.frozen]
    x = np.asarray(logprobs, dtype=np.float64).reshape(-1, k)
    if weighting not in ("none", "balanced"):
        raise ValueError(f"unknown weighting {weighting!r}")

    def weights(ys: list[int]) -> np.ndarray | None:
        if weighting == "none":
            return None
        c = np.bincount(ys, minlength=k).astype(np.float64)
        return np.array([len(ys) / (k * c[t]) for t in ys])

    if holdout > 0:
        held = np.array([split_bucket(r, HOLDOUT_SALT) < holdout for r in row_ids])
        fit_rows = ~held
        if held.sum() >= 10 and fit_rows.sum() >= 2 * k:
            y_fit = [y[i] for i in np.flatnonzero(fit_rows)]
            t_h, b_h = fit_vector_scaling(
                x[fit_rows], y_fit, l2_bias=l2_bias, l2_log_t=l2_log_t, frozen=frozen, weights=weights(y_fit)
            )
            yh = [y[i] for i in np.flatnonzero(held)]
            before = _quality(x[held], yh, k)
            after = _quality(apply_vector_scaling(x[held], t_h, b_h), yh, k)
            out.holdout = {"n": int(held.sum()), "fit_n": int(fit_rows.sum()), "before": before, "after": after}
            if after["nll"] > before["nll"]:
                out.warnings.append(
                    f"criterion {criterion.id!r}: the fit did not lower NLL on "
                    f"the holdout ({before['nll']:.3f} → {after['nll']:.3f})"
                )
        else:
            out.warnings.append(f"criterion {criterion.id!r}: too few rows for a holdout check ({len(y)})")
    t, b = fit_vector_scaling(x, y, l2_bias=l2_bias, l2_log_t=l2_log_t, frozen=frozen, weights=weights(y))
    out.temperature = float(t)
    out.bias = {ids[i]: float(b[i]) for i in range(k)}
    return out


def fit_calibration(
    pack: Pack,
    logprobs: dict[str, np.ndarray],
    labels: dict[str, Sequence[int]],
    row_ids: Sequence[str],
    *,
    model_sha256: str,
    prompt_format: str,
    orderings: str = "cyclic",
    prior: bool = False,
    name: str = "calibration",
    **fit_kw: Any,
) -> tuple[Calibration, list[FitOutcome]]:
    """Fit every criterion of ``pack`` and build the calibration (refused criteria are left out).

    Args:
        pack: the criteria pack.
        logprobs: per criterion id, the (n, k) uncalibrated log-probs of the training rows.
        labels: per criterion id, the gold option indices.
        row_ids: the training rows' ids (for the deterministic holdout).
        model_sha256, prompt_format, orderings, prior: what the log-probs came from.
        fit_kw: passed to :func:`fit_criterion`.

    Returns:
        (calibration, per-criterion outcomes).
    """
    outcomes = [fit_criterion(c, logprobs[c.id], labels[c.id], row_ids, **fit_kw) for c in pack.criteria]
    crits = {
        o.criterion: CriterionCalibration(o.temperature, o.bias)
        for o in outcomes
        if o.refused is None and o.temperature is not None and o.bias is not None
    }
    cal = Calibration(
        model_sha256,
        pack.hash,
        prompt_format,
        orderings,
        prior,
        crits,
        name=name,
        report={
            "n": len(row_ids),
            "settings": {k: v for k, v in fit_kw.items()},
            "criteria": [o.to_dict() for o in outcomes],
        },
    )
    cal._option_ids = {c.id: [o.id for o in c.options] for c in pack.criteria}
    return cal, outcomes
