"""The letter readout: the tail lists the options as ``A.``, ``B.``, ...; the next token is read.

A :class:`~triage.scoring.readout.ReadoutKind` the engine takes through its readout seam
(:mod:`triage.lab.score`): its prompt lines, its option orders (``none`` or ``cyclic``,
:mod:`triage.lab.debias`), its reader (the next token should be one of `` A``, `` B``...) and how
its orderings combine (averaged in option space).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from triage.domain.pack import LETTERS, Criterion, Option, Pack
from triage.errors import TriageError
from triage.lab import debias
from triage.lab.options import ORDERINGS
from triage.model.seq import Seq
from triage.scoring.options import ReadAs, check_choice
from triage.scoring.readout import Combined, Reader, Reading, Readings, read
from triage.scoring.tokenizer import Tokenizer

if TYPE_CHECKING:
    from triage.scoring.prompt_spec import PromptSpec


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

    def read(self, key: object, spec: PromptSpec, out: dict[object, np.ndarray]) -> Reading:
        return read(out[(key, "t")], list(self.letters[: len(spec.order)]))

    def low_coverage(self, coverage: float) -> str:
        return f"low coverage: only {coverage:.0%} of the model's next-token mass is on the option letters"

    def with_features(self, ids: np.ndarray | None) -> LetterReader:
        return self  # a learned head reads options by name: letters gather nothing


@dataclass(frozen=True)
class LetterReadout:
    """``letter``: the tail lists the options as ``A.``, ``B.``, ... in each of ``orderings``' orders."""

    orderings: str = "cyclic"
    name = "letter"

    def __post_init__(self) -> None:
        check_choice(self.orderings, ORDERINGS, "orderings")

    @property
    def read_as(self) -> ReadAs:
        return ReadAs("letter", self.orderings, False)

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

    def orders(self, n_options: int) -> list[tuple[int, ...]]:
        return debias.orders_for(n_options, self.orderings)

    def combine(self, criterion_id: str, readings: Readings) -> Combined:
        per_order = [
            debias.to_option_space(r.position_logprobs, o) for o, r in zip(readings.orders, readings.reads, strict=True)
        ]
        combined = debias.combine(per_order)
        first = int(np.argmax(per_order[0]))
        flips = sum(int(np.argmax(lp)) != first for lp in per_order[1:])
        return Combined(combined, combined, first, flips)

    def answer_room(self, answers: list[tuple[int, ...]]) -> int:
        return 0

    def reader(self, pack: Pack, tokenizer: Tokenizer, answers: Callable[[Criterion], list[tuple[int, ...]]]) -> Reader:
        return LetterReader(tuple(letter_ids(tokenizer, max(len(c.options) for c in pack.criteria))))
