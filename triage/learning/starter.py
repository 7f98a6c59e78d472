"""The starter read-out: a head for the built-in pack, fitted on the tickets triage ships.

A new user has the built-in support pack and no labels, and the zero-shot readout of a small model is
near chance on real tickets (docs/quality.md, "The starter read-out"). So triage ships a labelled starter
set (``assets/starter/support.jsonl``, written for triage by the labelling guide, docs/labelling.md) and
fits a head on it for whatever model runs: ``triage learn``'s fit on every starter row, at the read
position :data:`STARTER_READ`, stored like any head (model sha256, pack hash, prompt format) but apart
from a team's (``heads/starter/``). Its decisions say ``starter``. A pack of the team's own has no starter.

When the team labels tickets on the built-in pack, ``triage learn`` and the app's re-fit fit on the
starter rows and the team's together (:func:`combine`): the team's rows weigh :data:`TEAM_WEIGHT` times a
starter row, and a criterion with :data:`TEAM_ENOUGH` or more team labels is fitted on the team's alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from triage.assets_path import asset
from triage.domain.pack import Pack, default_pack
from triage.learning.labelled import LabelledRow, read_labelled
from triage.scoring.cue import DEFAULT_CUE

if TYPE_CHECKING:
    import numpy as np

    from triage.learning.cache import Outcome
    from triage.learning.fit import FitRequest
    from triage.learning.learn import LearnOutcome
    from triage.learning.scorer import Scored
    from triage.scoring.head import Head
    from triage.scoring.protocol import ScoringEngine

STARTER_SET = "starter/support.jsonl"
STARTER_READ = f"shared:{DEFAULT_CUE}"
"""Where the starter head reads: the shared cue after the ticket (docs/quality.md, "The starter read-out")."""
STARTER_NAME = "starter"
TEAM_WEIGHT = 4.0
"""How much one of the team's labels weighs against one starter row (docs/quality.md, "From the starter to
the team's own decisions")."""
TEAM_ENOUGH = 100
"""A criterion with this many of the team's labels is fitted on the team's alone."""


def is_builtin(pack: Pack) -> bool:
    """Whether ``pack`` is the built-in support pack (by its hash: an edited copy is a pack of its own)."""
    return pack.hash == default_pack().hash


def starter_rows(pack: Pack) -> list[LabelledRow]:
    """The starter set's rows for ``pack``: every row for the built-in pack, none for any other."""
    if not is_builtin(pack):
        return []
    return read_labelled(asset(STARTER_SET), pack).rows


@dataclass(frozen=True)
class Combined:
    """Training rows for a head on the built-in pack: the team's and the starter's, with each row's weight."""

    labels: list[dict[str, str]]
    outcomes: list[Outcome]
    weights: list[float]
    team: dict[str, int]  # per criterion, how many of the team's labels
    starter_used: dict[str, int]  # per criterion, how many starter rows went in (0: the team's alone)


def combine(
    team_labels: Sequence[dict[str, str]],
    team_outcomes: Sequence[Outcome],
    starter: Sequence[LabelledRow],
    starter_outcomes: Sequence[Outcome],
    *,
    team_weight: float = TEAM_WEIGHT,
    enough: int = TEAM_ENOUGH,
) -> Combined:
    """The team's rows, then the starter's, for every criterion the team has fewer than ``enough`` labels of.

    A starter row keeps only the labels of the criteria it still serves (a criterion the team has enough of
    is fitted on the team's labels alone). Row weights: ``team_weight`` for the team's, 1 for the starter's.
    """
    team: dict[str, int] = {}
    for lab in team_labels:
        for cid in lab:
            team[cid] = team.get(cid, 0) + 1
    labels = [dict(lab) for lab in team_labels]
    outcomes = list(team_outcomes)
    weights = [team_weight] * len(labels)
    used: dict[str, int] = {}
    for row, out in zip(starter, starter_outcomes, strict=True):
        keep = {cid: opt for cid, opt in row.labels.items() if team.get(cid, 0) < enough}
        if not keep:
            continue
        for cid in keep:
            used[cid] = used.get(cid, 0) + 1
        labels.append(keep)
        outcomes.append(out)
        weights.append(1.0)
    return Combined(labels, outcomes, weights, team, used)


def fit_starter_head(
    engine: ScoringEngine,
    pack: Pack,
    rows: Sequence[LabelledRow],
    outcomes: Sequence[Outcome],
    *,
    read: str = STARTER_READ,
    on_criterion: Callable[[str, int], None] | None = None,
) -> tuple[Head, list[LearnOutcome]]:
    """``triage learn``'s fit on the starter rows (scored at ``read`` with their features): the starter head;
    ``on_criterion(id, rows)`` before each criterion's fit (:class:`CriterionClock` says it)."""
    from triage.learning import learn as learn_mod
    from triage.learning.scorer import fit_inputs

    features, logprobs, labels = fit_inputs(pack, [r.labels for r in rows], outcomes)
    head, fitted = learn_mod.fit_head(
        pack,
        features,
        logprobs,
        labels,
        **learn_mod.engine_keys(engine),
        name=STARTER_NAME,
        read=read,
        min_per_option=learn_mod.MIN_PER_OPTION,
        rare="backoff",
        on_criterion=on_criterion,
    )
    head.kind = "starter"
    for cid, h in head.criteria.items():
        h.info["rows"] = {"team": 0, "starter": len(labels.get(cid, ()))}
    head.report["starter"] = {"set": STARTER_SET, "rows": len(rows), "read": read}
    return head, fitted


RowsDone = Callable[[int, int], None]
"""Called with (rows done, rows in all) while the starter set is scored."""


class CriterionClock:
    """The head's fit after the rows, criterion by criterion (seconds each, a minute in all on a busy 2-core
    machine): says each one as it starts, with the time left at the pace of those fitted so far (measured
    here, never assumed), so a fit is never silent."""

    def __init__(
        self, criteria: int, say: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.criteria = criteria
        self.say = say
        self.clock = clock
        self.done = 0
        self.started: float | None = None
        self.last: float | None = None

    def __call__(self, criterion: str, rows: int) -> None:
        from triage.render import duration

        now = self.clock()
        if self.started is None:
            self.started = now
        else:
            self.done += 1
        self.last = now
        left = self.left()
        if self.say is not None:
            pace = f"; about {duration(left)} left" if left is not None else ""
            self.say(f"starter head: fitting {criterion} ({self.done + 1} of {self.criteria}) on {rows} rows{pace}")

    def left(self) -> float | None:
        """Seconds left at the pace so far (the running criterion counted whole); None before one is done."""
        if self.started is None or not self.done or self.last is None:
            return None
        per = (self.last - self.started) / self.done
        return per * (self.criteria - self.done)


@dataclass(frozen=True)
class Fitted:
    """What :func:`fit_and_store` did: the head, how long it took, and what could not be kept on disk."""

    head: Head
    seconds: float
    unkept: tuple[str, ...] = ()  # one line each: the head's file, the readouts, that could not be written


def fit_and_store(
    engine: ScoringEngine,
    pack: Pack,
    *,
    progress: RowsDone | None = None,
    say: Callable[[str], None] | None = None,
    store: Callable[[Head], object] | None = None,
) -> Fitted:
    """Score the starter set (eval's readout cache first: a second fit scores nothing), fit the starter head
    (``say``: each criterion's fit, :class:`CriterionClock`), store it (``store``, default
    :func:`~triage.learning.fitstore.store_starter_head`; ``scripts/ship_starter_heads.py`` writes the shipped
    heads with the same fit).

    A write that fails (a full disk) never costs the fit: readouts that cannot be cached are kept in memory
    for the fit, and a head whose file cannot be written is kept in memory for this process
    (:func:`triage.learning.fitstore.kept_starter`); :attr:`Fitted.unkept` says what was not kept.
    """
    t0 = time.perf_counter()
    unkept: list[str] = []
    scored = score_starter_rows(engine, pack, progress=progress, unkept=unkept)
    head, _ = fit_starter_head(
        engine, pack, scored.rows, scored.outcomes, on_criterion=CriterionClock(len(pack.criteria), say)
    )
    unkept += keep_head(head, store)
    return Fitted(head, time.perf_counter() - t0, tuple(unkept))


def keep_head(head: Head, store: Callable[[Head], object] | None = None) -> list[str]:
    """Store a fitted starter head (``store``, default :func:`~triage.learning.fitstore.store_starter_head`, which
    keeps it in memory when its file cannot be written); what could not be kept on disk, one line each."""
    from triage.learning.fitstore import starter_path, store_starter_head

    try:
        (store or store_starter_head)(head)
    except OSError as exc:
        path = starter_path(head.model_sha256, head.pack_hash, head.prompt_format)
        return [f"the head's file {path} cannot be written: {exc.strerror or exc}"]
    return []


UNKEPT_HINT = (
    "the head is applied from memory while this process runs, and the next start fits it again: free space "
    "there (or set TRIAGE_HOME to a folder on a disk with room)"
)


def score_starter_rows(
    engine: Any, pack: Pack, *, progress: RowsDone | None = None, unkept: list[str] | None = None
) -> Scored:
    """The starter set scored at the starter's read position, with features (eval's readout cache first), as
    :func:`fit_and_store` fits on; ``progress(done, total)`` after each row, when the engine is free. Readouts
    the cache cannot write (a full disk) are kept in memory for the fit, and said in ``unkept``."""
    from triage.learning.cache import ReadoutCache
    from triage.learning.scorer import Scorer, score_rows

    rows = starter_rows(pack)
    with ReadoutCache(keep_going=True) as cache:
        scorer = Scorer(engine, pack, cache, "label", STARTER_READ)
        scorer.features = True
        done = 0

        def tick(_hit: bool) -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, len(rows))

        scored = score_rows(scorer, rows, tick)
    if cache.write_failure and unkept is not None:
        unkept.append(cache.write_failure)
    return scored


def needs_fit(engine: ScoringEngine, pack: Pack, request: FitRequest) -> bool:
    """Whether the starter head must be fitted before scoring: the ``starter`` setting is on, no head was asked
    for or refused, the pack is the built-in one, and neither a head of the team's nor a starter head is stored
    for this model, pack and prompt format. A stored starter head that does not fit this setup (another model's
    widths, read position, attention or options; damaged) is fitted again; one fitted in this process whose file
    could not be written is not (:func:`triage.learning.fitstore.kept_starter`). A team's head that does not fit
    is not replaced: the note on it names the command that fits it (:data:`triage.learning.fitstore.RELEARN`)."""
    from triage.learning.fitstore import head_name, heads_dir, kept_starter, starter_unfit, stored_starter

    if not getattr(request, "starter", True) or request.head or request.no_head or not is_builtin(pack):
        return False
    team = heads_dir() / head_name(engine.sha256, pack.hash, engine.format_for("label").id)
    if team.is_file() or kept_starter(engine, pack) is not None:
        return False
    stored = stored_starter(engine, pack)
    return stored is None or starter_unfit(engine, pack, stored) is not None


def ensure(
    engine: ScoringEngine,
    pack: Pack,
    request: FitRequest,
    *,
    say: Callable[[str], None],
    progress: RowsDone | None = None,
) -> bool:
    """Fit and store the starter head when :func:`needs_fit`, saying so once (``say``) before and after.

    Returns True when it fitted one. A fit that fails is said and scoring goes on zero-shot: the starter is
    a convenience, never a reason not to score.
    """
    from triage.errors import TriageError
    from triage.learning.fitstore import starter_unfit, stored_starter

    if not needs_fit(engine, pack, request):
        return False
    try:
        n = len(starter_rows(pack))
        stored = stored_starter(engine, pack)
        why = starter_unfit(engine, pack, stored) if stored is not None else None
        again = f"again (the stored one does not fit: {why}) " if why else ""
        say(
            f"fitting the starter head for {engine.name} {again}on triage's {n} example tickets (once per model; "
            "TRIAGE_STARTER=0 or `starter = false` in the config turns it off)"
        )
        fitted = fit_and_store(engine, pack, progress=progress, say=say)
    except (TriageError, OSError) as exc:
        say(f"the starter head could not be fitted ({getattr(exc, 'message', None) or exc}); scoring zero-shot")
        return False
    say(f"starter head fitted in {fitted.seconds:.0f} s: {', '.join(fitted.head.criteria)} now decided by it")
    if fitted.unkept:
        say(f"warning: {'; '.join(fitted.unkept)}; {UNKEPT_HINT}")
    return True


@dataclass(frozen=True)
class FitSet:
    """What a head on the built-in pack is fitted on once the starter rows are in: per criterion, features,
    raw log-probs, gold indices and row weights, and what went in (:func:`combine`)."""

    features: dict[str, np.ndarray]
    logprobs: dict[str, np.ndarray]
    labels: dict[str, list[int]]
    weights: dict[str, list[float]]
    team: dict[str, int]
    starter_used: dict[str, int]

    def said(self) -> str:
        """One line: which criteria took starter rows, and which are the team's alone."""
        mixed = [f"{cid} ({self.team.get(cid, 0)} yours + {n} starter)" for cid, n in self.starter_used.items()]
        alone = [cid for cid, n in self.team.items() if cid not in self.starter_used and n]
        parts = []
        if mixed:
            parts.append(
                f"with triage's starter tickets, yours weighing {TEAM_WEIGHT:g}× one of them: {', '.join(mixed)}"
            )
        if alone:
            parts.append(f"on your labels alone (at least {TEAM_ENOUGH} each): {', '.join(alone)}")
        return "; ".join(parts)


def fit_set(
    pack: Pack,
    team_labels: Sequence[dict[str, str]],
    team_outcomes: Sequence[Outcome],
    starter: Sequence[LabelledRow],
    starter_outcomes: Sequence[Outcome],
) -> FitSet:
    """:func:`combine`, then :func:`triage.learning.scorer.fit_inputs` with each criterion's row weights."""
    from triage.learning.scorer import fit_inputs

    both = combine(team_labels, team_outcomes, starter, starter_outcomes)
    features, logprobs, labels = fit_inputs(pack, both.labels, both.outcomes)
    weights = {cid: [w for lab, w in zip(both.labels, both.weights, strict=True) if cid in lab] for cid in labels}
    return FitSet(features, logprobs, labels, weights, both.team, both.starter_used)


def rows_info(fitted: FitSet, head: Head) -> None:
    """Record in ``head`` how many of each criterion's rows were the team's and the starter's (its decisions
    say ``starter`` where none was the team's)."""
    for cid, h in head.criteria.items():
        h.info["rows"] = {"team": fitted.team.get(cid, 0), "starter": fitted.starter_used.get(cid, 0)}
