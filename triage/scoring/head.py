"""Learned read-out heads: a team's labels, applied at no extra cost per ticket.

A *head* is, per criterion, a multinomial logistic regression on what the model
computed at that criterion's answer position anyway:

* the **hidden state**, seen through the output layer: the logits of a fixed set
  of vocabulary tokens (:func:`feature_ids`, twice the hidden width, evenly
  spaced ids). For this family of models the logits are a linear map of the
  final hidden state (``logits = W · h``, no bias), so with at least as many
  tokens as the hidden state is wide a linear read-out of these logits is a
  linear read-out of the hidden state. Measured on the Qwen2.5 stand-in: the
  hidden state is recovered from them with held-out R² 0.997, and they come from
  the logits llama.cpp computes for the answer position anyway, so they cost
  nothing. Turning llama.cpp's embeddings on instead costs 27% more per ticket
  in one batch (every token becomes an output) or one more decode (~73 ms) for
  the answer positions alone (docs/quality.md, "Learned read-out");
* the **option log-probs** of the label readout (what zero-shot decides from).

Weights are stored as float16 (:func:`triage.learning.head_file.stored_weights`): about 3.6 KB per option.

Scoring applies the head with numpy only: ``softmax(W x + b)``, the standardising
scaler folded into ``W`` and ``b``; whether a head fits an engine and pack is
:func:`triage.scoring.setup_check.check_head`.
Fitting is :mod:`triage.learning.learn`.

The file format (``.npz``, its checks and limits) is :mod:`triage.learning.head_file`; where
heads are stored and which one a setup gets is :mod:`triage.learning.fitstore`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from triage.scoring.cue import TAIL
from triage.scoring.readout import log_normalize

FEATURES = "logits-image/1"  # which features; bump when feature_ids changes
# Every head written before the attention kernels were recorded was computed with flash attention:
# llama.cpp's default (AUTO) turns it on for the CPU backend, the only one triage uses.
ATTENTION = "flash"
ATTENTIONS = ("flash", "plain")


def feature_count(n_vocab: int, n_embd: int) -> int:
    """How many vocabulary logits make the hidden-state features: twice the hidden width."""
    return min(n_vocab, 2 * n_embd)


def feature_ids(n_vocab: int, n_embd: int) -> np.ndarray:
    """The token ids whose logits are the hidden-state features: evenly spaced over the vocabulary."""
    return np.unique(np.linspace(0, n_vocab - 1, feature_count(n_vocab, n_embd)).round().astype(np.int64))


@dataclass
class CriterionHead:
    """One criterion's read-out: ``log_softmax(coef @ x + intercept)`` over ``classes``.

    ``x`` is ``[features..., option log-probs...]``. ``classes`` are the options the
    head was fitted on; an option with too few labels to learn (``backoff``)
    keeps its zero-shot probability and the learned ones share the rest.
    """

    options: list[str]  # every option of the criterion, pack order
    classes: list[str]  # the options the head predicts
    coef: np.ndarray  # (len(classes), n_features + len(options)), scaler folded in
    intercept: np.ndarray  # (len(classes),)
    info: dict[str, object] = field(default_factory=dict)  # n, counts, C, cross-validation scores

    @property
    def source(self) -> str:
        """What a decision it makes says decided it: ``starter`` when it was fitted on the starter set alone
        (no label of the team's: :mod:`triage.learning.starter`), else ``learned``."""
        rows = self.info.get("rows")
        return "starter" if isinstance(rows, dict) and rows.get("team") == 0 else "learned"

    @property
    def backoff(self) -> list[str]:
        """Options left to the zero-shot readout (too few labels to learn)."""
        return [o for o in self.options if o not in self.classes]

    @property
    def applied(self) -> bool:
        """Whether scoring applies this read-out. ``triage learn`` stores one whose own check found it no better
        than zero-shot with ``"applied": false`` (and why, ``"not_applied"``): kept, never applied unless
        ``learn --apply``. A file written before this flag existed applies every read-out it has."""
        return self.info.get("applied", True) is not False

    @property
    def not_applied(self) -> str:
        """Why this read-out is not applied (empty when it is)."""
        return "" if self.applied else str(self.info.get("not_applied") or "its own check found it no better")

    def apply(self, features: np.ndarray, logprobs: np.ndarray) -> np.ndarray:
        """Learned log-probs over every option (pack order)."""
        x = np.concatenate([np.asarray(features, dtype=np.float64), np.asarray(logprobs, dtype=np.float64)])
        learned = log_normalize(self.coef.astype(np.float64) @ x + self.intercept)
        if not self.backoff:
            return learned
        zero = np.exp(log_normalize(np.asarray(logprobs, dtype=np.float64)))
        idx = [self.options.index(c) for c in self.classes]
        rest = [i for i in range(len(self.options)) if i not in idx]
        share = max(1e-12, 1.0 - float(zero[rest].sum()))
        out = np.empty(len(self.options))
        out[idx] = np.exp(learned) * share
        out[rest] = zero[rest]
        return np.log(np.maximum(out, 1e-300))


@dataclass
class Head:
    """Learned read-outs for some criteria of one (model, pack, prompt format)."""

    model_sha256: str
    pack_hash: str
    prompt_format: str
    n_vocab: int
    n_embd: int
    criteria: dict[str, CriterionHead]
    name: str = "head"  # what results and messages call it (kept in the file; its stored copy keeps it too)
    report: dict[str, Any] = field(default_factory=dict)
    read: str = TAIL  # where the features are read: each criterion's tail, or ``shared:CUE`` (triage.scoring.cue)
    attention: str = ATTENTION  # the attention kernels that computed them (NativeModel.attention)
    kind: str = "team"  # ``team`` (triage learn, the app's re-fit) or ``starter`` (triage.learning.starter)

    @property
    def shared(self) -> bool:
        """Whether this head reads the shared position (one cue for every criterion it covers)."""
        return self.read != TAIL

    @property
    def n_features(self) -> int:
        """Hidden-state features per criterion (before the option log-probs)."""
        return len(feature_ids(self.n_vocab, self.n_embd))

    def covers(self, criterion_id: str) -> bool:
        """Whether this head decides the criterion: it has a read-out for it, and that read-out is applied
        (:attr:`CriterionHead.applied`). A criterion it holds back stays calibrated or zero-shot."""
        h = self.criteria.get(criterion_id)
        return h is not None and h.applied

    def has(self, criterion_id: str) -> bool:
        """Whether this head has a read-out for the criterion, applied or held back (what measuring it needs)."""
        return criterion_id in self.criteria

    def held_back(self) -> dict[str, str]:
        """The criteria this head has a read-out for but does not apply, and why."""
        return {cid: h.not_applied for cid, h in self.criteria.items() if not h.applied}

    def apply(self, criterion_id: str, features: np.ndarray, logprobs: np.ndarray) -> np.ndarray:
        """Learned log-probs for one criterion (raises KeyError when it has no read-out)."""
        return self.criteria[criterion_id].apply(features, logprobs)
