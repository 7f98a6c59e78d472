"""Reading an answer off the model's logits after ``Answer:``: the product's readout strategy.

A readout is a small object (a :class:`ReadoutKind`) that owns its prompt lines, option orders,
validation, :class:`Reader` (decode pieces, reading, warning) and how a criterion's readings combine
into one answer (:meth:`ReadoutKind.combine`). The engine takes one as its readout seam and never
branches on which it got. The product's is :data:`LABEL` (:class:`LabelReadout`): each option has an
answer word (``billing``). Its probability is the model's probability of saying that answer,
normalised over the options. When every answer is one token and no two share it, that is the
next-token logits of those tokens (:func:`read_first`). When two answers begin with the same token,
or an answer is several tokens, each option's whole answer is scored by teacher forcing: its tokens
are decoded after the tail, one sequence per option, and its log-probability is the sum over its
tokens (:func:`read_whole`). Never a first-token comparison that cannot tell options apart. (The
letter readout, the lab's, is :mod:`triage.lab.letter`.)

A :class:`Reading` softmaxes over the options only (the decision), and reports *coverage*: how
much of the full next-token distribution fell on the options' first tokens at all. Low coverage
means the model wanted to say something else, so the decision is weak.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from triage.domain.pack import Criterion, Option, Pack
from triage.errors import TriageError
from triage.model.seq import Seq
from triage.scoring.options import PRODUCT_READ, ReadAs
from triage.scoring.tokenizer import Tokenizer

if TYPE_CHECKING:
    from triage.scoring.prompt_spec import PromptSpec

LOW_COVERAGE = 0.5  # below this share of mass on the options' first tokens, the card warns


@dataclass(frozen=True)
class Reading:
    """One prompt's answer: log-probs over the options as shown, and how sure the model was."""

    position_logprobs: np.ndarray  # log-softmax over the options shown, in the order shown
    coverage: float  # share of the full distribution on those options' first tokens
    top_token: int  # the single most likely next token overall
    top_prob: float
    features: np.ndarray | None = None  # the answer position's logits on a fixed token set (see triage.scoring.head)


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
                    hint='reword one of them (`answer = "..."` in the pack) so neither begins with the other',
                )
    firsts = [a[0] for a in answers]
    whole = len(set(firsts)) < len(firsts) or any(len(a) > 1 for a in answers)
    return AnswerPlan(tuple(tuple(a) for a in answers), whole)


def read_first(logits: np.ndarray, plan: AnswerPlan) -> Reading:
    """Options by name, when every answer is its own single token: the next-token logits decide."""
    if plan.whole:
        raise ValueError("this criterion's answers need whole-answer scoring (read_whole)")
    return read(logits, plan.first)


def read_whole(tail_logits: np.ndarray, continuations: list[np.ndarray | None], plan: AnswerPlan) -> Reading:
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
    return Reading(
        position_logprobs=log_normalize(scores),
        coverage=float(np.sum(np.exp(lp0[sorted(set(plan.first))]))),
        top_token=top,
        top_prob=float(np.exp(lp0[top])),
    )


def log_normalize(logits: np.ndarray) -> np.ndarray:
    """Log-softmax of a vector."""
    m = float(np.max(logits))
    return logits - (m + float(np.log(np.sum(np.exp(logits - m)))))


def read(logits: np.ndarray, ids: list[int]) -> Reading:
    """Softmax ``logits`` over ``ids`` and measure coverage over the whole vocabulary."""
    logits = logits.astype(np.float64, copy=False)
    m = float(np.max(logits))
    log_z = m + float(np.log(np.sum(np.exp(logits - m))))
    chosen = logits[ids]
    cm = float(np.max(chosen))
    log_zc = cm + float(np.log(np.sum(np.exp(chosen - cm))))
    top = int(np.argmax(logits))
    return Reading(
        position_logprobs=chosen - log_zc,
        coverage=float(np.exp(log_zc - log_z)),
        top_token=top,
        top_prob=float(np.exp(m - log_z)),
    )


# -- readouts as strategies ---------------------------------------------------------------
# Each owns its prompt lines (the one prompt builder asks it), its option orders, its
# validation for a model, how its tails are decoded and read, how its readings combine, and
# its warning. The engine takes one (its readout seam) and never branches on which it got.


class Reader(Protocol):
    """How one pack's tails are decoded and read for one model (made by :meth:`ReadoutKind.reader`).

    A tail is one :class:`~triage.model.native.Seq` in its own sequence, except for a
    criterion whose answers need whole-answer scoring: its tail then belongs to one
    sequence per option (one KV cell each token, shared), and each option's answer tokens
    but the last follow in that option's sequence, in the same batch (teacher forcing).
    """

    @property
    def reads_features(self) -> bool:
        """True when the answer position's features are gathered (a head can read them)."""
        ...

    @property
    def takes_head(self) -> bool:
        """False: a learned head reads options by name, so this readout never applies one."""
        ...

    def kind(self, ci: int) -> str:
        """What the result schema calls criterion ``ci``'s readout."""

    def width(self, spec: PromptSpec) -> int:
        """How many sequences the tail of ``spec`` occupies."""

    def extra_tokens(self, spec: PromptSpec) -> int:
        """Answer tokens decoded after the tail (teacher forcing)."""

    def pieces(self, key: object, spec: PromptSpec, tail: tuple[int, ...], at: tuple[int, int]) -> list[Seq]:
        """What to decode for ``spec``'s tail at ``at = (position, first sequence)``."""

    def read(self, key: object, spec: PromptSpec, out: dict[object, np.ndarray]) -> Reading:
        """The readout of ``spec`` from the logits that :meth:`pieces` asked for."""

    def low_coverage(self, coverage: float) -> str:
        """The warning for a criterion whose coverage is below :data:`LOW_COVERAGE`."""

    def with_features(self, ids: np.ndarray | None) -> Reader:
        """This reader, gathering the logits of ``ids`` at the answer position (None: not)."""


@dataclass(frozen=True)
class LabelReader:
    """Reads each option by name: first answer tokens, or whole answers (see :class:`AnswerPlan`)."""

    plans: tuple[AnswerPlan, ...]  # per criterion
    feature_ids: np.ndarray | None = None  # token ids whose logits are the learned head's features
    takes_head: bool = True

    @property
    def reads_features(self) -> bool:
        return self.feature_ids is not None

    def kind(self, ci: int) -> str:
        return "label-whole" if self.plans[ci].whole else "label"

    def width(self, spec: PromptSpec) -> int:
        plan = self.plans[spec.criterion]
        return len(plan.tokens) if plan.whole else 1

    def extra_tokens(self, spec: PromptSpec) -> int:
        return self.plans[spec.criterion].extra_tokens

    def pieces(self, key: object, spec: PromptSpec, tail: tuple[int, ...], at: tuple[int, int]) -> list[Seq]:
        pos, seq = at
        plan = self.plans[spec.criterion]
        if not plan.whole:
            return [Seq((key, "t"), seq, pos, tail)]
        out = [Seq((key, "t"), seq, pos, tail, also=tuple(range(seq + 1, seq + len(plan.tokens))))]
        for o, toks in enumerate(plan.tokens):
            if len(toks) > 1:
                out.append(Seq((key, "c", o), seq + o, pos + len(tail), toks[:-1], every=True))
        return out

    def read(self, key: object, spec: PromptSpec, out: dict[object, np.ndarray]) -> Reading:
        plan = self.plans[spec.criterion]
        logits = out[(key, "t")]
        if not plan.whole:
            got = read_first(logits, plan)
        else:
            got = read_whole(logits, [out.get((key, "c", o)) for o in range(len(plan.tokens))], plan)
        if self.feature_ids is None:
            return got
        return replace(got, features=logits[self.feature_ids].astype(np.float32))

    def low_coverage(self, coverage: float) -> str:
        return f"low coverage: only {coverage:.0%} of the model's next-token mass is on the options' answers"

    def with_features(self, ids: np.ndarray | None) -> LabelReader:
        return replace(self, feature_ids=ids)


@dataclass(frozen=True)
class Combined:
    """One criterion's readings as one answer in option space.

    ``logprobs`` is what a learned head reads; ``base`` what a calibration and zero-shot read (the
    same array for the product; the lab's prior is divided out of it). ``raw_choice`` is the option the
    first reading chose, ``flips`` how many other readings chose another.
    """

    logprobs: np.ndarray
    base: np.ndarray
    raw_choice: int
    flips: int = 0


class ReadoutKind(Protocol):
    """One way to read a criterion: its prompt lines, option orders, validation, reader and combination."""

    @property
    def name(self) -> str:
        """The prompt format's readout (``label``): it keys prefixes, heads and calibrations."""

    @property
    def read_as(self) -> ReadAs:
        """What its readings are, as results, calibrations and fits name them."""

    def stable_lines(self, pack: Pack) -> list[str]:
        """The stable block's parts after the instruction and context (what the options are)."""

    def example_answer(self, option: Option) -> str:
        """How an example's right answer is written in the stable block."""

    def tail_lines(self, criterion: Criterion, order: tuple[int, ...]) -> list[str]:
        """The tail's lines after the question (the options, when the tail lists them)."""

    def orders(self, n_options: int) -> list[tuple[int, ...]]:
        """The option orders to ask for a criterion of ``n_options`` options."""

    def combine(self, criterion_id: str, readings: Readings) -> Combined:
        """One criterion's readings (one per order asked) as one answer."""

    def answer_room(self, answers: list[tuple[int, ...]]) -> int:
        """Context kept free after the longest prompt, given every option's answer tokens."""

    def reader(self, pack: Pack, tokenizer: Tokenizer, answers: Callable[[Criterion], list[tuple[int, ...]]]) -> Reader:
        """The reader of ``pack`` for this model.

        Raises:
            TriageError: the pack cannot be read this way with this model.
        """


class LabelReadout:
    """``label``: the stable block lists every criterion's answers; the tail is the question only."""

    name = "label"
    read_as = PRODUCT_READ

    def stable_lines(self, pack: Pack) -> list[str]:
        lines = ["The questions, and the answers allowed for each:"]
        for crit in pack.criteria:
            lines.append(f"\n{crit.question}")
            for o in crit.options:
                lines.append(f"- {o.answer_text}: {m}" if (m := option_meaning(o)) else f"- {o.answer_text}")
        lines.append("\nAnswer each question with one of its answers, exactly as written above.")
        return ["\n".join(lines)]

    def example_answer(self, option: Option) -> str:
        return option.answer_text

    def tail_lines(self, criterion: Criterion, order: tuple[int, ...]) -> list[str]:
        return []  # the answers are in the stable block

    def orders(self, n_options: int) -> list[tuple[int, ...]]:
        return [tuple(range(n_options))]  # options by name have no order to rotate

    def combine(self, criterion_id: str, readings: Readings) -> Combined:
        if len(readings.reads) != 1:
            raise ValueError(
                f"criterion {criterion_id!r}: the label readout reads one prompt, got {len(readings.reads)}"
            )
        raw = np.asarray(readings.reads[0].position_logprobs, dtype=np.float64)
        lp = log_normalize(raw)
        return Combined(lp, lp, int(np.argmax(raw)))

    def answer_room(self, answers: list[tuple[int, ...]]) -> int:
        return max(len(a) for a in answers)

    def reader(self, pack: Pack, tokenizer: Tokenizer, answers: Callable[[Criterion], list[tuple[int, ...]]]) -> Reader:
        plans = []
        for c in pack.criteria:
            try:
                plans.append(answer_plan(answers(c), [o.answer_text for o in c.options]))
            except TriageError as exc:
                raise TriageError(f"pack {pack.name!r}, criterion {c.id!r}: {exc.message}", hint=exc.hint) from None
        return LabelReader(tuple(plans))


def option_meaning(option: Option) -> str:
    """What an option covers, for the label readout's stable block: its description,
    else its label when that says more than the answer word (``Negative: upset`` -> ``upset``)."""
    if option.description:
        return option.description
    label, answer = option.label.strip(), option.answer_text
    if label.casefold() == answer.casefold():
        return ""
    if label.casefold().startswith(answer.casefold()) and label[len(answer) :].lstrip().startswith(":"):
        return label[len(answer) :].lstrip()[1:].strip()
    return label


LABEL = LabelReadout()
"""The product's readout."""


@dataclass
class Readings:
    """The readings of one criterion, one per option order asked, with their cost."""

    orders: list[tuple[int, ...]] = field(default_factory=list)
    reads: list[Reading] = field(default_factory=list)
    ms: float = 0.0
    tokens: int = 0


def product_readout(readout: ReadoutKind | str) -> ReadoutKind:
    """``readout`` as a strategy: a strategy as it is, ``label`` the product's.

    Raises:
        TriageError: another name (the lab's readouts are passed as strategies, :mod:`triage.lab.score`).
    """
    if not isinstance(readout, str):
        return readout
    if readout == LABEL.name:
        return LABEL
    raise TriageError(
        f"readout {readout!r} is not the product's", hint="the lab passes its readouts as strategies (triage.lab.score)"
    )
