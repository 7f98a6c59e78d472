"""The one prompt builder: stable block, ticket block and tails, as text and as tokens.

Layout, most stable first so that caches hit:

* **stable block**: the pack's instruction, context and examples. The same for
  every ticket of a pack; it ends on a hard tokenization boundary (a control
  token in the chat format), so its token ids never depend on the ticket.
* **ticket block**: ``Ticket:`` and the ticket. The same for every criterion.
* **tail**: what differs per criterion, then ``Answer:``. What the readout adds is the
  readout strategy's (:class:`~triage.scoring.readout.ReadoutKind`). The product's, ``label``:
  the stable block lists every criterion with its options' answer words and what they mean;
  the tail is only ``Question: ...``. The answer is read as the model's probability of each
  option's answer word (:mod:`triage.scoring.readout`). One tail per criterion, no option
  order. (The lab's ``letter`` readout lists the options in the tail: :mod:`triage.lab.letter`.)

A ticket longer than :data:`TICKET_TOKENS` (or than the context leaves) is cut in the middle to that
many tokens, its start and end kept; a thread is first compacted to it (:mod:`triage.domain.thread`).

Ticket and tail are tokenized together, as the model would see them, because
BPE merges across that seam (a ticket ending in ``.`` merges with the tail's
``\\n\\n``). So the cached prefix is not "the ticket block's tokens" but the longest
common token prefix of all of this ticket's full prompts (:func:`common_prefix`),
and every prompt is checked to start with it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from typing import Literal

from triage.domain.pack import Criterion, Pack
from triage.domain.thread import Message, compact, piece, render
from triage.errors import TriageError
from triage.scoring.options import DEFAULT_READOUT
from triage.scoring.prompt_spec import PromptSpec
from triage.scoring.readout import LABEL, ReadoutKind, option_meaning
from triage.scoring.tokenizer import Tokenizer

__all__ = ["DEFAULT_READOUT", "option_meaning"]  # re-exported for callers of this module

# Bump on any change to the wording or layout below: it names cached prefixes.
PROMPT_VERSION = 3

Style = Literal["chat", "plain"]

IM_START, IM_END, THINK, END_THINK = "<|im_start|>", "<|im_end|>", "<think>", "</think>"
ANSWER_CUE = "Answer:"
CUT_MARK = "\n[... {chars} characters cut ...]\n"

# The ticket budget: the most tokens of a ticket's text (a thread's as rendered) that any prompt reads, in
# every path (the app, `triage score`, `serve`, `learn`, `eval`, the Ray workers) and whatever the context size.
# A longer ticket keeps its start and end with a marker of what was left out (:meth:`PromptBuilder.build`), so
# a pasted log costs at most this many tokens, and a head is fitted on the same part of a long ticket as it is
# applied to. Chosen by measurement: docs/quality.md, "The ticket budget". Read at call time (bench overrides it).
TICKET_TOKENS = 384


@dataclass(frozen=True)
class PromptFormat:
    """How prompts are wrapped for a model family.

    ``chat`` uses ChatML (Qwen, SmolLM2): a system turn holds the stable block,
    a user turn the ticket and question, and the assistant turn is opened with
    ``Answer:``. ``think`` (Qwen3) writes an empty ``<think></think>`` block
    first, as Qwen3's own template does when thinking is off, so the model
    answers at once instead of starting to reason.
    """

    style: Style
    think: bool = False
    readout: str = DEFAULT_READOUT

    @property
    def id(self) -> str:
        """Versioned name, e.g. ``triage-prompt/3:chat+nothink/label``: part of every cache key.

        The readout is part of it: the two readouts have different stable blocks and
        tails, so their prefixes, priors and calibrations must never be mixed.
        """
        return f"triage-prompt/{PROMPT_VERSION}:{self.style}{'+nothink' if self.think else ''}/{self.readout}"

    def with_readout(self, readout: str) -> PromptFormat:
        """The same format with another readout (its strategy's ``name``: ``label``, the lab's ``letter``)."""
        return replace(self, readout=check_readout(readout))


def check_readout(readout: object) -> str:
    """``readout`` when it can name a readout in a format id (a lowercase word).

    Raises:
        TriageError: any other value (exit code 2).
    """
    if isinstance(readout, str) and re.fullmatch(r"[a-z][a-z-]*", readout):
        return readout
    raise TriageError(f"unknown readout {readout!r}", exit_code=2)


def detect_format(chat_template: str | None, tokenizer: Tokenizer, prefer: str = "auto") -> PromptFormat:
    """Choose the prompt format from the model's chat template.

    Args:
        chat_template: the GGUF's ``tokenizer.chat_template`` (may be None).
        tokenizer: to check that the control tokens exist.
        prefer: ``auto``, ``chat`` or ``plain``.

    Raises:
        TriageError: ``chat`` was asked for but the model has no ChatML tokens.
    """
    if prefer not in ("auto", "chat", "plain"):
        raise TriageError(f"unknown prompt style {prefer!r}; use auto, chat or plain", exit_code=2)
    has_chatml = tokenizer.control(IM_START) is not None and tokenizer.control(IM_END) is not None
    if prefer == "plain" or (prefer == "auto" and not (has_chatml and chat_template and IM_START in chat_template)):
        return PromptFormat("plain")
    if not has_chatml:
        raise TriageError("this model has no ChatML tokens (<|im_start|>); use --prompt plain", exit_code=2)
    think = bool(chat_template and THINK in chat_template) and tokenizer.control(THINK) is not None
    return PromptFormat("chat", think=think)


@dataclass
class TicketPrompts:
    """Every prompt of one ticket, with the shared prefix worked out and verified."""

    stable: tuple[int, ...]
    prefix: tuple[int, ...]  # longest common token prefix of all prompts (starts with stable)
    prompts: list[PromptSpec]
    ticket_text: str  # the text actually scored (shortened when too long)
    ticket_tokens: int
    warnings: list[str] = field(default_factory=list)
    cut_chars: int = 0
    messages: int = 1  # messages of the thread scored (kept or left out)
    dropped: int = 0  # messages left out of the middle of a thread to fit the context

    def tail(self, spec: PromptSpec) -> tuple[int, ...]:
        """The tokens of ``spec`` after the shared prefix."""
        return spec.tokens[len(self.prefix) :]

    @property
    def full_tokens(self) -> int:
        """Tokens of all full prompts together (what bench's ``full`` evaluates)."""
        return sum(len(p.tokens) for p in self.prompts)

    @property
    def reuse_tokens(self) -> int:
        """Tokens evaluated with prefix reuse: the prefix once, then every tail."""
        return len(self.prefix) + sum(len(p.tokens) - len(self.prefix) for p in self.prompts)


@dataclass(frozen=True)
class Cut:
    """A ticket's text as the prompts read it (:meth:`PromptBuilder.cut`)."""

    text: str
    tokens: int  # the text's tokens (at most the ticket room)
    chars: int = 0  # characters cut from the middle (0: none)
    dropped: int = 0  # a thread's messages left out after the first (0: none)
    warnings: tuple[str, ...] = ()


def common_prefix(seqs: list[tuple[int, ...]]) -> tuple[int, ...]:
    """Longest common prefix of token sequences."""
    if not seqs:
        return ()
    first = seqs[0]
    n = min(len(s) for s in seqs)
    for i in range(n):
        t = first[i]
        if any(s[i] != t for s in seqs):
            return first[:i]
    return first[:n]


class PromptBuilder:
    """Builds the stable block, ticket blocks and tails for one pack, format and tokenizer.

    What the readout adds to the text (the options' answers or lettered lines, how an
    example's answer is written, room for teacher-forced answers) it asks the readout
    strategy ``readout`` (default the product's, :data:`~triage.scoring.readout.LABEL`), whose ``name``
    must be the format's readout.

    Raises:
        TriageError: the format names another readout than ``readout``.
    """

    def __init__(self, pack: Pack, fmt: PromptFormat, tokenizer: Tokenizer, readout: ReadoutKind = LABEL) -> None:
        if readout.name != fmt.readout:
            raise TriageError(
                f"prompt format {fmt.id} reads {fmt.readout!r}, not {readout.name!r}",
                hint="the lab's readouts are passed in as strategies (triage.lab.score)",
            )
        self.pack = pack
        self.fmt = fmt
        self.tok = tokenizer
        self.readout: ReadoutKind = readout
        self._stable: tuple[int, ...] | None = None
        self._suffix: tuple[int, ...] | None = None
        self._rooms: dict[int, int] = {}

    # -- text ---------------------------------------------------------------
    def system_text(self) -> str:
        """The stable block's text: instruction, context, what the options mean (as the readout
        writes it), examples."""
        parts = [self.pack.instruction]
        if self.pack.context:
            parts.append(self.pack.context)
        parts += self.readout.stable_lines(self.pack)
        if self.pack.examples:
            lines = ["Examples of tickets and the right answers:"]
            for ex in self.pack.examples:
                lines.append(f"\nTicket: {ex.text}")
                for cid, oid in ex.labels.items():
                    crit = self.pack.criterion(cid)
                    lines.append(f"{crit.question} {self.readout.example_answer(crit.option(oid))}")
            parts.append("\n".join(lines))
        return "\n\n".join(parts)

    def ticket_block_text(self, ticket_text: str) -> str:
        """The ticket block after the stable block: ``Ticket:`` and the ticket."""
        lead = "user\n" if self.fmt.style == "chat" else ""
        return f"{lead}Ticket:\n{ticket_text}\n\n"

    def tail_text(self, criterion: Criterion, order: tuple[int, ...]) -> str:
        """What differs per criterion: the question, what the readout adds (the options in
        ``order``, for a readout whose tail lists them; label: nothing) and, plain, ``Answer:``."""
        lines = [f"Question: {criterion.question}", *self.readout.tail_lines(criterion, order)]
        if self.fmt.style == "plain":
            lines.append(ANSWER_CUE)  # in chat, the assistant turn opens with it instead
        return "\n".join(lines)

    def answer_tokens(self, criterion: Criterion) -> list[tuple[int, ...]]:
        """Each option's answer as the tokens that would follow ``Answer:`` (with the space)."""
        return [tuple(self.tok.encode(" " + o.answer_text)) for o in criterion.options]

    @property
    def answer_room(self) -> int:
        """Context kept free after the longest prompt: the label readout may decode an answer's
        tokens after the tail (teacher forcing). 0 for a readout that reads one token."""
        return self.readout.answer_room([a for c in self.pack.criteria for a in self.answer_tokens(c)])

    def render(self, ticket_text: str, criterion: Criterion, order: tuple[int, ...]) -> str:
        """The whole prompt as text (for people and docs; scoring uses tokens)."""
        if self.fmt.style == "plain":
            return f"{self.system_text()}\n\n{self.ticket_block_text(ticket_text)}{self.tail_text(criterion, order)}"
        think = f"{THINK}\n\n{END_THINK}\n\n" if self.fmt.think else ""
        return (
            f"{IM_START}system\n{self.system_text()}{IM_END}\n{IM_START}{self.ticket_block_text(ticket_text)}"
            f"{self.tail_text(criterion, order)}{IM_END}\n{IM_START}assistant\n{think}{ANSWER_CUE}"
        )

    # -- tokens ---------------------------------------------------------------
    def _control(self, token: str) -> int:
        tid = self.tok.control(token)
        if tid is None:
            raise TriageError(
                f"the model's vocabulary has no {token} token, which the {self.fmt.style} prompt format needs"
            )
        return tid

    @property
    def stable_tokens(self) -> tuple[int, ...]:
        """Token ids of the stable block; identical for every ticket of this pack."""
        if self._stable is None:
            ids: list[int] = [] if self.tok.bos is None else [self.tok.bos]
            if self.fmt.style == "chat":
                ids += [
                    self._control(IM_START),
                    *self.tok.encode("system\n" + self.system_text()),
                    self._control(IM_END),
                ]
                ids += [*self.tok.encode("\n"), self._control(IM_START)]
            else:
                ids += self.tok.encode(self.system_text() + "\n\n")
            self._stable = tuple(ids)
        return self._stable

    @property
    def stable_hash(self) -> str:
        """sha256 of the stable block's token ids (part of the stable cache key)."""
        blob = ",".join(map(str, self.stable_tokens)).encode()
        return hashlib.sha256(blob).hexdigest()

    @property
    def _suffix_tokens(self) -> tuple[int, ...]:
        """Fixed tokens after the tail's text: close the user turn, open the assistant's."""
        if self._suffix is None:
            if self.fmt.style == "plain":
                self._suffix = ()
            else:
                ids = [
                    self._control(IM_END),
                    *self.tok.encode("\n"),
                    self._control(IM_START),
                    *self.tok.encode("assistant\n"),
                ]
                if self.fmt.think:
                    ids += [self._control(THINK), *self.tok.encode("\n\n"), self._control(END_THINK)]
                    ids += self.tok.encode("\n\n" + ANSWER_CUE)
                else:
                    ids += self.tok.encode(ANSWER_CUE)
                self._suffix = tuple(ids)
        return self._suffix

    def prompt_tokens(self, ticket_text: str, criterion: Criterion, order: tuple[int, ...]) -> tuple[int, ...]:
        """Token ids of one full prompt. Ticket and tail are one run of plain text."""
        run = self.tok.encode(self.ticket_block_text(ticket_text) + self.tail_text(criterion, order))
        return self.stable_tokens + tuple(run) + self._suffix_tokens

    def cue_tokens(self, ticket_text: str, cue_text: str, *, suffix: bool = True) -> tuple[int, ...]:
        """Token ids of the prompt that ends at the shared read position (:mod:`triage.scoring.cue`):
        the ticket block, ``cue_text`` in place of a tail, then (``suffix``) the fixed suffix, else, in
        chat, only the user turn's end."""
        block = self.ticket_block_text(ticket_text)
        run = self.tok.encode(block + cue_text if cue_text else block.rstrip())
        end = self._suffix_tokens if suffix else (() if self.fmt.style == "plain" else (self._control(IM_END),))
        return self.stable_tokens + tuple(run) + tuple(end)

    def build(
        self,
        ticket_text: str,
        orders: list[list[tuple[int, ...]]],
        *,
        n_ctx: int,
        messages: tuple[Message, ...] = (),
    ) -> TicketPrompts:
        """Every prompt of a ticket, its text cut to :meth:`ticket_room`, with its verified shared prefix.

        Args:
            ticket_text: the cleaned ticket (a thread's: its messages as written, see
                :mod:`triage.domain.thread`).
            orders: per criterion (pack order), the option orders to ask.
            n_ctx: the context size; the longest prompt must fit.
            messages: a thread's messages: too long, it is compacted (first message, a
                marker, the latest messages) before any text is cut.

        Raises:
            TriageError: even an empty ticket would not fit (the pack is too big for n_ctx).
        """
        crits = self.pack.criteria
        if len(orders) != len(crits):
            raise ValueError("orders must give one list per criterion")
        got = self.cut(ticket_text, n_ctx, messages)
        text = got.text
        specs = [
            PromptSpec(ci, order, self.prompt_tokens(text, crits[ci], order))
            for ci, crit_orders in enumerate(orders)
            for order in crit_orders
        ]
        prefix = common_prefix([s.tokens for s in specs])
        # Leave at least one token to decode in every prompt: the readout needs its logits.
        shortest = min(len(s.tokens) for s in specs)
        prefix = prefix[: min(len(prefix), shortest - 1)]
        stable = self.stable_tokens
        for s in specs:  # the invariant every reuse mode relies on
            if s.tokens[: len(prefix)] != prefix:
                raise AssertionError("shared prefix is not a token prefix of every prompt")
        if prefix[: len(stable)] != stable:
            raise AssertionError("stable block is not a token prefix of the ticket's prompts")
        return TicketPrompts(
            stable, prefix, specs, text, got.tokens, list(got.warnings), got.chars, max(len(messages), 1), got.dropped
        )

    def cut(self, ticket_text: str, n_ctx: int, messages: tuple[Message, ...] = ()) -> Cut:
        """The ticket's text as every prompt reads it: at most :meth:`ticket_room` tokens.

        The one cut of every path (the app, ``score``, ``serve``, ``learn``, ``eval``). A thread that is too
        long first has its first message cut to at most half the room (:meth:`_cut_first`), then, with three
        or more messages, is compacted (first message, a marker, the latest ones:
        :func:`triage.domain.thread.compact`). Both cuts are the same turn after turn, so a thread's next
        message is appended to the prompt its last one read. What is still too long keeps its start and end,
        with a marker of how many characters were left out of the middle.
        """
        warnings: list[str] = []
        text, dropped, first_chars = ticket_text, 0, 0
        room = self.ticket_room(n_ctx)
        too_long = len(messages) >= 2 and len(self.tok.encode(ticket_text)) > room
        if too_long:
            first_len = len(messages[0].text)
            messages, first_chars = self._cut_first(messages, room, n_ctx)
            if first_chars:
                text = render(messages)
                too_long = len(self.tok.encode(text)) > room
                warnings.append(
                    f"first message shortened to half of {self.limit_words(n_ctx)}: cut {first_chars} of "
                    f"{first_len} characters from its middle, kept its start and end"
                )
        if len(messages) >= 3 and too_long:
            compacted = compact(messages, room, lambda t: len(self.tok.encode(t)))
            text, dropped = compacted.text, compacted.dropped
            if dropped:
                warnings.append(
                    f"thread compacted to {self.limit_words(n_ctx)}: left out messages 2-{dropped + 1} of "
                    f"{len(messages)}, kept the first and the latest {len(messages) - 1 - dropped}"
                )
        text, chars, n = self._fit(text, room, n_ctx)
        if chars:
            warnings.append(
                f"ticket shortened to {self.limit_words(n_ctx)}: cut {chars} of {len(ticket_text)} characters "
                f"from the middle, kept its start and end"
            )
        return Cut(text, n, chars + first_chars, dropped, tuple(warnings))

    def _cut_first(self, messages: tuple[Message, ...], room: int, n_ctx: int) -> tuple[tuple[Message, ...], int]:
        """A too-long thread's first message cut on its own to at most half of ``room`` (start and end kept).

        The cut depends only on the first message and the room, so every later turn writes the same first
        message and appends after it: the thread's earlier prompt stays a prefix of the next one, as
        :func:`~triage.domain.thread.compact` keeps it for the messages after the first. Returns the messages
        (the first replaced when cut) and the characters cut (0: it fitted).
        """
        first = messages[0]
        own = len(self.tok.encode(first.text))
        share = room // 2 - max(len(self.tok.encode(piece(first, True))) - own, 0)  # the heading's tokens
        if own <= share:
            return messages, 0
        text, chars, _ = self._fit(first.text, share, n_ctx)
        return (Message(first.role, text),) + tuple(messages[1:]), chars

    def ticket_room(self, n_ctx: int) -> int:
        """Tokens the ticket may take: the ticket budget (:data:`TICKET_TOKENS`), or less when ``n_ctx``
        leaves less room beside the stable block, the tails and the answers.

        Raises:
            TriageError: the context leaves fewer than 16 tokens (the pack is too big for ``n_ctx``).
        """
        return min(TICKET_TOKENS, self._context_room(n_ctx))

    def limit_words(self, n_ctx: int) -> str:
        """What a ticket is cut to, for the warnings: the ticket budget, or the context when it leaves less."""
        room = self._context_room(n_ctx)
        if TICKET_TOKENS <= room:
            return f"the {TICKET_TOKENS}-token ticket budget"
        return (
            f"fit the {n_ctx}-token context ({room} tokens, below the {TICKET_TOKENS}-token ticket budget "
            f"that a larger context reads: raise --n-ctx)"
        )

    def _context_room(self, n_ctx: int) -> int:
        """Tokens the ticket may take in an ``n_ctx`` context (the rest is stable block, tails, answers).

        Raises:
            TriageError: fewer than 16 (the pack is too big for ``n_ctx``).
        """
        if n_ctx in self._rooms:
            return self._rooms[n_ctx]
        longest_tail = (
            max(len(self.tok.encode(self.tail_text(c, tuple(range(len(c.options)))))) for c in self.pack.criteria)
            + self.answer_room
        )
        block = len(self.tok.encode(self.ticket_block_text("")))
        overhead = len(self.stable_tokens) + block + longest_tail + len(self._suffix_tokens) + 4
        budget = n_ctx - overhead
        if budget < 16:
            raise TriageError(
                f"the pack's prompt alone needs {overhead} tokens, leaving {max(budget, 0)} for the ticket in a "
                f"{n_ctx}-token context",
                hint="raise --n-ctx, or shorten the pack's instruction, context and examples",
            )
        self._rooms[n_ctx] = budget
        return budget

    def _fit(self, text: str, room: int, n_ctx: int) -> tuple[str, int, int]:
        """Cut the ticket's middle until it is at most ``room`` tokens (its start and end kept, a marker between).

        Returns:
            (text to score, characters cut, ticket tokens).
        """
        ticket_ids = self.tok.encode(text)
        if len(ticket_ids) <= room:
            return text, 0, len(ticket_ids)
        marker_budget = len(self.tok.encode(CUT_MARK.format(chars=len(text)))) + 2
        keep = room - marker_budget
        while keep > 8:
            start = self.tok.decode(list(ticket_ids[: keep // 2]))
            end = self.tok.decode(list(ticket_ids[len(ticket_ids) - (keep - keep // 2) :]))
            cut = len(text) - len(start) - len(end)
            shortened = f"{start.rstrip()}{CUT_MARK.format(chars=cut)}{end.lstrip()}"
            n = len(self.tok.encode(shortened))
            if n <= room:
                return shortened, cut, n
            keep -= max(n - room, 8)
        raise TriageError(f"cannot shorten the ticket to {room} tokens in a {n_ctx}-token context; raise --n-ctx")
