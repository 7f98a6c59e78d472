"""``serial/restore``: serial, back to the prefix by reloading a saved state instead of truncating.

Not a scoring mode: ``triage bench`` times it (``serial_restore``) beside serial's truncate, and it
must match the same split bit for bit (``drift.max_abs_prob_same_split``, and
``restore_vs_truncate``). The prefix's state is saved once (``llama_state_seq_get_data``); before
every tail but the first, sequence 0 is cleared and the state reloaded
(``llama_state_seq_set_data``). Pass it to ``Engine.score`` as the schedule (``schedule=Restore()``,
with ``LabOptions(mode="serial")``).
"""

from __future__ import annotations

from triage.lab.serial import Serial, decode_one
from triage.scoring.prefix_store import PrefixStore
from triage.scoring.prompt_spec import PromptSpec
from triage.scoring.readout import Reading
from triage.scoring.run import Run


class Restore(Serial):
    """:class:`~triage.lab.serial.Serial`, restoring a saved prefix state before each tail."""

    name = "serial/restore"

    def __init__(self) -> None:
        self.saved = bytearray()  # the store reloads a bytearray without a copy

    def hold(self, kv: PrefixStore) -> None:
        self.saved = kv.snapshot()

    def tail(self, run: Run, kv: PrefixStore, spec: PromptSpec, first: bool) -> Reading:
        if not first:
            kv.reload(self.saved)
        return decode_one(kv, run, spec, (run.prompts.tail(spec), len(run.prompts.prefix)))
