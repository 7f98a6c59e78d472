"""Fitting learned heads (:mod:`triage.scoring.head`) on a team's labelled tickets.

Per criterion: multinomial logistic regression with L2 on standardised
features (the answer position's hidden-state features and the K option
log-probs), class weights balanced, the strength chosen by stratified
cross-validation on the training rows (log loss). Fitting and applying a head
are numpy (:mod:`triage.learning.logistic`).

An option with fewer than ``min_per_option`` labels cannot be learned: the
criterion is refused and named, or with ``rare="backoff"`` the head learns
the other options and leaves that one to the zero-shot readout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from triage.domain.pack import Criterion, Pack
from triage.learning.logistic import Standardizer, fit_logistic, stratified_folds
from triage.learning.vector_scaling import fit_vector_scaling
from triage.scoring.cue import TAIL
from triage.scoring.head import ATTENTION, CriterionHead, Head

if TYPE_CHECKING:
    pass

MIN_PER_OPTION = 5
# L2 strength candidates, as C = 1 / strength (scikit-learn's name for it)
C_GRID = tuple(float(c) for c in np.logspace(-4, 1, 6))
FOLDS = 5
PATIENCE = 2  # C values in a row worse than the best before the grid walk stops (fit_criterion)
DEFAULT_C = 0.01  # when there is nothing to cross-validate with
SEED = 0


@dataclass
class LearnOutcome:
    """One criterion's fit, or why it was refused."""

    criterion: str
    n: int
    counts: dict[str, int]
    refused: str | None = None
    backoff: list[str] = field(default_factory=list)  # options left to the zero-shot readout
    c: float | None = None
    cv: dict[str, Any] = field(default_factory=dict)  # cross-validated scores of the chosen fit (JSON: c_tried a list)
    warnings: list[str] = field(default_factory=list)
    worse: str | None = None  # kept, but cross-validates worse than zero-shot by more than the noise: why

    def to_dict(self) -> dict[str, object]:
        """Plain data for reports and the head file's meta."""
        return dict(self.__dict__)


def design(features: np.ndarray, logprobs: np.ndarray) -> np.ndarray:
    """The head's training rows: ``[features..., option log-probs...]``, at the precision the history keeps.

    The history keeps features as float16 and log-probs as float32 (:mod:`triage.store.features`); eval's
    cache keeps float32. Rounding every source to the history's precision before fitting makes the same
    labelled tickets give the same head from a file as from the history (it moves a feature by at most
    one part in 2,000, well inside what one decode's batch shape moves it).
    """
    f = np.asarray(features, dtype=np.float32).astype(np.float16).astype(np.float64)
    return np.hstack([f, np.asarray(logprobs, dtype=np.float32).astype(np.float64)])


class _RowSpaceLR:
    """L2 logistic regression fitted in the span of the training rows.

    With fewer rows than features (150 tickets, ~1,800 features), an L2-penalised
    linear model's weights lie in the span of the (centred) training rows, so it
    is fitted exactly on their coordinates in an orthonormal basis of that span
    (``x = z Vᵀ``, ``|w| = |w_z|``) and mapped back: the same solution, on a
    problem with as many columns as rows.
    """

    basis: np.ndarray
    classes_: np.ndarray
    row_coef_: np.ndarray
    intercept_: np.ndarray
    coef_: np.ndarray

    def __init__(self, c: float) -> None:
        self.c = c

    def fit(
        self,
        x: np.ndarray,
        y: np.ndarray,
        basis: np.ndarray | None = None,
        start: _RowSpaceLR | None = None,
        weight: np.ndarray | None = None,
    ) -> _RowSpaceLR:
        """Fit on rows ``x``; ``basis`` (from :func:`_row_basis` of the same ``x``) saves computing it again,
        ``start`` (a fit on the same rows with another C) starts the solver near the optimum, ``weight``
        weighs the rows (:func:`~triage.learning.logistic.fit_logistic`)."""
        self.basis = _row_basis(x) if basis is None else basis  # (r, d)
        warm = (start.row_coef_, start.intercept_) if start is not None else None
        self.classes_, self.row_coef_, self.intercept_ = fit_logistic(x @ self.basis.T, y, self.c, warm, weight)
        self.coef_ = self.row_coef_ @ self.basis
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        z = x @ self.coef_.T + self.intercept_
        if z.shape[1] == 1:  # binary: one row, class 1's log-odds
            z = np.hstack([np.zeros_like(z), z])
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)


def _row_basis(x: np.ndarray, rank: int | None = None) -> np.ndarray:
    """An orthonormal basis of the span of the rows of ``x`` (its right singular vectors), of at most ``rank``
    directions (the largest)."""
    _, s, vt = np.linalg.svd(x, full_matrices=False)
    keep = s > s[0] * 1e-10 if len(s) else s > 0
    return vt[keep][:rank]


@dataclass
class _Fold:
    """One cross-validation fold, standardised and with its row basis computed once for every C."""

    train: np.ndarray
    test: np.ndarray
    scaler: Standardizer
    scaled: np.ndarray
    basis: np.ndarray


def _fold(x: np.ndarray, train: np.ndarray, test: np.ndarray, rank: int | None = None) -> _Fold:
    scaler = Standardizer.fit(x[train])
    scaled = scaler.transform(x[train])
    return _Fold(train, test, scaler, scaled, _row_basis(scaled, rank))


def _fit_lr(
    x: np.ndarray, y: np.ndarray, c: float, rank: int | None = None, weight: np.ndarray | None = None
) -> tuple[Standardizer, _RowSpaceLR]:
    scaler = Standardizer.fit(x)
    scaled = scaler.transform(x)
    return scaler, _RowSpaceLR(c).fit(scaled, y, _row_basis(scaled, rank), weight=weight)


def _proba(scaler: Standardizer, lr: _RowSpaceLR, x: np.ndarray, classes: Sequence[int]) -> np.ndarray:
    p = lr.predict_proba(scaler.transform(x))
    out = np.zeros((len(x), len(classes)))
    for j, c in enumerate(lr.classes_):
        out[:, list(classes).index(int(c))] = p[:, j]
    return out


def _balanced_logloss(p: np.ndarray, y: np.ndarray, classes: Sequence[int]) -> float:
    """Log loss with each class weighted equally (what the balanced fit aims at)."""
    idx = np.array([list(classes).index(int(t)) for t in y])
    ll = -np.log(np.clip(p[np.arange(len(y)), idx], 1e-12, 1.0))
    return float(np.mean([ll[idx == j].mean() for j in range(len(classes)) if np.any(idx == j)]))


def worse_margin(n: int) -> float:
    """How far below zero-shot a head's cross-validated balanced accuracy may fall before it is refused.

    One over the square root of n, at least 0.05: five-fold CV on n rows is a noisy, slightly pessimistic
    estimate (docs/quality.md, "The fit's measured choices", has the figures).
    """
    return max(0.05, 1.0 / float(np.sqrt(max(n, 1))))


def _balanced_accuracy(p: np.ndarray, y: np.ndarray, classes: Sequence[int]) -> float:
    idx = np.array([list(classes).index(int(t)) for t in y])
    pred = p.argmax(axis=1)
    return float(np.mean([np.mean(pred[idx == j] == j) for j in range(len(classes)) if np.any(idx == j)]))


def fit_criterion(
    criterion: Criterion,
    features: np.ndarray,
    logprobs: np.ndarray,
    y: Sequence[int],
    *,
    min_per_option: int = MIN_PER_OPTION,
    rare: str = "refuse",
    c_grid: Sequence[float] = C_GRID,
    folds: int = FOLDS,
    force: bool = False,
    patience: int | None = PATIENCE,
    hidden_width: int | None = None,
    weight: Sequence[float] | None = None,
    refuse_worse: bool = True,
) -> tuple[CriterionHead | None, LearnOutcome]:
    """Fit one criterion's head; (None, outcome naming why) when it cannot be learned.

    A head whose cross-validated balanced accuracy is below the zero-shot readout's on the
    same rows (by more than their noise, :func:`worse_margin`) is refused (it would make the
    decisions worse), unless ``force``; with ``refuse_worse`` False it is returned, with
    :attr:`LearnOutcome.worse` saying why, for the caller to store without applying it
    (``triage learn``: :mod:`triage.evaluation.verdict`).

    Args:
        criterion: the pack's criterion.
        features: (n, F) hidden-state features of the training rows.
        logprobs: (n, K) raw label-readout log-probs.
        y: gold option indices.
        min_per_option: fewest labels an option needs to be learned.
        rare: ``refuse`` the criterion when an option has fewer, or ``backoff``:
            learn the others and leave those options to the zero-shot readout.
        c_grid: candidate C values (inverse L2 strength), chosen by cross-validation.
        folds: cross-validation folds (fewer when the rarest learned option has fewer rows).
        force: keep a head that cross-validates worse than zero-shot (a warning says so).
        refuse_worse: False: keep such a head too, without a warning; :attr:`LearnOutcome.worse` says why.
        patience: stop walking ``c_grid`` (smallest C first) after this many values in a row score worse than
            the best so far (None: every value); the loss is unimodal in C in practice (docs/quality.md,
            "The fit's measured choices").
        hidden_width: the model's hidden width (``n_embd``). The features are a linear image of a state that
            wide, so the rows span at most ``hidden_width`` + K (the log-probs) + 1 directions beyond float16
            rounding, and the fit uses at most that many (the largest) of the rows' span: past that the
            spectrum is rounding (docs/quality.md, "The fit's measured choices"), which only costs time and
            can only be fitted as noise. None: the whole span.
        weight: each row's weight in the fit (default 1): the built-in pack's starter rows weigh less than a
            team's labels (:mod:`triage.learning.starter`). Cross-validation scores every held-out row alike.
    """
    ids = [o.id for o in criterion.options]
    rank = None if hidden_width is None else hidden_width + len(ids) + 1
    y_arr = np.asarray([int(t) for t in y], dtype=int)
    counts = {ids[i]: int(np.sum(y_arr == i)) for i in range(len(ids))}
    out = LearnOutcome(criterion.id, len(y_arr), counts)
    short = [o for o, c in counts.items() if c < max(1, min_per_option)]
    if short:
        detail = ", ".join(f"{o} has {counts[o]}" for o in short)
        if rare != "backoff" or len(short) > len(ids) - 2:
            need = (
                f"at least {min_per_option} per option"
                if rare != "backoff"
                else f"at least {min_per_option} on each of two options; an option with fewer is left to zero-shot"
            )
            out.refused = f"criterion {criterion.id!r} has too few labels to learn: {detail} (need {need})"
            return None, out
        out.backoff = short
        out.warnings.append(
            f"criterion {criterion.id!r}: {detail} label(s) (< {min_per_option}); left to the zero-shot readout"
        )
    classes = [i for i, o in enumerate(ids) if o not in short]
    keep = np.isin(y_arr, classes)
    x = design(features, logprobs)[keep]
    yk = y_arr[keep]
    wk = None if weight is None else np.asarray(weight, dtype=np.float64)[keep]
    rarest = min(counts[ids[c]] for c in classes)
    if rarest < 2:  # nothing to cross-validate with (min_per_option below 2): the middle of the grid, and say so
        out.warnings.append(
            f"criterion {criterion.id!r}: an option has a single label, so C is not cross-validated (C = {DEFAULT_C:g})"
        )
        scaler, lr = _fit_lr(x, yk, DEFAULT_C, rank, wk)
        coef, icpt = _folded(scaler, lr, classes)
        out.c, out.cv = DEFAULT_C, {"folds": 0}
        info = {"n": int(len(yk)), "counts": counts, "C": DEFAULT_C, "cv": out.cv, "backoff": out.backoff}
        return CriterionHead(ids, [ids[c] for c in classes], coef, icpt, info), out
    k_folds = min(folds, rarest)
    best: tuple[float, float, float] | None = None  # (balanced log loss, C, balanced accuracy)
    best_pred = np.zeros((len(yk), len(classes)))
    splits = [_fold(x, tr, te, rank) for tr, te in stratified_folds(yk, k_folds, SEED)]  # the same folds for every C
    last: list[_RowSpaceLR | None] = [None] * len(splits)  # each fold's fit at the previous C: a warm start
    tried: list[float] = []
    for c in c_grid:
        tried.append(float(c))
        pred = np.zeros((len(yk), len(classes)))
        for i, f in enumerate(splits):
            w_train = None if wk is None else wk[f.train]
            lr = last[i] = _RowSpaceLR(c).fit(f.scaled, yk[f.train], f.basis, start=last[i], weight=w_train)
            pred[f.test] = _proba(f.scaler, lr, x[f.test], classes)
        score = (_balanced_logloss(pred, yk, classes), c, _balanced_accuracy(pred, yk, classes))
        if best is None or score[0] < best[0]:
            best, best_pred, worse = score, pred, 0
        else:
            worse += 1
            if patience is not None and worse >= patience:
                break
    assert best is not None
    # Balanced class weights skew the probabilities toward rare options; a temperature fitted
    # on the out-of-fold predictions (plain NLL) makes the bars honest on the training mix
    # without moving any decision (argmax is unchanged by a temperature).
    yi = np.array([classes.index(int(t)) for t in yk])
    temperature, _ = fit_vector_scaling(
        np.log(np.clip(best_pred, 1e-12, 1.0)), yi, frozen=range(len(classes)), l2_log_t=0.0
    )
    out.c = best[1]
    out.cv = {
        "folds": k_folds,
        "balanced_logloss": best[0],
        "balanced_accuracy": best[2],
        "temperature": temperature,
        "c_tried": tried,
    }
    zero = _balanced_accuracy(np.exp(logprobs[keep][:, classes]), yk, classes)  # the readout alone, same rows
    out.cv["zero_shot_balanced_accuracy"] = zero
    margin = worse_margin(len(yk))
    chance = 1.0 / len(classes)
    if best[2] < chance + margin:  # kept (it may still be the best there is), but a team should know
        out.warnings.append(
            f"criterion {criterion.id!r}: the head's cross-validated balanced accuracy {best[2]:.3f} is within "
            f"{margin:.3f} of chance ({chance:.3f}) on {len(yk)} rows: the model finds little in the tickets that "
            "tells these options apart, so expect to correct it often (check that the labels follow from the "
            "ticket text, or that the options are told apart in the pack)"
        )
    if best[2] < zero:
        msg = (
            f"criterion {criterion.id!r}: the head's cross-validated balanced accuracy {best[2]:.3f} is below "
            f"zero-shot's {zero:.3f} on the same rows"
        )
        if best[2] >= zero - margin:  # within what n rows can tell apart: kept, and said
            kept = "; kept" if refuse_worse else ""  # else the caller's verdict says what becomes of it
            out.warnings.append(msg + f" (by less than {margin:.3f}, the noise of {len(yk)} rows{kept})")
        elif force:
            out.warnings.append(msg + "; kept (--force)")
            out.worse = msg + f" by more than {margin:.3f}"
        elif refuse_worse:
            out.refused = (
                msg + f" by more than {margin:.3f}; not learned (it would make the decisions worse; --force keeps it)"
            )
            return None, out
        else:
            out.worse = msg + f" by more than {margin:.3f}, the noise of {len(yk)} rows"
    scaler, lr = _fit_lr(x, yk, best[1], rank, wk)
    coef, icpt = _folded(scaler, lr, classes)
    coef, icpt = coef / temperature, icpt / temperature
    info = {"n": int(len(yk)), "counts": counts, "C": best[1], "cv": out.cv, "backoff": out.backoff}
    return CriterionHead(ids, [ids[c] for c in classes], coef, icpt, info), out


def _folded(scaler: Standardizer, lr: _RowSpaceLR, classes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Weights and intercepts on unscaled inputs, one row per class in ``classes`` order.

    ``w · (x - mean) / scale + b`` = ``(w / scale) · x + (b - w · mean / scale)``.
    A binary fit has one row (for class 1): the two-class softmax is then
    ``[0, z]``, which is the same as rows ``[-z/2, z/2]``.
    """
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    w = lr.coef_ / scale
    b = lr.intercept_ - w @ scaler.mean_
    if w.shape[0] == 1:
        w = np.vstack([-w / 2, w / 2])
        b = np.array([-b[0] / 2, b[0] / 2])
    order = [list(lr.classes_).index(c) for c in classes]
    return w[order], b[order]


def engine_keys(engine: Any) -> dict[str, Any]:
    """What a head records of the engine whose numbers it is fitted on, as :func:`fit_head`'s keyword arguments:
    the model's sha256, the label readout's prompt format, the vocabulary and hidden sizes, the attention kernels."""
    native = engine.native
    return {
        "model_sha256": engine.sha256,
        "prompt_format": engine.format_for("label").id,
        "n_vocab": native.n_vocab,
        "n_embd": native.n_embd,
        "attention": native.attention,
    }


def fit_head(
    pack: Pack,
    features: Mapping[str, np.ndarray],
    logprobs: Mapping[str, np.ndarray],
    labels: Mapping[str, Sequence[int]],
    *,
    model_sha256: str,
    prompt_format: str,
    n_vocab: int,
    n_embd: int,
    name: str = "head",
    read: str = TAIL,
    attention: str = ATTENTION,
    criteria: Sequence[str] | None = None,
    on_criterion: Callable[[str, int], None] | None = None,
    weights: Mapping[str, Sequence[float]] | None = None,
    **fit_kw: Any,
) -> tuple[Head, list[LearnOutcome]]:
    """Fit every criterion that has labels (refused ones are left out of the head).

    Args:
        pack: the criteria pack.
        features, logprobs, labels: per criterion id, the training rows' (n, F)
            features, (n, K) raw log-probs and gold option indices (criteria
            without labels are absent).
        read: where the features were read (``tail``, or ``shared:CUE``: :mod:`triage.scoring.cue`).
        attention: the attention kernels that computed them (``NativeModel.attention``).
        criteria: only these (default: every criterion with labels).
        on_criterion: called with (criterion id, rows) before each fit (a fit takes seconds to minutes).
        weights: per criterion id, each training row's weight (default: all 1).
        fit_kw: passed to :func:`fit_criterion`.
    """
    outcomes: list[LearnOutcome] = []
    heads: dict[str, CriterionHead] = {}
    for crit in pack.criteria:
        if criteria is not None and crit.id not in criteria:
            continue
        if crit.id not in labels or not len(labels[crit.id]):
            outcomes.append(
                LearnOutcome(crit.id, 0, {}, refused=f"criterion {crit.id!r} has no labels in the training rows")
            )
            continue
        if on_criterion is not None:
            on_criterion(crit.id, len(labels[crit.id]))
        kw = {"hidden_width": n_embd, **fit_kw}
        if weights is not None and crit.id in weights:
            kw["weight"] = weights[crit.id]
        fitted, outcome = fit_criterion(crit, features[crit.id], logprobs[crit.id], labels[crit.id], **kw)
        outcomes.append(outcome)
        if fitted is not None:
            heads[crit.id] = fitted
    report = {
        "settings": {k: v for k, v in fit_kw.items() if k != "c_grid"},
        "criteria": [o.to_dict() for o in outcomes],
    }
    head = Head(
        model_sha256,
        pack.hash,
        prompt_format,
        n_vocab,
        n_embd,
        heads,
        name=name,
        report=report,
        read=read,
        attention=attention,
    )
    return head, outcomes
