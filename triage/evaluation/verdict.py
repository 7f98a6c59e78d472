"""``triage learn``'s verdict per criterion: applied, stored but not applied, or not learned, in one line.

What decides:

* with ``--holdout``, the rows the head never saw: the learned head is applied when its balanced
  accuracy there is higher than zero-shot's (the readout alone, what scoring falls back to); else it
  is stored, not applied. TF-IDF is named beside it (a keyword model fitted on the same labels: if it
  does better, the labels carry more than the head found), but cannot be applied, so it decides nothing.
* without ``--holdout`` (or when no held-out row is labelled for the criterion), cross-validation on
  the training rows against zero-shot on the same rows: a head worse by more than the noise of those
  rows (:func:`triage.learning.learn.worse_margin`) is stored, not applied; one worse by less is applied,
  and the line says it is below.

``apply`` (``learn --apply``) applies a head its own check found no better, and the line says so. A
head is never applied while its own check says it is worse unless the line says it is.

A head applied while it is **no surer than chance** (1 / the options) says so on its verdict line, the first
line learn prints about it, not only in a warning at the end: held out, when the learned balanced accuracy's
95% interval reaches chance; in cross-validation, when it is within the noise of the rows of chance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from triage.learning.learn import LearnOutcome, worse_margin

if TYPE_CHECKING:
    from triage.scoring.head import Head

APPLY_HINT = "use --apply to apply it anyway"


@dataclass(frozen=True)
class Verdict:
    """One criterion's verdict.

    Attributes:
        criterion: its id.
        applied: True (applied), False (stored, not applied), None (not learned: nothing stored for it).
        line: the sentence for the report (starts with the criterion id).
        why: for a head stored but not applied, the reason in a few words (kept in the head file).
        weak: applied, but no surer than chance (the line says so).
    """

    criterion: str
    applied: bool | None
    line: str
    why: str = ""
    weak: bool = False


def _bacc(entry: dict[str, Any] | None, variant: str) -> float | None:
    m = (entry or {}).get(variant) or {}
    value = m.get("balanced_accuracy")
    return None if value is None or value != value else float(value)  # NaN: not measured


def verdict(outcome: LearnOutcome, held: dict[str, Any] | None, *, apply: bool = False) -> Verdict:
    """The verdict on one criterion's fit (``outcome``), from its held-out entry
    (:func:`triage.evaluation.holdout.holdout_metrics`; None without ``--holdout``) or its cross-validation."""
    cid = outcome.criterion
    if outcome.refused:
        return Verdict(cid, None, f"{cid}: not learned ({outcome.refused}): it stays calibrated or zero-shot")
    learned, zero = _bacc(held, "learned"), _bacc(held, "zero-shot")
    if learned is not None and zero is not None:
        n = held["n"]  # type: ignore[index]
        tfidf = _bacc(held, "tfidf")
        if learned > zero:
            ci = ((held or {}).get("learned") or {}).get("balanced_accuracy_ci95")
            k = len((held or {}).get("options") or outcome.counts or ())
            if tfidf is None:
                versus = f"beats zero-shot on the {n} held-out rows ({learned:.3f} against {zero:.3f})"
            elif learned > tfidf:
                versus = (
                    f"beats zero-shot and TF-IDF on the {n} held-out rows "
                    f"({learned:.3f} against {zero:.3f} and {tfidf:.3f})"
                )
            else:
                versus = (
                    f"beats zero-shot on the {n} held-out rows ({learned:.3f} against {zero:.3f}) "
                    f"but not TF-IDF ({tfidf:.3f})"
                )
            if ci and k and ci[0] <= 1.0 / k:
                return Verdict(
                    cid,
                    True,
                    f"{cid}: learned {versus}: applied, but no surer than chance yet: its 95% interval "
                    f"{ci[0]:.2f}-{ci[1]:.2f} reaches chance ({1.0 / k:.2f}); expect to correct it often, and label "
                    "more tickets",
                    weak=True,
                )
            return Verdict(cid, True, f"{cid}: learned {versus}: applied")
        tf = f"; TF-IDF {tfidf:.3f}" if tfidf is not None else ""
        why = f"not better than zero-shot on {n} held-out rows, {learned:.3f} against {zero:.3f}"
        said = f"{cid}: learned is not better than zero-shot on the {n} held-out rows ({learned:.3f} against {zero:.3f}"
        said += f"{tf})"
        return _worse(cid, said, why, apply)
    lead = "no held-out row is labelled for it; " if held is not None else ""
    cv = outcome.cv
    if not cv.get("folds"):
        return Verdict(
            cid,
            True,
            f"{cid}: {lead}learned, but not cross-validated (an option has a single label), so not "
            "checked against zero-shot: applied",
        )
    c, z, n = cv["balanced_accuracy"], cv.get("zero_shot_balanced_accuracy", float("nan")), outcome.n
    how = f"{cv['folds']}-fold cross-validation on the {n} training rows"
    if outcome.worse:
        why = f"worse than zero-shot in cross-validation, {c:.3f} against {z:.3f}, beyond the noise of {n} rows"
        said = (
            f"{cid}: {lead}learned is worse than zero-shot in {how} ({c:.3f} against {z:.3f}, by more than "
            f"their noise, {worse_margin(n):.3f})"
        )
        return _worse(cid, said, why, apply)
    if c < z:
        return Verdict(
            cid,
            True,
            f"{cid}: {lead}learned is below zero-shot in {how} ({c:.3f} against {z:.3f}), by less than their "
            f"noise ({worse_margin(n):.3f}; cross-validation fits on fewer rows and reads low): applied; "
            "--holdout 0.3 checks it on rows it never saw",
        )
    check = "" if lead else " (no held-out check: --holdout 0.3 gives one)"
    said = f"{cid}: {lead}learned beats zero-shot in {how} ({c:.3f} against {z:.3f}){check}"
    k = len(outcome.counts or ())
    if k and c < 1.0 / k + worse_margin(n):  # the warning learn gives at the end, said here first
        return Verdict(
            cid,
            True,
            f"{said}: applied, but no surer than chance yet: within {worse_margin(n):.3f} of chance "
            f"({1.0 / k:.3f}) on {n} rows; expect to correct it often, and label more tickets",
            weak=True,
        )
    return Verdict(cid, True, f"{said}: applied")


def _worse(cid: str, said: str, why: str, apply: bool) -> Verdict:
    if apply:
        return Verdict(cid, True, f"{said}: applied anyway (--apply)")
    return Verdict(cid, False, f"{said}: stored, not applied ({APPLY_HINT})", why)


def verdicts(
    outcomes: Sequence[LearnOutcome], holdout: dict[str, dict[str, Any]] | None, *, apply: bool = False
) -> list[Verdict]:
    """One :func:`verdict` per criterion learn tried, in pack order; ``holdout`` None without ``--holdout``."""
    return [verdict(o, None if holdout is None else holdout.get(o.criterion, {}), apply=apply) for o in outcomes]


def mark(head: Head, found: Sequence[Verdict]) -> None:
    """Record each verdict in the head: per criterion ``applied``, ``verdict`` and, when not applied, why
    (:attr:`triage.scoring.head.CriterionHead.applied` reads it back), and the lines in its report."""
    for v in found:
        h = head.criteria.get(v.criterion)
        if h is None or v.applied is None:
            continue
        h.info["applied"] = v.applied
        h.info["verdict"] = v.line
        if v.applied:
            h.info.pop("not_applied", None)
        else:
            h.info["not_applied"] = v.why
    head.report["verdicts"] = [v.line for v in found]
