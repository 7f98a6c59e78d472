"""Score labelled rows through the engine (with the readout cache) and build the eval report."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from triage.domain.pack import Criterion, Pack
from triage.domain.ticket import Ticket, make_ticket
from triage.errors import TriageError
from triage.evaluation import metrics
from triage.evaluation.cache import CacheKey, Outcome, ReadoutCache
from triage.evaluation.data import BadRow, LabelledRow, LabelledSet
from triage.evaluation.variants import (
    CALIBRATED,
    CYCLIC,
    LEARNED,
    PRIOR,
    RAW,
    RAW_CALIBRATED,
    RAW_PRIOR,
    prior_from,
    readings,
)
from triage.lab.options import (
    DEFAULT_MODE,
    DEFAULT_READOUT,
    LabOptions,
    Mode,
    Orderings,
    ReadoutName,
    as_readout,
    effective_orderings,
)
from triage.scoring.cue import TAIL, check_read
from triage.scoring.head import FEATURES as FEATURES_KIND

if TYPE_CHECKING:
    from triage.scoring.calibrate import Calibration
    from triage.scoring.engine import Engine
    from triage.scoring.head import CriterionHead, Head

SCHEMA = "triage.eval/1"
ORDERINGS: Orderings = (
    "cyclic"  # the letter readout is always asked in every rotation: raw is the identity's readout alone
)


def orderings_for(readout: str) -> Orderings:
    """What eval asks: every rotation for letters; the label readout has no option order."""
    return effective_orderings(readout, ORDERINGS)


def mode_for(readout: str) -> Mode:
    """How eval scores: the label readout as `triage score` and the app do (fanout, the default), so that
    calibrations and learned heads are fitted on the numbers they will be applied to; letters serially,
    one rotation after another, as they were measured before the label readout."""
    return DEFAULT_MODE if readout == "label" else "serial"


class Scorer:
    """Gets each ticket's :class:`Outcome` from the cache, or scores it once and stores it.

    Args:
        engine: a loaded :class:`triage.scoring.engine.Engine`.
        pack: the criteria pack.
        cache: the readout cache.
        readout: ``label`` (options by name) or ``letter`` (every rotation).
    """

    def __init__(
        self, engine: Engine, pack: Pack, cache: ReadoutCache, readout: str = DEFAULT_READOUT, read: str = TAIL
    ) -> None:
        self.engine = engine
        self.pack = pack
        self.cache = cache
        self.readout: ReadoutName = as_readout(readout)
        self.read = check_read(read)
        if self.read != TAIL and readout != "label":
            raise TriageError("the shared read position reads options by name: use --readout label", exit_code=2)
        self.orderings = orderings_for(readout)
        self.mode = mode_for(readout)
        # The mode is part of the key (batch shapes round differently); serial keeps the bare orderings,
        # as every readout cached before the mode was recorded was scored serially. A shared read
        # position adds its name: every criterion is then read at the cue (triage.scoring.cue).
        how = self.orderings if self.mode == "serial" else f"{self.orderings}@{self.mode}"
        how += "" if self.read == TAIL else f"+{self.read}"
        # The attention kernels too, when they are not the ones every cached entry was computed with.
        attention = getattr(getattr(engine, "native", None), "attention", "flash")
        how += "" if attention == "flash" else f"+{attention}"
        self.key = CacheKey(engine.sha256, pack.hash, engine.format_for(readout).id, engine.n_ctx, how)
        self.features = False  # also get each criterion's answer-position features (learned heads)
        self.options = LabOptions(mode=self.mode, orderings=self.orderings, readout=self.readout)
        self.scored = 0
        self.scoring_s = 0.0

    def outcome(self, ticket: Ticket) -> tuple[Outcome, bool]:
        """(outcome, True when it came from the cache).

        With :attr:`features` set (the label readout only), the outcome also holds
        each criterion's answer-position features, cached beside the readouts; a
        ticket cached without them is scored again.
        """
        text_key = self.text_key(ticket)
        hit = self.cached(text_key)
        if hit is not None:
            return hit, True
        from triage.lab import score as lab

        t0 = time.perf_counter()
        opts = self.options
        if self.read != TAIL:
            result, raw, feats = lab.readouts_and_features(self.engine, ticket, self.pack, opts, read=self.read)
            if not self.features:
                feats = {}
        elif self.features:
            result, raw, feats = lab.readouts_and_features(self.engine, ticket, self.pack, opts)
        else:
            (result, raw), feats = lab.raw_readouts(self.engine, ticket, self.pack, opts), {}
        ms = (time.perf_counter() - t0) * 1000
        if not result.complete:
            raise TriageError(f"ticket {ticket.id} was not scored completely: {'; '.join(result.warnings)}")
        warnings = [w for w in result.warnings if not w.startswith("stable prefix changed")]
        out = Outcome(raw, warnings, ms, feats or None)
        self.store(text_key, out)
        self.scored += 1
        self.scoring_s += ms / 1000
        return out, False

    def text_key(self, ticket: Ticket) -> str:
        """What names ``ticket`` in the cache: the sha256 of its text as the prompts read it.

        That is the ticket's own sha256 when it fits the ticket budget (:data:`~triage.scoring.prompt.TICKET_TOKENS`),
        else the sha256 of the text after the budget's cut (:meth:`~triage.scoring.prompt.PromptBuilder.cut`): a
        readout is a function of the text scored, so a ticket cut to another budget is another entry, and one
        that no budget cuts is scored once for them all. Tokenizes the ticket (no weights are loaded for it).
        """
        import hashlib

        from triage.lab.seams import plain_readout

        builder = self.engine.builder(self.pack, plain_readout(self.options))
        cut = builder.cut(ticket.text, self.engine.n_ctx, ticket.messages)
        return ticket.sha256 if cut.text == ticket.text else hashlib.sha256(cut.text.encode("utf-8")).hexdigest()

    def cached(self, sha256: str) -> Outcome | None:
        """The cached outcome of the text named ``sha256`` (:meth:`text_key`) under this scorer's key (with its
        features when :attr:`features` is set: one cached without them is a miss), or None."""
        wanted = (FEATURES_KIND, [c.id for c in self.pack.criteria]) if self.features else None
        return self.cache.get(self.key, sha256, wanted)

    def store(self, sha256: str, out: Outcome) -> None:
        """Cache ``out`` (and its features, if any) for the text named ``sha256`` (:meth:`text_key`) under this
        scorer's key."""
        self.cache.put(self.key, sha256, out)
        if out.features:
            self.cache.put_features(self.key, sha256, FEATURES_KIND, out.features)

    def prior(self) -> dict[str, np.ndarray]:
        """The content-free prior per criterion (the engine's "N/A" ticket, through the cache)."""
        from triage.lab.prior import PRIOR_TEXT

        out, _ = self.outcome(make_ticket(PRIOR_TEXT, "prior"))
        return prior_from(out)


@dataclass
class Scored:
    """Rows that were scored, their outcomes, and rows the engine could not score."""

    rows: list[LabelledRow] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    failed: list[BadRow] = field(default_factory=list)
    known: int = 0  # rows whose outcome was at hand (kept in the history), not scored

    @property
    def cut(self) -> int:
        """How many tickets had their middle cut to fit the context."""
        return sum(o.cut for o in self.outcomes)


class OutcomeSource(Protocol):
    """What :func:`score_rows` asks: a ticket's outcome and whether it came from a cache (a :class:`Scorer`, or
    the Ray workers' returns)."""

    def outcome(self, ticket: Ticket) -> tuple[Outcome, bool]: ...


def score_rows(
    scorer: OutcomeSource,
    rows: Sequence[LabelledRow],
    on_row: Callable[[bool], None] | None = None,
    known: dict[str, Outcome] | None = None,
) -> Scored:
    """Score every row; ``on_row(hit)`` is called after each (for a progress bar).

    ``known``: outcomes already at hand, by ticket sha256; those rows are not scored (a hit).
    """
    out = Scored()
    for row in rows:
        if known is not None and row.ticket.sha256 in known:
            out.rows.append(row)
            out.outcomes.append(known[row.ticket.sha256])
            out.known += 1
            if on_row:
                on_row(True)
            continue
        try:
            outcome, hit = scorer.outcome(row.ticket)
        except TriageError as exc:
            out.failed.append(BadRow(row.line, f"line {row.line} (id {row.id}): not scored: {exc.message}"))
            hit = False
        else:
            out.rows.append(row)
            out.outcomes.append(outcome)
        if on_row:
            on_row(hit)
    return out


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
    learn_kw: dict[str, Any] = field(default_factory=dict)  # triage.scoring.learn.fit_criterion's options
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
) -> tuple[dict[str, Any], Any]:
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


def stack_features(outcomes: Sequence[Outcome], cid: str) -> np.ndarray:
    """One criterion's answer-position features over many outcomes, (n, F).

    Raises:
        TriageError: an outcome was scored without features.
    """
    if any(o.features is None or cid not in o.features for o in outcomes):
        raise TriageError("the learned variant needs each ticket's answer-position features; score with features on")
    return np.stack([o.features[cid] for o in outcomes])  # type: ignore[index]


def fit_inputs(
    pack: Pack, labels: Sequence[Any], outcomes: Sequence[Outcome]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, list[int]]]:
    """What a head is fitted on, per criterion with labels: ``(features, raw log-probs, gold option indices)``.

    ``labels[i]`` is row i's ``{criterion: option id}`` and ``outcomes[i]`` its score (eval's cache, a fresh
    score, or a history row's kept inputs through :func:`triage.evaluation.sources.kept_outcome`): the one
    assembly ``triage learn``, the app's re-fit and the learning-loop replay share.
    """
    from triage.evaluation.variants import readings

    features, logprobs, gold_idx = {}, {}, {}
    for crit in pack.criteria:
        have = [i for i, lab in enumerate(labels) if crit.id in lab]
        if not have:
            continue
        outs = [outcomes[i] for i in have]
        ids = [o.id for o in crit.options]
        features[crit.id] = stack_features(outs, crit.id)
        logprobs[crit.id] = readings(crit, outs, None).raw
        gold_idx[crit.id] = [ids.index(labels[i][crit.id]) for i in have]
    return features, logprobs, gold_idx


def _head_metrics(head: CriterionHead, x_dev: np.ndarray, r_dev: Any, y_dev: list[int]) -> dict[str, object]:
    """A criterion head (:class:`triage.scoring.head.CriterionHead`) applied to the dev rows, measured."""
    k = len(r_dev.criterion.options)
    out = np.stack([head.apply(f, lp) for f, lp in zip(x_dev, r_dev.raw, strict=True)]) if len(y_dev) else r_dev.raw
    return variant_metrics(out, y_dev, k, [[0]] * len(y_dev), r_dev.raw_coverage)


def _learned_entry(
    entry: dict[str, Any],
    crit: Criterion,
    plan: CalibrationPlan,
    dev: Scored,
    r_dev: Any,
    prior: Any,
    y_dev: list[int],
    baseline: bool,
) -> None:
    """The ``learned`` variant (fitted on every training row) and the learning curve, into ``entry``.

    ``r_dev``: the dev rows' readings of ``crit`` (:func:`readings`), computed once by the caller.
    """
    from triage.scoring.learn import fit_criterion

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
