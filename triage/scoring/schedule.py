"""Decode schedules: how a ticket's prompts go through the model, one small object each.

* :class:`Fanout`: the product. The prefix store's hit restored, the prefix shared into one
  sequence per tail (no copy in a unified cache) and all tails decoded in one batch, with the
  rest of the ticket's tokens in that batch too.

The engine takes a schedule as its seam (``Engine.score(..., schedule=...)``; default
:class:`Fanout`). The lab's schedules plug in there: ``serial`` (each tail in turn,
:mod:`triage.lab.serial`), serial's ``restore``, ``full`` and ``split`` (:mod:`triage.lab`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Protocol

from triage.model.seq import Seq
from triage.scoring.prefix_store import PrefixStore
from triage.scoring.prompt_spec import PromptSpec
from triage.scoring.run import Run, ScoreEvent


class Schedule(Protocol):
    """One way to decode a ticket's prompts."""

    name: str  # the result's ``mode``

    def run(self, run: Run, kv: PrefixStore) -> Iterator[ScoreEvent]:
        """Decode ``run``'s prompts, yielding :class:`Prefilled` then each :class:`CriterionScored`.

        Fills ``run``'s tokens, timing and readouts. Raises ``Cancelled`` when ``run.stop()``
        turns True, between decodes or inside one.
        """


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

    def run(self, run: Run, kv: PrefixStore) -> Iterator[ScoreEvent]:
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
    def groups(run: Run, kv: PrefixStore) -> list[list[PromptSpec]]:
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
    def batch(run: Run, kv: PrefixStore, group: list[PromptSpec], rest: tuple[int, ...]) -> None:
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
