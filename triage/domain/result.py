"""The one result schema: what scoring a ticket produced.

``triage score`` prints it, the TUI draws it and stores it in history, bench
and eval read it. :meth:`TicketResult.to_dict` is the JSON form documented in
``docs/schema.md``; :func:`ticket_result_from_dict` reads it back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

SCHEMA = "triage.result/3"
OLD_SCHEMAS = ("triage.result/1", "triage.result/2")  # read back (history); /1 with readout "letter", /2 as one message


def readout_words(readout: str, orderings: str) -> str:
    """How options were (or will be) read, in a few words: ``by name`` or ``letters, cyclic``."""
    return "by name" if readout == "label" else f"letters, {orderings}"


@dataclass
class OptionScore:
    """One option of a criterion with its probability."""

    id: str
    label: str
    probability: float


@dataclass
class CriterionResult:
    """The decision for one criterion."""

    id: str
    question: str
    choice: str  # option id with the highest probability
    options: list[OptionScore]
    margin: float  # probability of the choice minus the runner-up's
    coverage: float  # mean share of next-token mass on the options' first tokens (letters or answers)
    tail_tokens: int  # tokens evaluated for this criterion's tails (all orderings; answer tokens too)
    tail_ms: float  # time spent on those tails
    orderings: int  # how many option orders were asked (1 for the label readout)
    top_token: str  # the most likely next token overall, first ordering
    raw_choice: str  # argmax of the first ordering alone, before debiasing
    order_flips: int  # orderings whose own argmax differs from the first ordering's
    readout: str = "letter"  # "label" (first answer tokens), "label-whole" (whole answers), "letter"
    source: str = "zero-shot"  # what decided: "learned" (a team's head), "starter" (the built-in pack's starter
    # head: triage.learning.starter), "calibrated" or "zero-shot" (the readout alone)
    index: int = 0  # position in the pack
    warnings: list[str] = field(default_factory=list)

    @property
    def choice_label(self) -> str:
        """Label of the chosen option."""
        return next(o.label for o in self.options if o.id == self.choice)

    def probability(self, option_id: str) -> float:
        """Probability of one option."""
        return next(o.probability for o in self.options if o.id == option_id)


@dataclass
class Timing:
    """Where a ticket's time went, in milliseconds."""

    prefill_ms: float = 0.0  # stable block (when not cached) and ticket prefill
    stable_ms: float = 0.0  # part of prefill_ms spent on the stable block
    tails_ms: float = 0.0
    total_ms: float = 0.0


@dataclass
class Tokens:
    """Token counts. ``prefix_cached`` were served from a cache, not evaluated."""

    prefix: int = 0  # shared prefix of this ticket's prompts (stable block + ticket)
    prefix_cached: int = 0
    stable: int = 0  # the stable block (part of prefix)
    stable_cached: int = 0
    ticket: int = 0  # ticket text tokens
    tails: int = 0  # all tails together
    evaluated: int = 0  # tokens actually run through the model
    full_prompts: int = 0  # tokens of every prompt whole (what `full` evaluates)

    @property
    def total_input(self) -> int:
        """Prompt tokens this ticket needed: the prefix once plus every tail."""
        return self.prefix + self.tails

    @property
    def hit_rate(self) -> float:
        """Cached input tokens / total input tokens."""
        return self.prefix_cached / self.total_input if self.total_input else 0.0


@dataclass
class ThreadInfo:
    """How much of a thread was scored, and what was reused from its last score (``thread`` in the schema)."""

    messages: int = 1  # messages of the thread scored (a plain ticket is one)
    dropped: int = 0  # messages left out of the middle to fit the context (compaction)
    previous: int = 0  # messages when this ticket was last scored and its state kept (0: none kept)
    edited: int | None = None  # the first earlier message that changed since then (re-read from there)
    reused: int = 0  # ticket tokens whose KV state came from the last score, not evaluated again
    compaction_moved: bool = False  # the compaction cut moved since the last score (re-read from there)


class ModelInfo(TypedDict):
    """Which model scored a result (``model`` in the schema; the engine's ``model_info``)."""

    name: str
    path: str
    sha256: str
    stand_in: bool


class PackInfo(TypedDict):
    """Which pack scored a result (``pack`` in the schema)."""

    name: str
    version: str
    hash: str


@dataclass
class TicketResult:
    """Everything scoring one ticket produced."""

    ticket_id: str
    ticket_sha256: str
    model: ModelInfo
    pack: PackInfo
    prompt_format: str
    mode: str
    orderings: str
    prior: bool
    criteria: list[CriterionResult]
    timing: Timing
    tokens: Tokens
    warnings: list[str] = field(default_factory=list)
    calibration: str | None = None
    head: str | None = None  # the learned head's file name, when it decided some criterion
    readout: str = "letter"  # "label" (options by name) or "letter" (A/B/C)
    complete: bool = True  # False when cancelled part-way
    created_at: float = 0.0
    thread: ThreadInfo = field(default_factory=ThreadInfo)

    def to_dict(self) -> dict[str, object]:
        """The JSON form (``triage.result/3``)."""
        d = asdict(self)
        for crit, raw in zip(self.criteria, d["criteria"], strict=True):
            raw["choice_label"] = crit.choice_label
            raw.pop("index", None)
        d["tokens"]["total_input"] = self.tokens.total_input
        d["tokens"]["hit_rate"] = round(self.tokens.hit_rate, 6)
        return {"schema": SCHEMA, **d}

    def summary(self) -> str:
        """One line: each criterion's choice, for the clipboard and logs."""
        parts = [f"{c.id}={c.choice} ({c.probability(c.choice):.0%})" for c in self.criteria]
        return f"[{self.ticket_id}] " + ", ".join(parts)


def ticket_result_from_dict(d: dict[str, Any]) -> TicketResult:
    """Rebuild a :class:`TicketResult` from its JSON form."""
    if d.get("schema") != SCHEMA and d.get("schema") not in OLD_SCHEMAS:
        raise ValueError(f"unknown result schema {d.get('schema')!r}; expected {SCHEMA}")
    crits = []
    for i, c in enumerate(d["criteria"]):
        c = {k: v for k, v in c.items() if k != "choice_label"}
        c["options"] = [OptionScore(**o) for o in c["options"]]
        crits.append(CriterionResult(**{**c, "index": c.get("index", i)}))
    tokens = {k: v for k, v in d["tokens"].items() if k not in ("total_input", "hit_rate")}
    # "labels": the agents' answers an app export adds beside the result (triage.store.export), not the result's
    rest = {k: v for k, v in d.items() if k not in ("schema", "criteria", "timing", "tokens", "thread", "labels")}
    thread = ThreadInfo(**d["thread"]) if isinstance(d.get("thread"), dict) else ThreadInfo()
    return TicketResult(criteria=crits, timing=Timing(**d["timing"]), tokens=Tokens(**tokens), thread=thread, **rest)
