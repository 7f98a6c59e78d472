"""Calibration files: per-criterion temperature and option biases on top of debiased log-probs.

The file records the model sha256, pack hash and prompt-format version it was
fitted for; it is applied only where all three match, and refused with a clear
message otherwise. Fitting lives in :func:`fit_calibration` (see ``triage calibrate``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from triage.debias import log_normalize
from triage.errors import InputError

SCHEMA = "triage.calibration/1"


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

    def apply(self, criterion_id: str, logprobs: np.ndarray) -> np.ndarray:
        """Calibrated log-probs for one criterion (unchanged when it was not fitted)."""
        cal = self.criteria.get(criterion_id)
        if cal is None:
            return logprobs
        ids = self._option_ids.get(criterion_id)
        bias = np.array([cal.bias.get(i, 0.0) for i in ids]) if ids else np.zeros_like(logprobs)
        return log_normalize(logprobs / cal.temperature + bias)

    def to_dict(self) -> dict[str, Any]:
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


def read_calibration(path: str | Path) -> Calibration:
    """Read a calibration file.

    Raises:
        InputError: missing, not JSON, or not a triage calibration.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"calibration file {path} does not exist", hint="make one with `triage calibrate TRAIN.jsonl --pack PACK -o CAL.json`") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"calibration file {path} cannot be read as JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise InputError(f"{path} is not a triage calibration file (expected schema {SCHEMA})")
    try:
        crits = {k: CriterionCalibration(float(v["temperature"]), {o: float(b) for o, b in v["bias"].items()}) for k, v in data["criteria"].items()}
        return Calibration(
            data["model_sha256"], data["pack_hash"], data["prompt_format"], data.get("orderings", "cyclic"),
            bool(data.get("prior", False)), crits, name=path.name, report=data.get("report", {}),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"calibration file {path} is malformed: {exc}") from None


def check_match(cal: Calibration, *, model_sha256: str, pack_hash: str, prompt_format: str) -> str | None:
    """Why ``cal`` does not fit this model, pack and prompt format, or None when it does."""
    problems = []
    if cal.model_sha256 != model_sha256:
        problems.append(f"model sha256 {cal.model_sha256[:12]}… ≠ running model {model_sha256[:12]}…")
    if cal.pack_hash != pack_hash:
        problems.append(f"pack hash {cal.pack_hash} ≠ {pack_hash}")
    if cal.prompt_format != prompt_format:
        problems.append(f"prompt format {cal.prompt_format} ≠ {prompt_format}")
    return "; ".join(problems) or None


def load_calibration(path: str | Path, *, engine: Any, pack: Any) -> Calibration:
    """Read a calibration file and check that it was fitted for this engine and pack.

    Raises:
        InputError: the file does not match (naming what differs), or cannot be read.
    """
    cal = read_calibration(path)
    why = check_match(cal, model_sha256=engine.sha256, pack_hash=pack.hash, prompt_format=engine.fmt.id)
    if why:
        raise InputError(f"calibration {path} was fitted for another setup: {why}", hint="re-run `triage calibrate` for this model and pack, or leave out --calibration")
    cal._option_ids = {c.id: [o.id for o in c.options] for c in pack.criteria}
    return cal
