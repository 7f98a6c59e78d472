"""Decode schedules: how a ticket's prompts go through the model, one small object each.

* :class:`Fanout`: the product. The prefix store's hit restored, the prefix shared into one
  sequence per tail (no copy in a unified cache) and all tails decoded in one batch, with the
  rest of the ticket's tokens in that batch too.
* :class:`Serial`: the prefix once, then each tail, back to the prefix by dropping the
  tail's cells (``llama_memory_seq_rm``). Eval scores the letter readout so.

:func:`schedule_for` picks one from the options, once per score. Bench's schedules are
not here: ``full`` (every prompt whole from an empty cache, the baseline:
:mod:`triage.bench.full`), serial's ``restore`` (back to the prefix by reloading a saved
state: :mod:`triage.bench.restore`) and ``split`` (serial's batch boundaries from an empty
cache for every prompt, the exactness reference: :mod:`triage.bench.split`) live with
bench, which passes them in (``Engine.score(..., schedule=...)``); :func:`decode_one` and
:class:`Serial`'s hooks are what they build on.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Protocol

from triage.errors import TriageError
from triage.model.seq import Seq
from triage.scoring.options import MODES, ScoreOptions
from triage.scoring.prompt_spec import PromptSpec
from triage.scoring.readout import Readout
from triage.scoring.resident import Resident
from triage.scoring.run import Run, ScoreEvent


class Schedule(Protocol):
    """One way to decode a ticket's prompts."""

    name: str  # the result's ``mode``

    def run(self, run: Run, kv: Resident) -> Iterator[ScoreEvent]:
        """Decode ``run``'s prompts, yielding :class:`Prefilled` then each :class:`CriterionScored`.

        Fills ``run``'s tokens, timing and readouts. Raises ``Cancelled`` when ``run.stop()``
        turns True, between decodes or inside one.
        """


def decode_one(kv: Resident, run: Run, spec: PromptSpec, at: tuple[tuple[int, ...], int]) -> Readout:
    """Decode ``tail`` after ``pos`` cells of sequence 0 (``at = (tail, pos)``) and read it.

    Whole-answer reads use one more sequence per option sharing sequence 0's cells.
    """
    tail, pos = at
    n = kv.native
    pieces = run.reader.pieces("x", spec, tail, (pos, 0))
    width = run.reader.width(spec)
    for k in range(1, width):
        n.seq_cp(0, k, -1, -1)
    try:
        out = n.decode(pieces, should_stop=run.stop, progress=run.progress)
    finally:
        for k in range(1, width):
            n.seq_rm(k, -1, -1)
    return run.reader.read("x", spec, out)


class Serial:
    """The prefix once, then each tail in turn, back to the prefix after each by dropping the tail's cells.

    Subclasses change the way back with :meth:`hold` and :meth:`tail` (bench's ``restore``,
    :mod:`triage.bench.restore`); the rest (the order, the timing, what stays resident) is this one's.
    """

    name = "serial/truncate"

    def run(self, run: Run, kv: Resident) -> Iterator[ScoreEvent]:
        prompts = run.prompts
        kv.ensure_prefix(run)  # counts tokens.evaluated (Run.plan)
        yield run.prefilled()
        self.hold(kv)
        by_crit: dict[int, list[PromptSpec]] = {}
        for spec in prompts.prompts:
            by_crit.setdefault(spec.criterion, []).append(spec)
        first = True
        for ci, specs in by_crit.items():
            for spec in specs:
                run.check()
                t0 = time.perf_counter()
                read = self.tail(run, kv, spec, first)
                first = False
                ms = (time.perf_counter() - t0) * 1000
                run.record(spec, read, (ms, len(prompts.tail(spec)) + run.reader.extra_tokens(spec)))
            yield run.done(ci)
        kv.keep(prompts.prefix)
        if run.tokens.prefix_cached < len(prompts.prefix):  # new cells: keep them for the ticket's next score
            kv.remember(run)

    def hold(self, kv: Resident) -> None:
        """Called once the prefix is in sequence 0, before the first tail (untimed): nothing to keep here."""

    def tail(self, run: Run, kv: Resident, spec: PromptSpec, first: bool) -> Readout:
        """Decode ``spec``'s tail after the prefix and read it, leaving sequence 0 at the prefix again.

        ``first``: the ticket's first tail (sequence 0 holds exactly the prefix). Timed as the tail's.
        """
        p = len(run.prompts.prefix)
        read = decode_one(kv, run, spec, (run.prompts.tail(spec), p))
        kv.native.seq_rm(0, p, -1)
        return read


class Fanout:
    """All tails in as few batches as fit, each in its own sequence(s) sharing the prefix.

    One path: the prefix store restores the longest hit (:meth:`PrefixStore.restore
    <triage.scoring.prefix_store.PrefixStore.restore>`: the stable block, and a prefill's or the
    ticket's own earlier cells where they may be reused), then the rest of the prefix and the tails
    go in one batch: the rest's tokens belong to sequence 0 and to every tail's sequence of that
    batch. The new cells are saved and dropped again (only the stable block stays resident), so a
    cold score is always [stable block][ticket + every tail].
    """

    name = "fanout"

    def run(self, run: Run, kv: Resident) -> Iterator[ScoreEvent]:
        prompts = run.prompts
        t0 = time.perf_counter()
        have = kv.restore(run)
        rest = prompts.prefix[have:]
        run.timing.prefill_ms = (time.perf_counter() - t0) * 1000
        run.plan()
        for g, group in enumerate(self.groups(run, kv)):
            run.check()
            self.batch(run, kv, group, rest if g == 0 else ())
        kv.settle(run, rest)
        yield run.prefilled()
        for ci in run.chosen:
            yield run.done(ci)

    @staticmethod
    def groups(run: Run, kv: Resident) -> list[list[PromptSpec]]:
        """The prompts in batches that fit the context and the sequence limit."""
        prompts, reader, n = run.prompts, run.reader, kv.native
        groups: list[list[PromptSpec]] = [[]]
        room = n.n_ctx - len(prompts.prefix)
        used = seqs_used = 0
        for spec in prompts.prompts:
            t = len(prompts.tail(spec)) + reader.extra_tokens(spec)
            w = reader.width(spec)
            if groups[-1] and (used + t > room or seqs_used + w > n.n_seq_max - 1):
                groups.append([])
                used = seqs_used = 0
            groups[-1].append(spec)
            used += t
            seqs_used += w
        return groups

    @staticmethod
    def batch(run: Run, kv: Resident, group: list[PromptSpec], rest: tuple[int, ...]) -> None:
        """Decode one group's tails (and ``rest``, the ticket's tokens, when given) in one batch."""
        n, prompts, reader = kv.native, run.prompts, run.reader
        p = len(prompts.prefix)
        t0 = time.perf_counter()
        pieces: list[Seq] = []
        sizes: list[int] = []
        k = 1
        for i, spec in enumerate(group):
            got = reader.pieces(i, spec, prompts.tail(spec), (p, k))
            width = reader.width(spec)
            kv.share(range(k, k + width))
            pieces += got
            sizes.append(sum(len(s.tokens) for s in got))
            k += width
        if rest:
            pieces.insert(0, Seq("rest", 0, p - len(rest), rest, also=tuple(range(1, k))))
        try:
            out = n.decode(pieces, should_stop=run.stop, progress=run.progress)
        finally:
            kv.unshare(range(1, k))
        ms = (time.perf_counter() - t0) * 1000
        total = sum(sizes)
        if rest:  # one batch: time shared by tokens
            share = ms * len(rest) / (len(rest) + total)
            run.timing.prefill_ms += share
            ms -= share
        for i, spec in enumerate(group):
            run.record(spec, reader.read(i, spec, out), (ms * sizes[i] / total, sizes[i]))


_BENCH_ONLY = {
    "full": ("baseline", "triage.bench.full.Full()"),
    "split": ("exactness reference", "triage.bench.split.Split()"),
}


def schedule_for(options: ScoreOptions) -> Schedule:
    """The schedule ``options.mode`` names, chosen once per score: ``fanout`` or ``serial``.

    Raises:
        TriageError: ``full`` or ``split``, bench's schedules, which only bench and the tests run
            (they pass the schedule in).
    """
    if options.mode == "fanout":
        return Fanout()
    if options.mode == "serial":
        return Serial()
    what, schedule = _BENCH_ONLY.get(options.mode, ("own schedule", "it"))
    raise TriageError(
        f"mode {options.mode!r} is bench's {what}, not a scoring mode",
        hint=f"use {' or '.join(MODES)}; bench and the tests pass {schedule} as the schedule",
        exit_code=2,
    )
