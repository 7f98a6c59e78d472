"""Reading an answer off the model's logits after ``Answer:``.

Two readouts:

* **label** (the default): each option has an answer word (``billing``). Its
  probability is the model's probability of saying that answer, normalised over
  the options. When every answer is one token and no two share it, that is the
  next-token logits of those tokens (:func:`read_first`). When two answers begin
  with the same token, or an answer is several tokens, each option's whole answer
  is scored by teacher forcing: its tokens are decoded after the tail, one
  sequence per option, and its log-probability is the sum over its tokens
  (:func:`read_whole`). Never a first-token comparison that cannot tell options apart.
* **letter**: the tail lists the options as ``A.``, ``B.``, ...; the next token
  should be one of `` A``, `` B``... (:func:`read`).

Both softmax over the options only (the decision), and report *coverage*: how
much of the full next-token distribution fell on the options' first tokens at
all. Low coverage means the model wanted to say something else, so the decision
is weak.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from triage.errors import TriageError
from triage.scoring.debias import log_normalize
from triage.scoring.pack import LETTERS
from triage.scoring.tokenizer import Tokenizer

LOW_COVERAGE = 0.5  # below this share of mass on the letters, the card warns


@dataclass(frozen=True)
class Readout:
    """One prompt's answer: log-probs over letter positions, and how sure the model was."""

    position_logprobs: np.ndarray  # log-softmax over the letters shown, in letter order
    coverage: float  # share of the full distribution on those letters
    top_token: int  # the single most likely next token overall
    top_prob: float
    features: np.ndarray | None = None  # the answer position's logits on a fixed token set (see triage.scoring.head)


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


@dataclass(frozen=True)
class AnswerPlan:
    """How one criterion's options are read by name.

    ``tokens[i]`` are option ``i``'s answer tokens (what follows ``Answer:``).
    ``whole`` is True when the first tokens alone cannot decide: two options share
    a first token, or an answer is several tokens. Then every option's whole
    answer is scored by teacher forcing.
    """

    tokens: tuple[tuple[int, ...], ...]
    whole: bool

    @property
    def first(self) -> list[int]:
        """Each option's first answer token."""
        return [t[0] for t in self.tokens]

    @property
    def extra_tokens(self) -> int:
        """Tokens decoded after the tail to score whole answers (0 for first-token reads)."""
        return sum(len(t) - 1 for t in self.tokens) if self.whole else 0


def answer_plan(answers: list[tuple[int, ...]], texts: list[str]) -> AnswerPlan:
    """Check a criterion's answer tokens and choose first-token or whole-answer reading.

    Args:
        answers: each option's answer tokens.
        texts: the answers as text (for messages).

    Raises:
        TriageError: an answer is no token at all, or one answer's tokens are the
            start of another's (``yes`` and ``yes please``): the shorter one's
            probability would include the longer one's, so they cannot be compared.
    """
    for toks, text in zip(answers, texts, strict=True):
        if not toks:
            raise TriageError(f"the answer {text!r} tokenizes to nothing; give the option a real answer word")
    for i, a in enumerate(answers):
        for j, b in enumerate(answers):
            if i != j and len(a) <= len(b) and b[: len(a)] == a:
                raise TriageError(
                    f"the answer {texts[i]!r} is the start of the answer {texts[j]!r} for this model's tokenizer, "
                    "so their probabilities cannot be compared",
                    hint="reword one of them (`answer = \"...\"` in the pack) so neither begins with the other",
                )
    firsts = [a[0] for a in answers]
    whole = len(set(firsts)) < len(firsts) or any(len(a) > 1 for a in answers)
    return AnswerPlan(tuple(tuple(a) for a in answers), whole)


def read_first(logits: np.ndarray, plan: AnswerPlan) -> Readout:
    """Options by name, when every answer is its own single token: the next-token logits decide."""
    if plan.whole:
        raise ValueError("this criterion's answers need whole-answer scoring (read_whole)")
    return read(logits, plan.first)


def read_whole(tail_logits: np.ndarray, continuations: list[np.ndarray | None], plan: AnswerPlan) -> Readout:
    """Options by name, scoring every option's whole answer.

    Args:
        tail_logits: logits after the tail (they predict every answer's first token).
        continuations: per option, the logits at each of its answer tokens but the
            last (row ``j`` predicts token ``j + 1``), or None for a one-token answer.
        plan: the criterion's answer plan.

    Returns:
        A readout whose log-probs are the options' whole-answer log-probabilities,
        normalised over the options; coverage is the mass on their first tokens.
    """
    lp0 = log_normalize(tail_logits.astype(np.float64))
    scores = np.empty(len(plan.tokens), dtype=np.float64)
    for i, toks in enumerate(plan.tokens):
        total = float(lp0[toks[0]])
        rows = continuations[i]
        if len(toks) > 1:
            if rows is None or len(rows) != len(toks) - 1:
                raise ValueError(f"option {i}: expected logits for {len(toks) - 1} answer token(s)")
            for j in range(1, len(toks)):
                total += float(log_normalize(rows[j - 1].astype(np.float64))[toks[j]])
        scores[i] = total
    top = int(np.argmax(lp0))
    return Readout(
        position_logprobs=log_normalize(scores),
        coverage=float(np.sum(np.exp(lp0[sorted(set(plan.first))]))),
        top_token=top,
        top_prob=float(np.exp(lp0[top])),
    )


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
