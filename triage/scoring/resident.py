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
from triage.scoring.run import Run

log = logging.getLogger(__name__)


class StableStore(Protocol):
    """Persists the stable block's KV state (see :class:`triage.scoring.prefix.StableCache`)."""

    def get(self, key: str, tokens: tuple[int, ...]) -> bytes | bytearray | None: ...

    def put(self, key: str, tokens: tuple[int, ...], state: bytes | bytearray) -> None: ...

    def note_change(self, parts: dict[str, str]) -> str | None: ...


class Resident:
    """Sequence 0's contents, kept in step with the cache."""

    def __init__(self, native: NativeModel, store: StableStore | None) -> None:
        self.native = native
        self.store = store
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
        ms = self.hold(stable, run.stable_key, run.stop)
        run.stable_ready = True
        if ms is None:
            run.tokens.stable_cached = len(stable)
            return
        run.timing.stable_ms = ms
        if run.stable_note:
            run.warnings.append(run.stable_note)

    def hold(self, stable: tuple[int, ...], key: str, stop: Callable[[], bool] | None = None) -> float | None:
        """Make sequence 0 hold exactly the stable block ``stable`` (stored under ``key``).

        Keeps it when resident, else restores it from the store, else computes it (and
        stores it).

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
        self.native.decode([Seq("stable", 0, 0, stable)], should_stop=stop)
        ms = (time.perf_counter() - t1) * 1000
        self.tokens = stable
        if self.store:
            self.store.put(key, stable, self.native.state_get(0))
        return ms

    def ensure_prefix(self, run: Run) -> None:
        """Make sequence 0 hold exactly the prefix, reusing what is resident or stored."""
        prefix, stable = run.prompts.prefix, run.prompts.stable
        t0 = time.perf_counter()
        if self.tokens == prefix:
            run.tokens.prefix_cached = len(prefix)
            run.tokens.stable_cached = len(stable)
            run.stable_ready = True
            return
        self.ensure_stable(run)
        self.tokens = stable
        self.native.decode([Seq("prefix", 0, len(stable), prefix[len(stable) :])], should_stop=run.stop)
        self.tokens = prefix
        run.tokens.prefix_cached = run.tokens.stable_cached
        run.timing.prefill_ms = (time.perf_counter() - t0) * 1000

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
