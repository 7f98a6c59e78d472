"""Decode schedules: how a ticket's prompts go through the model, one small object each.

* :class:`Fanout`: the product. The prefix shared into one sequence per tail
  (``llama_memory_seq_cp``, no copy in a unified cache) and all tails decoded in one
  batch, with the ticket's own tokens in that batch too.

The engine takes a schedule as its seam (``Engine.score(..., schedule=...)``; default
:class:`Fanout`). The lab's schedules plug in there: ``serial`` (each tail in turn,
:mod:`triage.lab.serial`), serial's ``restore``, ``full`` and ``split`` (:mod:`triage.lab`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Protocol

from triage.model.seq import Seq
from triage.scoring.prompt_spec import PromptSpec
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


class Fanout:
    """All tails in as few batches as fit, each in its own sequence(s) sharing the prefix.

    When the ticket's part of the prefix is not resident, the first batch also carries
    it: its tokens belong to sequence 0 and to every tail's sequence of that batch, so
    prefill and tails cost one decode. The ticket's cells are then dropped again (only
    the stable block stays resident), so that no later ticket reuses a prefix computed
    in another batch shape than its own.
    """

    name = "fanout"

    def run(self, run: Run, kv: Resident) -> Iterator[ScoreEvent]:
        prompts = run.prompts
        rest: tuple[int, ...] = ()
        kept = False  # sequence 0 holds this ticket's cells, to be remembered and dropped
        if kv.tokens == prompts.prefix:
            kv.ensure_prefix(run)
        else:
            t0 = time.perf_counter()
            kv.ensure_stable(run)
            have = kv.resume(run)  # a thread's earlier messages, when their state was kept
            rest = prompts.prefix[have:]
            kept = have < len(prompts.prefix) or have > len(prompts.stable)
            run.timing.prefill_ms = (time.perf_counter() - t0) * 1000
        run.plan()
        for g, group in enumerate(self.groups(run, kv)):
            run.check()
            self.batch(run, kv, group, rest if g == 0 else ())
        if kept:
            if rest:
                kv.remember(run)
            kv.keep(prompts.stable)
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
            for j in range(k, k + width):
                n.seq_cp(0, j, -1, -1)
            pieces += got
            sizes.append(sum(len(s.tokens) for s in got))
            k += width
        if rest:
            pieces.insert(0, Seq("rest", 0, p - len(rest), rest, also=tuple(range(1, k))))
        try:
            out = n.decode(pieces, should_stop=run.stop, progress=run.progress)
        finally:
            for j in range(1, k):
                n.seq_rm(j, -1, -1)
        ms = (time.perf_counter() - t0) * 1000
        total = sum(sizes)
        if rest:  # one batch: time shared by tokens
            share = ms * len(rest) / (len(rest) + total)
            run.timing.prefill_ms += share
            ms -= share
        for i, spec in enumerate(group):
            run.record(spec, reader.read(i, spec, out), (ms * sizes[i] / total, sizes[i]))
