"""Reading an answer off the model's logits after ``Answer:``: the readout strategies.

Two readouts, each a small object (:class:`LabelReadout`, :class:`LetterReadout`, chosen
once by :func:`readout_for`) that owns its prompt lines, option orders, validation and
:class:`Reader` (decode pieces, reading, warning):

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

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from triage.domain.pack import LETTERS, Criterion, Option, Pack
from triage.errors import TriageError
from triage.model.seq import Seq
from triage.scoring.debias import log_normalize, orders_for
from triage.scoring.options import READOUTS, check_choice
from triage.scoring.tokenizer import Tokenizer

if TYPE_CHECKING:
    from triage.scoring.prompt_spec import PromptSpec

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
                    hint='reword one of them (`answer = "..."` in the pack) so neither begins with the other',
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


# -- the two readouts as strategies ---------------------------------------------------------
# Each owns its prompt lines (the one prompt builder asks it), its option orders, its
# validation for a model, how its tails are decoded and read, and its warning. The engine
# picks one by name (:func:`readout_for`) and never branches on which it got.


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

    def read(self, key: object, spec: PromptSpec, out: dict[object, np.ndarray]) -> Readout:
        """The readout of ``spec`` from the logits that :meth:`pieces` asked for."""

    def low_coverage(self, coverage: float) -> str:
        """The warning for a criterion whose coverage is below :data:`LOW_COVERAGE`."""

    def with_features(self, ids: np.ndarray | None) -> Reader:
        """This reader, gathering the logits of ``ids`` at the answer position (None: not)."""


@dataclass(frozen=True)
class LetterReader:
    """Reads the next token after ``Answer:`` as a letter (`` A``, `` B``, ...)."""

    letters: tuple[int, ...]
    reads_features: bool = False
    takes_head: bool = False

    def kind(self, ci: int) -> str:
        return "letter"

    def width(self, spec: PromptSpec) -> int:
        return 1

    def extra_tokens(self, spec: PromptSpec) -> int:
        return 0

    def pieces(self, key: object, spec: PromptSpec, tail: tuple[int, ...], at: tuple[int, int]) -> list[Seq]:
        return [Seq((key, "t"), at[1], at[0], tail)]

    def read(self, key: object, spec: PromptSpec, out: dict[object, np.ndarray]) -> Readout:
        return read(out[(key, "t")], list(self.letters[: len(spec.order)]))

    def low_coverage(self, coverage: float) -> str:
        return f"low coverage: only {coverage:.0%} of the model's next-token mass is on the option letters"

    def with_features(self, ids: np.ndarray | None) -> LetterReader:
        return self  # a learned head reads options by name: letters gather nothing


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

    def read(self, key: object, spec: PromptSpec, out: dict[object, np.ndarray]) -> Readout:
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


class ReadoutKind(Protocol):
    """One way to read a criterion: its prompt lines, option orders, validation and reader."""

    name: str

    def stable_lines(self, pack: Pack) -> list[str]:
        """The stable block's parts after the instruction and context (what the options are)."""

    def example_answer(self, option: Option) -> str:
        """How an example's right answer is written in the stable block."""

    def tail_lines(self, criterion: Criterion, order: tuple[int, ...]) -> list[str]:
        """The tail's lines after the question (the options, when the tail lists them)."""

    def orders(self, n_options: int, orderings: str) -> list[tuple[int, ...]]:
        """The option orders to ask for a criterion of ``n_options`` options."""

    def answer_room(self, answers: list[tuple[int, ...]]) -> int:
        """Context kept free after the longest prompt, given every option's answer tokens."""

    def reader(self, pack: Pack, tokenizer: Tokenizer, answers: Callable[[Criterion], list[tuple[int, ...]]]) -> Reader:
        """The reader of ``pack`` for this model.

        Raises:
            TriageError: the pack cannot be read this way with this model.
        """


class LetterReadout:
    """``letter``: the tail lists the options as ``A.``, ``B.``, ...; the next token is read."""

    name = "letter"

    def stable_lines(self, pack: Pack) -> list[str]:
        parts = []
        described = [c for c in pack.criteria if any(o.description for o in c.options)]
        if described:
            lines = ["What the options mean:"]
            for crit in described:
                lines.append(f"\n{crit.question}")
                lines += [f"- {o.label}: {o.description}" if o.description else f"- {o.label}" for o in crit.options]
            parts.append("\n".join(lines))
        parts.append("Answer each question with the letter of the best option.")
        return parts

    def example_answer(self, option: Option) -> str:
        return option.label

    def tail_lines(self, criterion: Criterion, order: tuple[int, ...]) -> list[str]:
        return [f"{LETTERS[j]}. {criterion.options[idx].label}" for j, idx in enumerate(order)]

    def orders(self, n_options: int, orderings: str) -> list[tuple[int, ...]]:
        return orders_for(n_options, orderings)

    def answer_room(self, answers: list[tuple[int, ...]]) -> int:
        return 0

    def reader(self, pack: Pack, tokenizer: Tokenizer, answers: Callable[[Criterion], list[tuple[int, ...]]]) -> Reader:
        return LetterReader(tuple(letter_ids(tokenizer, max(len(c.options) for c in pack.criteria))))


class LabelReadout:
    """``label``: the stable block lists every criterion's answers; the tail is the question only."""

    name = "label"

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

    def orders(self, n_options: int, orderings: str) -> list[tuple[int, ...]]:
        return [tuple(range(n_options))]  # options by name have no order to rotate

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


_KINDS: dict[str, ReadoutKind] = {"label": LabelReadout(), "letter": LetterReadout()}


def readout_for(name: str) -> ReadoutKind:
    """The readout called ``name`` (``label`` or ``letter``).

    Raises:
        TriageError: any other name (exit code 2).
    """
    check_choice(name, READOUTS, "readout")
    return _KINDS[name]


@dataclass
class Readouts:
    """The raw readouts of one criterion, one per ordering, with their cost."""

    orders: list[tuple[int, ...]] = field(default_factory=list)
    reads: list[Readout] = field(default_factory=list)
    ms: float = 0.0
    tokens: int = 0
