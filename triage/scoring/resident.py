"""What sequence 0 of the KV cache holds between and during scores: the resident prefix.

After a ticket the stable block (and, after serial, the whole prefix) stays in
sequence 0, so the next ticket of the same pack reuses it. A ``stable_store``
(:class:`triage.scoring.prefix.StableCache`) keeps the stable block's state across
restarts. Batch boundaries are always [stable block][rest of prefix][tail]: that fixed
split is what makes reuse exact.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from triage.errors import TriageError
from triage.model.native import NativeModel
from triage.model.seq import Seq
from triage.scoring.memory import Saved, ThreadStates, common_length, first_edit
from triage.scoring.run import Run

log = logging.getLogger(__name__)


class StableStore(Protocol):
    """Persists the stable block's KV state (see :class:`triage.scoring.prefix.StableCache`)."""

    def get(self, key: str, tokens: tuple[int, ...]) -> bytes | bytearray | None: ...

    def put(self, key: str, tokens: tuple[int, ...], state: bytes | bytearray) -> None: ...

    def note_change(self, parts: dict[str, str]) -> str | None: ...


class Resident:
    """Sequence 0's contents, kept in step with the cache."""

    def __init__(self, native: NativeModel, store: StableStore | None, memory: ThreadStates | None = None) -> None:
        self.native = native
        self.store = store
        self.memory = memory  # recently scored tickets' cells after the stable block (None: none kept)
        self.tokens: tuple[int, ...] = ()  # what sequence 0 holds now (complete pieces only)

    def drop(self) -> None:
        """Empty sequence 0."""
        self.native.seq_rm(0, -1, -1)
        self.tokens = ()

    def keep(self, tokens: tuple[int, ...]) -> None:
        """Drop sequence 0's cells past ``tokens`` (a prefix of what it holds)."""
        self.native.seq_rm(0, len(tokens), -1)
        self.tokens = tokens

    def ensure_stable(self, run: Run) -> None:
        """Make sequence 0 start with ``run``'s stable block and hold nothing after it.

        A change of stable block since the last one is said once, when its prefill is paid.
        """
        stable = run.prompts.stable
        ms = self.hold(stable, run.stable_key, run.stop, run.measure("stable", len(stable)))
        run.stable_ready = True
        if ms is None:
            run.tokens.stable_cached = len(stable)
            return
        run.timing.stable_ms = ms
        if run.stable_note:
            run.warnings.append(run.stable_note)

    def hold(
        self,
        stable: tuple[int, ...],
        key: str,
        stop: Callable[[], bool] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> float | None:
        """Make sequence 0 hold exactly the stable block ``stable`` (stored under ``key``).

        Keeps it when resident, else restores it from the store, else computes it (and
        stores it; ``progress`` is told how far that decode has got).

        Returns:
            The ms spent computing it, or None when it was resident or restored.
        """
        if self.tokens[: len(stable)] == stable and len(self.tokens) >= len(stable):
            self.keep(stable)
            return None
        self.drop()
        state = self.store.get(key, stable) if self.store else None
        if state is not None:
            try:
                self.native.state_set(0, state)
                self.tokens = stable
                return None
            except TriageError:
                log.warning("stored stable state for %s was rejected; recomputing", key)
                self.drop()
        t1 = time.perf_counter()
        self.native.decode([Seq("stable", 0, 0, stable)], should_stop=stop, progress=progress)
        ms = (time.perf_counter() - t1) * 1000
        self.tokens = stable
        if self.store:
            self.store.put(key, stable, self.native.state_get(0))
        return ms

    def ensure_prefix(self, run: Run) -> None:
        """Make sequence 0 hold exactly the prefix, reusing what is resident, remembered or stored; counts the
        tokens the score evaluates (:meth:`~triage.scoring.run.Run.plan`)."""
        prefix, stable = run.prompts.prefix, run.prompts.stable
        t0 = time.perf_counter()
        if self.tokens == prefix:
            run.tokens.prefix_cached = len(prefix)
            run.tokens.stable_cached = len(stable)
            run.stable_ready = True
            run.plan()
            return
        self.ensure_stable(run)
        have = self.resume(run)
        progress = run.plan()
        self.native.decode([Seq("prefix", 0, have, prefix[have:])], should_stop=run.stop, progress=progress)
        self.tokens = prefix
        run.timing.prefill_ms = (time.perf_counter() - t0) * 1000

    # -- threads: a ticket's cells after the stable block, kept between its scores -----------
    def resume(self, run: Run) -> int:
        """After :meth:`ensure_stable`: load what :attr:`memory` kept of this ticket's prefix.

        The saved tokens and the new prefix are compared token by token; the cells of
        their common part are loaded behind the stable block (the rest are dropped), so
        only the tokens after it need evaluating. Fills ``run.tokens.prefix_cached``
        and ``run.reuse``.

        Returns:
            How many of the prefix's tokens sequence 0 now holds (the stable block's
            length when nothing was kept).
        """
        prefix, stable = run.prompts.prefix, run.prompts.stable
        have = len(stable)
        saved = self.memory.get(run.ticket_id, run.stable_key) if self.memory and run.ticket_id else None
        if saved is not None and saved.start == have and saved.tokens[:have] == stable:
            shared = common_length(saved.tokens, prefix)
            run.reuse.edited = first_edit(saved.messages, run.messages)
            run.reuse.previous = len(saved.messages)
            run.reuse.compaction_moved = saved.dropped != run.prompts.dropped
            # Only when the ticket itself grew or changed: an unchanged ticket is read whole again, whatever
            # follows it (tails, or the shared cue of a head), so that scoring it twice gives the same numbers
            # (reused cells came from another batch shape: docs/engine.md).
            if have < shared < len(prefix) and saved.ticket != run.prompts.ticket_text:
                spare = self.native.n_seq_max - 1
                self.native.seq_rm(spare, -1, -1)
                try:
                    self.native.state_set(spare, saved.state)
                    self.native.seq_cp(spare, 0, have, shared)  # only the cells the new prefix shares
                finally:
                    self.native.seq_rm(spare, -1, -1)
                self.tokens = prefix[:shared]
                run.reuse.reused = shared - have
                have = shared
        run.tokens.prefix_cached = run.tokens.stable_cached + (have - len(stable))
        return have

    def remember(self, run: Run, seq: int = 0) -> None:
        """Save the cells of this ticket's prefix after the stable block (sequence ``seq`` holds the prefix)."""
        prefix, stable = run.prompts.prefix, run.prompts.stable
        if self.memory is None or not self.memory.enabled or run.ticket_id is None or len(prefix) <= len(stable):
            return
        n, spare = self.native, self.native.n_seq_max - 1
        n.seq_rm(spare, -1, -1)
        try:
            n.seq_cp(seq, spare, len(stable), len(prefix))
            state = n.state_get(spare)
            self.memory.size_for(len(state) / (len(prefix) - len(stable)), n.n_ctx)
        finally:
            n.seq_rm(spare, -1, -1)
        saved = Saved(
            run.stable_key, prefix, len(stable), run.messages, state, run.prompts.dropped, run.prompts.ticket_text
        )
        self.memory.put(run.ticket_id, saved)

    def after_cancel(self, run: Run) -> None:
        """Clean up after a cancelled (possibly aborted) decode.

        llama.cpp keeps the cells of the micro-batches an aborted decode finished: every
        sequence's cells past the stable block go, and the stable block stays only when
        it was complete. The next score is then exactly a fresh engine's.
        """
        n = self.native
        for seq in range(1, n.n_seq_max):
            n.seq_rm(seq, -1, -1)
        if run.stable_ready:
            self.keep(run.prompts.stable)
        else:
            n.clear()
            self.tokens = ()
