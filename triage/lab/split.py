"""``split``: serial's batch boundaries from an empty cache for every prompt.

The exactness reference of bench and the tests, not a scoring mode: every prompt is
decoded as [stable block][rest of the prefix][tail] with nothing reused, so serial
(truncate, and bench's restore) must match it bit for bit. Pass it to ``Engine.score`` as the
schedule (``schedule=Split()``; :func:`triage.lab.score.score` with ``LabOptions(mode="split")`` does).
"""

from __future__ import annotations

from triage.lab.full import Whole
from triage.lab.serial import decode_one
from triage.model.seq import Seq
from triage.scoring.prefix_store import PrefixStore
from triage.scoring.prompt_spec import PromptSpec
from triage.scoring.readout import Reading
from triage.scoring.run import Run


class Split(Whole):
    """Each prompt from an empty cache, in serial's three batches."""

    name = "split"

    def evaluate(self, run: Run, kv: PrefixStore, spec: PromptSpec) -> Reading:
        n, prompts = kv.native, run.prompts
        s = len(prompts.stable)
        n.decode([Seq("s", 0, 0, prompts.stable)], should_stop=run.stop)
        n.decode([Seq("r", 0, s, prompts.prefix[s:])], should_stop=run.stop)
        return decode_one(kv, run, spec, (prompts.tail(spec), len(prompts.prefix)))
