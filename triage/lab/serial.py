"""``serial``: the prefix once, then each tail in turn (the lab's schedule; eval scores the letter readout so).

Back to the prefix after each tail by dropping the tail's cells (``llama_memory_seq_rm``). Bench times
it beside fanout, and it must match :mod:`triage.lab.split` bit for bit. :func:`decode_one` is what the
lab's other schedules (:mod:`triage.lab.full`, :mod:`triage.lab.split`, :mod:`triage.lab.restore`) build on.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from triage.scoring.prefix_store import PrefixStore
from triage.scoring.prompt_spec import PromptSpec
from triage.scoring.readout import Reading
from triage.scoring.run import Run, ScoreEvent


def decode_one(kv: PrefixStore, run: Run, spec: PromptSpec, at: tuple[tuple[int, ...], int]) -> Reading:
    """Decode ``tail`` after ``pos`` cells of sequence 0 (``at = (tail, pos)``) and read it.

    Whole-answer reads use one more sequence per option sharing sequence 0's cells.
    """
    tail, pos = at
    pieces = run.reader.pieces("x", spec, tail, (pos, 0))
    width = run.reader.width(spec)
    kv.share(range(1, width))
    try:
        out = kv.native.decode(pieces, should_stop=run.stop, progress=run.progress)
    finally:
        kv.unshare(range(1, width))
    return run.reader.read("x", spec, out)


class Serial:
    """The prefix once, then each tail in turn, back to the prefix after each by dropping the tail's cells.

    Subclasses change the way back with :meth:`hold` and :meth:`tail` (bench's ``restore``,
    :mod:`triage.lab.restore`); the rest (the order, the timing, what stays resident) is this one's.
    """

    name = "serial/truncate"

    def run(self, run: Run, kv: PrefixStore) -> Iterator[ScoreEvent]:
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

    def hold(self, kv: PrefixStore) -> None:
        """Called once the prefix is in sequence 0, before the first tail (untimed): nothing to keep here."""

    def tail(self, run: Run, kv: PrefixStore, spec: PromptSpec, first: bool) -> Reading:
        """Decode ``spec``'s tail after the prefix and read it, leaving sequence 0 at the prefix again.

        ``first``: the ticket's first tail (sequence 0 holds exactly the prefix). Timed as the tail's.
        """
        p = len(run.prompts.prefix)
        read = decode_one(kv, run, spec, (run.prompts.tail(spec), p))
        kv.native.seq_rm(0, p, -1)
        return read
