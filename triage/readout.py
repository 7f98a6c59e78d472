"""Reading an answer off the next-token logits of the option letters.

The prompt ends in ``Answer:``; the next token should be one of `` A``, `` B``...
We softmax over those letters only (the decision), and report *coverage*: how
much of the full next-token distribution fell on the letters at all. Low
coverage means the model wanted to say something else, so the decision is weak.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from triage.errors import TriageError
from triage.pack import LETTERS
from triage.tokenizer import Tokenizer

LOW_COVERAGE = 0.5  # below this share of mass on the letters, the card warns


@dataclass(frozen=True)
class Readout:
    """One prompt's answer: log-probs over letter positions, and how sure the model was."""

    position_logprobs: np.ndarray  # log-softmax over the letters shown, in letter order
    coverage: float  # share of the full distribution on those letters
    top_token: int  # the single most likely next token overall
    top_prob: float


def letter_ids(tokenizer: Tokenizer, n: int) -> list[int]:
    """Token ids of `` A``, `` B``, ... for the first ``n`` letters.

    Raises:
        TriageError: a letter is not one token for this model, so it cannot be read.
    """
    ids: list[int] = []
    for letter in LETTERS[:n]:
        toks = tokenizer.encode(" " + letter)
        if len(toks) != 1:
            raise TriageError(
                f"the model's tokenizer splits ' {letter}' into {len(toks)} tokens; "
                "triage reads answers from single letter tokens and cannot use this model"
            )
        ids.append(toks[0])
    if len(set(ids)) != len(ids):
        raise TriageError("the model's tokenizer maps two option letters to the same token")
    return ids


def read(logits: np.ndarray, ids: list[int]) -> Readout:
    """Softmax ``logits`` over ``ids`` and measure coverage over the whole vocabulary."""
    logits = logits.astype(np.float64, copy=False)
    m = float(np.max(logits))
    log_z = m + float(np.log(np.sum(np.exp(logits - m))))
    chosen = logits[ids]
    cm = float(np.max(chosen))
    log_zc = cm + float(np.log(np.sum(np.exp(chosen - cm))))
    top = int(np.argmax(logits))
    return Readout(
        position_logprobs=chosen - log_zc,
        coverage=float(np.exp(log_zc - log_z)),
        top_token=top,
        top_prob=float(np.exp(m - log_z)),
    )
