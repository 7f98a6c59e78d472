"""``full``: every prompt whole, from an empty cache. Bench's baseline.

Not a scoring mode: ``triage bench`` times the reuse modes against it (``speedup.<mode>_vs_full``)
and reports their drift from it (``drift.max_abs_prob_vs_full``, ``fanout_vs_full``). Pass it to
``Engine.score`` as the schedule (``schedule=Full()``, as :func:`triage.lab.score.score` takes it, with
``LabOptions(mode="full")``);
:class:`Whole` is also :mod:`triage.lab.split`'s.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from triage.lab.serial import decode_one
from triage.scoring.prefix_store import PrefixStore
from triage.scoring.prompt_spec import PromptSpec
from triage.scoring.readout import Reading
from triage.scoring.run import Run, ScoreEvent


class Whole:
    """Shared by :class:`Full` and bench's ``split``: each prompt from an empty cache."""

    name = "full"

    def run(self, run: Run, kv: PrefixStore) -> Iterator[ScoreEvent]:
        kv.drop()
        run.measure("ticket", sum(len(s.tokens) + run.reader.extra_tokens(s) for s in run.prompts.prompts))
        yield run.prefilled()
        by_crit: dict[int, list[PromptSpec]] = {}
        for spec in run.prompts.prompts:
            by_crit.setdefault(spec.criterion, []).append(spec)
        for ci, specs in by_crit.items():
            for spec in specs:
                run.check()
                t0 = time.perf_counter()
                kv.native.seq_rm(0, -1, -1)
                read = self.evaluate(run, kv, spec)
                ms = (time.perf_counter() - t0) * 1000
                run.record(spec, read, (ms, len(spec.tokens) + run.reader.extra_tokens(spec)))
            yield run.done(ci)
        run.tokens.evaluated = sum(a.tokens for a in run.accs.values())

    def evaluate(self, run: Run, kv: PrefixStore, spec: PromptSpec) -> Reading:
        """One prompt from an empty cache, in one batch."""
        return decode_one(kv, run, spec, (spec.tokens, 0))


class Full(Whole):
    """Every prompt evaluated whole: the baseline."""
