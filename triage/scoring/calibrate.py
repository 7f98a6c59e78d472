"""Calibrations: per-criterion temperature and option biases on top of debiased log-probs.

The file (JSON, :func:`read_calibration` / :func:`write_calibration`) records the model sha256,
pack hash and prompt-format version it was fitted for; it is applied only where all three match.
Fitting a pack's calibration lives in :mod:`triage.evaluation.calibrating` (``triage calibrate``).

Fitting is vector scaling in log space: per criterion, ``z = logp / T + b`` and
``p = softmax(z)``, with ``T = exp(u)``. The objective is the training NLL plus
``l2_bias * |b|^2 + l2_log_t * u^2`` (a Gaussian prior toward T = 1, b = 0),
minimised by damped Newton steps on the few parameters: numpy only.

Where fitted files are stored, whether one fits a setup, and which one a setup gets is
:mod:`triage.scoring.fitstore`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from triage import gate
from triage.bounded import Bounded, loads_json
from triage.errors import InputError
from triage.scoring.readout import log_normalize
from triage.store.files import write_json_atomic

SCHEMA = "triage.calibration/1"
MIN_PER_OPTION = 5  # fewer gold labels than this for any option: refuse the criterion
HOLDOUT_FRACTION = 0.25
HOLDOUT_SALT = "triage-holdout/1"  # not the dev/train split's salt: a different quarter
L2_BIAS = 0.1  # weak: b lives in the scaled space, where logp / T spans many nats when T << 1
L2_LOG_T = 0.1  # weak: cyclic readouts are flat, the fitted T is often 0.05-0.2
MAX_NEWTON_STEP = 4.0  # largest change of log T or of a bias in one Newton step
MAX_ABS_LOG_T = 12.0  # T stays within e^-12 .. e^12


@dataclass
class CriterionCalibration:
    """Vector scaling in log space: ``softmax(logp / temperature + bias)``."""

    temperature: float
    bias: dict[str, float]


@dataclass
class Calibration:
    """A fitted calibration for one (model, pack, prompt format)."""

    model_sha256: str
    pack_hash: str
    prompt_format: str
    orderings: str
    prior: bool
    criteria: dict[str, CriterionCalibration]
    name: str = "calibration"
    report: dict[str, Any] = field(default_factory=dict)
    _option_ids: dict[str, list[str]] = field(default_factory=dict, repr=False)

    def covers(self, criterion_id: str) -> bool:
        """Whether the criterion was fitted (others are left as they are)."""
        return criterion_id in self.criteria

    def apply(self, criterion_id: str, logprobs: np.ndarray) -> np.ndarray:
        """Calibrated log-probs for one criterion (unchanged when it was not fitted)."""
        cal = self.criteria.get(criterion_id)
        if cal is None:
            return logprobs
        ids = self._option_ids.get(criterion_id)
        bias = np.array([cal.bias.get(i, 0.0) for i in ids]) if ids else np.zeros_like(logprobs)
        return log_normalize(logprobs / cal.temperature + bias)

    def to_dict(self) -> dict[str, object]:
        """The JSON form."""
        return {
            "schema": SCHEMA,
            "model_sha256": self.model_sha256,
            "pack_hash": self.pack_hash,
            "prompt_format": self.prompt_format,
            "orderings": self.orderings,
            "prior": self.prior,
            "criteria": {k: {"temperature": v.temperature, "bias": v.bias} for k, v in self.criteria.items()},
            "report": self.report,
        }


MAX_CALIBRATION_BYTES = gate.KINDS["calibration"].limit  # a real one is a few KB


class DamagedCalibration(InputError):
    """A calibration file that is damaged or not a calibration (not one for another setup)."""


def read_calibration(path: str | Path) -> Calibration:
    """Read a calibration file, bounded in size and nesting, every number checked.

    Raises:
        InputError: missing or unreadable.
        DamagedCalibration: too large, not JSON, nested too deep, or not a triage calibration.
    """
    path = Path(path)
    try:
        raw = gate.read_bytes(path, "calibration")  # a FIFO, device or folder is refused, never waited on
    except FileNotFoundError:
        raise InputError(
            f"calibration file {path} does not exist",
            hint="make one with `triage calibrate TRAIN.jsonl --pack PACK -o CAL.json`",
        ) from None
    except IsADirectoryError:
        raise InputError(f"calibration path {path} is a directory; pass the .json file itself") from None
    except Bounded as exc:
        raise DamagedCalibration(f"calibration file {path} is not a calibration: {exc}") from None
    except gate.NotARegularFile as exc:
        raise InputError(f"calibration file {path} cannot be read: {exc.strerror}") from None
    except OSError as exc:
        raise InputError(f"calibration file {path} cannot be read: {exc.strerror or exc}") from None
    try:
        data = loads_json(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DamagedCalibration(f"calibration file {path} cannot be read as JSON: {exc}") from None
    except Bounded as exc:
        raise DamagedCalibration(f"calibration file {path} is not a calibration: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise DamagedCalibration(f"{path} is not a triage calibration file (expected schema {SCHEMA})")
    try:
        crits = {
            str(k): CriterionCalibration(
                _finite(v["temperature"], positive=True), {str(o): _finite(b) for o, b in v["bias"].items()}
            )
            for k, v in data["criteria"].items()
        }
        return Calibration(
            str(data["model_sha256"]),
            str(data["pack_hash"]),
            str(data["prompt_format"]),
            str(data.get("orderings", "cyclic")),
            bool(data.get("prior", False)),
            crits,
            name=path.name,
            report=data.get("report", {}),
        )
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise DamagedCalibration(f"calibration file {path} is malformed: {exc}") from None


def _finite(value: object, *, positive: bool = False) -> float:
    """A number from a calibration file: finite (and above 0 for a temperature), never a string or a bool."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{value!r} is not a number")
    number = float(value)
    if not math.isfinite(number) or (positive and number <= 0):
        raise ValueError(f"{value!r} is not a {'positive ' if positive else ''}finite number")
    return number


# -- fitting ----------------------------------------------------------------------------


@dataclass
class FitOutcome:
    """One criterion's fit: parameters, or why it was refused; and the holdout check."""

    criterion: str
    n: int
    counts: dict[str, int]
    temperature: float | None = None
    bias: dict[str, float] | None = None
    refused: str | None = None
    frozen: list[str] = field(default_factory=list)  # options whose bias was held at 0 (too few labels)
    holdout: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """Plain data for reports and the calibration file's ``report``."""
        return {k: v for k, v in self.__dict__.items()}


def _objective(
    theta: np.ndarray,
    x: np.ndarray,
    onehot: np.ndarray,
    w: np.ndarray,
    free: np.ndarray,
    l2_bias: float,
    l2_log_t: float,
) -> tuple[float, np.ndarray, np.ndarray]:
    """Penalised NLL, its gradient and Hessian in theta = [u, b_free...]; T = exp(u)."""
    n, k = x.shape
    u = theta[0]
    b = np.zeros(k)
    b[free] = theta[1:]
    a = math.exp(-u)
    z = x * a + b
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    p = np.exp(logp)
    value = float(-(w * (logp * onehot).sum(axis=1)).sum() + l2_bias * (b**2).sum() + l2_log_t * u * u)
    r = p - onehot  # dNLL/dz per row
    ax = a * x  # -dz/du
    g_b = (w[:, None] * r).sum(axis=0) + 2 * l2_bias * b
    g_u = float(-(w * (r * ax).sum(axis=1)).sum() + 2 * l2_log_t * u)
    # Hessian of the NLL in z is diag(p) - p p^T per row.
    sp = p * ax  # S @ ax = p*ax - p (p.ax)
    s_ax = sp - p * (p * ax).sum(axis=1, keepdims=True)
    h_uu = float((w * ((ax * s_ax).sum(axis=1) + (r * ax).sum(axis=1))).sum() + 2 * l2_log_t)
    h_ub = -(w[:, None] * s_ax).sum(axis=0)
    h_bb = np.diag((w[:, None] * p).sum(axis=0)) - np.einsum("n,ni,nj->ij", w, p, p) + 2 * l2_bias * np.eye(k)
    grad = np.concatenate([[g_u], g_b[free]])
    hess = np.empty((1 + len(free), 1 + len(free)))
    hess[0, 0] = h_uu
    hess[0, 1:] = hess[1:, 0] = h_ub[free]
    hess[1:, 1:] = h_bb[np.ix_(free, free)]
    return value, grad, hess


def fit_vector_scaling(
    logprobs: np.ndarray,
    y: Sequence[int] | np.ndarray,
    *,
    l2_bias: float = L2_BIAS,
    l2_log_t: float = L2_LOG_T,
    frozen: Sequence[int] = (),
    weights: np.ndarray | None = None,
    max_iter: int = 100,
) -> tuple[float, np.ndarray]:
    """Fit temperature and per-option biases by penalised maximum likelihood.

    Args:
        logprobs: (n, k) uncalibrated log-probabilities.
        y: gold option indices.
        l2_bias: L2 weight on the biases (toward 0).
        l2_log_t: L2 weight on log T (toward T = 1).
        frozen: option indices whose bias stays 0.
        weights: per-row weights (default 1).

    Returns:
        (temperature, bias vector of length k).
    """
    x = np.asarray(logprobs, dtype=np.float64)
    n, k = x.shape
    onehot = np.zeros((n, k))
    onehot[np.arange(n), np.asarray(y, dtype=int)] = 1.0
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    free = np.array([i for i in range(k) if i not in set(frozen)], dtype=int)
    theta = np.zeros(1 + len(free))
    value, grad, hess = _objective(theta, x, onehot, w, free, l2_bias, l2_log_t)
    for _ in range(max_iter):
        # Damped Newton: the u-u term can be indefinite far from the optimum, so add
        # damping until the system is positive definite, then backtrack on the value.
        damp = 0.0
        while True:
            try:
                np.linalg.cholesky(hess + damp * np.eye(len(theta)))
                break
            except np.linalg.LinAlgError:
                damp = max(1e-6, damp * 10)
        step = -np.linalg.solve(hess + damp * np.eye(len(theta)), grad)
        # A near-flat direction can ask for an enormous step (log T of -1800 on real cfpb
        # readouts): cap it, and never evaluate where T leaves [e^-12, e^12].
        biggest = float(np.max(np.abs(step)))
        if biggest > MAX_NEWTON_STEP:
            step *= MAX_NEWTON_STEP / biggest
        t = 1.0
        accepted = False
        while t >= 1e-10:
            cand = theta + t * step
            if abs(cand[0]) <= MAX_ABS_LOG_T:
                cv, cg, ch = _objective(cand, x, onehot, w, free, l2_bias, l2_log_t)
                if math.isfinite(cv) and cv <= value + 1e-4 * t * float(grad @ step):
                    accepted = True
                    break
            t *= 0.5
        if not accepted:  # no descent left along this step: theta is as good as it gets
            break
        done = abs(value - cv) < 1e-10 * max(1.0, abs(value)) and float(np.max(np.abs(cg))) < 1e-6
        theta, value, grad, hess = cand, cv, cg, ch
        if done or float(np.max(np.abs(grad))) < 1e-8:
            break
    b = np.zeros(k)
    b[free] = theta[1:]
    return math.exp(theta[0]), b


def apply_vector_scaling(logprobs: np.ndarray, temperature: float, bias: np.ndarray) -> np.ndarray:
    """Row-wise ``log_softmax(logp / T + b)`` for an (n, k) array."""
    z = np.asarray(logprobs, dtype=np.float64) / temperature + bias
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def write_calibration(cal: Calibration, path: str | Path) -> Path:
    """Write ``cal`` as JSON, atomically; NaN (a report on a tiny holdout) as null."""
    return write_json_atomic(path, cal.to_dict())


def check_options(cal: Calibration, *, orderings: str, prior: bool) -> str | None:
    """Why ``cal`` does not fit these scoring options (it was fitted on other log-probs), or None."""
    problems = []
    if cal.orderings != orderings:
        problems.append(f"fitted on orderings={cal.orderings}, scoring with orderings={orderings}")
    if cal.prior != prior:
        problems.append(
            f"fitted {'with' if cal.prior else 'without'} the prior, scoring {'with' if prior else 'without'} it"
        )
    return "; ".join(problems) or None
