"""Calibrations: per-criterion temperature and option biases on top of debiased log-probs.

The file (JSON, :func:`read_calibration` / :func:`write_calibration`) records the model sha256,
pack hash and prompt-format version it was fitted for; it is applied only where all three match.
Applying one is vector scaling in log space, per criterion: ``softmax(logp / T + b)``.

Fitting one is :mod:`triage.learning.vector_scaling` (for a pack, :mod:`triage.evaluation.calibrating`:
``triage calibrate``); where fitted files are stored, whether one fits a setup, and which one a setup gets
is :mod:`triage.learning.fitstore`.
"""

from __future__ import annotations

import json
import math
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
