"""The prefix store: which of a prompt's tokens are already computed, and where; the one owner of KV-state reuse.

It answers one question for a prompt of one stable block (model, prompt format, pack: the
``stable_key``): the longest prefix of its tokens already computed, in sequence 0's cells, in a
saved state in memory, or (the stable block) in a file on disk (:mod:`triage.scoring.stable_file`).
It restores that hit, inserts what a score or a prefill computed, and evicts memory entries least
recently used first under one byte budget. No other module calls the model's ``state_get``,
``state_set`` or ``seq_cp`` (``tests/test_kv_owner.py``): schedules and bench share sequence 0
into others and drop them through :meth:`PrefixStore.share` and :meth:`PrefixStore.unshare`.

Which cells beyond the stable block a ticket may reuse (docs/engine.md, "The prefix store"):
a prefill's (any ticket, when the common part after the stable block is at least half of the
prefill's own or :data:`PREFILL_REUSE` tokens), and an earlier score of its own id whose ticket text differed (a
thread that grew or was edited). A ticket scored again unchanged is read whole, so a cold
score's batches are always [stable block][ticket + every tail].
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from triage.domain.thread import Message
from triage.errors import TriageError
from triage.model.native import NativeModel
from triage.model.seq import Seq
from triage.scoring.run import Run

log = logging.getLogger(__name__)
PREFILL_REUSE = 16  # a prefill's cells are reused from this many common tokens after the stable block (or half)


class StableStore(Protocol):
    """Persists the stable block's KV state (see :class:`triage.scoring.stable_file.StableCache`)."""

    def get(self, key: str, tokens: tuple[int, ...]) -> bytes | bytearray | None: ...

    def put(self, key: str, tokens: tuple[int, ...], state: bytes | bytearray) -> None: ...

    def note_change(self, parts: dict[str, str]) -> str | None: ...


@dataclass(frozen=True)
class Saved:
    """One saved state: the cells of sequence 0 after the stable block, and what they were computed from.

    Args:
        stable_key: the stable block the cells follow (model, prompt format, pack).
        tokens: every token of sequence 0 the cells complete (stable block first): the entry's key.
        start: where the saved cells begin (the stable block's length).
        messages: the thread the cells were computed from (the edit note compares them).
        state: the cells, as ``llama_state_seq_get_data`` wrote them.
        dropped: how many messages compaction left out of them.
        ticket: the ticket block's text they were computed from.
        ticket_id: the ticket they were computed for.
        prefilled: made by a prefill (any ticket sharing enough of its tokens may reuse it).
    """

    stable_key: str
    tokens: tuple[int, ...]
    start: int
    messages: tuple[Message, ...]
    state: bytes | bytearray
    dropped: int = 0
    ticket: str = ""
    ticket_id: str | None = None
    prefilled: bool = False

    @property
    def nbytes(self) -> int:
        return len(self.state)

    @property
    def owner(self) -> Owner:
        return Owner(self.ticket_id, self.ticket, self.prefilled)

    @property
    def key(self) -> tuple[str, tuple[int, ...], bool, str | None]:
        """Its place in :class:`Entries`: tokens, and the ticket for a score's own state."""
        return (self.stable_key, self.tokens, self.prefilled, None if self.prefilled else self.ticket_id)


def common_length(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def first_edit(old: tuple[Message, ...], new: tuple[Message, ...]) -> int | None:
    """The 1-based number of the first earlier message that differs, or None when ``new`` only appends.

    A thread that has lost messages counts as edited at the first one missing.
    """
    for i, m in enumerate(old):
        if i >= len(new) or new[i] != m:
            return i + 1
    return None


@dataclass(frozen=True)
class Owner:
    """Whose cells sequence 0 holds after the stable block (what :func:`may_reuse` asks of a resident hit)."""

    ticket_id: str | None
    ticket: str
    prefilled: bool


def same_draft(span: tuple[int, int], shared: int) -> bool:
    """Whether a prompt sharing ``shared`` tokens with a prefill's cells (``span``: from the stable block's end
    to theirs) is the same draft: at least half of the prefill's tokens after the stable block, or
    :data:`PREFILL_REUSE` of them."""
    start, end = span
    return 2 * (shared - start) >= end - start or shared - start >= PREFILL_REUSE


def may_reuse(who: Owner, span: tuple[int, int], run: Run, shared: int) -> bool:
    """Whether ``run`` may reuse ``shared`` tokens of cells computed for ``who`` (the module docstring's rule).

    ``span``: where the cells begin (the stable block's length) and end.
    """
    if who.prefilled:
        return same_draft(span, shared)
    return who.ticket_id is not None and who.ticket_id == run.ticket_id and who.ticket != run.prompts.ticket_text


class Entries:
    """Saved states keyed by their tokens, least recently used dropped first past ``cap_bytes``.

    ``cap_bytes`` None: sized on first use (:meth:`size_for`); 0 keeps nothing.
    """

    def __init__(self, cap_bytes: int | None = None) -> None:
        self.cap_bytes = None if cap_bytes is None else max(0, int(cap_bytes))
        self._items: OrderedDict[tuple[str, tuple[int, ...], bool, str | None], Saved] = OrderedDict()
        self.nbytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, ticket_id: str | None, stable_key: str) -> Saved | None:
        """The newest state a score of ``ticket_id`` saved after the same stable block (its thread's last turn)."""
        for saved in reversed(self._items.values()):
            if saved.ticket_id == ticket_id and saved.stable_key == stable_key and not saved.prefilled:
                return saved
        return None

    def longest(self, run: Run, tokens: tuple[int, ...]) -> tuple[Saved | None, int]:
        """The entry ``run`` may reuse that shares the most of ``tokens``, and how many (marked as used)."""
        best: Saved | None = None
        most = 0
        for saved in self._items.values():
            if saved.stable_key != run.stable_key or tokens[: saved.start] != saved.tokens[: saved.start]:
                continue
            shared = common_length(saved.tokens, tokens)
            if shared > max(most, saved.start) and may_reuse(
                saved.owner, (saved.start, len(saved.tokens)), run, shared
            ):
                best, most = saved, shared
        if best is None:
            self.misses += 1
            return None, 0
        self._items.move_to_end(best.key)
        self.hits += 1
        return best, most

    def size_for(self, bytes_per_token: float, n_ctx: int) -> None:
        """Cap an auto-sized store at ``n_ctx`` tokens' worth of KV state (no change when set)."""
        if self.cap_bytes is None:
            self.cap_bytes = int(bytes_per_token * n_ctx)

    @property
    def enabled(self) -> bool:
        """Whether states are kept (the cap is not 0)."""
        return self.cap_bytes != 0

    def put(self, saved: Saved) -> None:
        """Keep ``saved``, replacing what it makes useless, then trim to the cap.

        A score's state replaces its ticket's earlier ones; a prefill's replaces the earlier prefills of
        the same draft (:func:`same_draft`: the text it grew or was edited from).
        """
        for key, old in list(self._items.items()):
            if old.stable_key != saved.stable_key or old.prefilled != saved.prefilled:
                continue
            shared = common_length(old.tokens, saved.tokens)
            draft = shared > old.start and same_draft((old.start, len(old.tokens)), shared)
            if key == saved.key or (draft if saved.prefilled else old.ticket_id == saved.ticket_id):
                self._pop(key)
        if self.cap_bytes is None or saved.nbytes > self.cap_bytes:
            return
        self._items[saved.key] = saved
        self.nbytes += saved.nbytes
        while self.nbytes > self.cap_bytes:
            _, old = self._items.popitem(last=False)
            self.nbytes -= old.nbytes

    def discard(self, ticket_id: str) -> None:
        """Forget every state of ``ticket_id``."""
        for key, old in list(self._items.items()):
            if old.ticket_id == ticket_id:
                self._pop(key)

    def clear(self) -> None:
        """Forget every state."""
        self._items.clear()
        self.nbytes = 0

    def _pop(self, key: tuple[str, tuple[int, ...], bool, str | None]) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self.nbytes -= old.nbytes


class PrefixStore:
    """The three tiers (sequence 0, memory, the stable block's file) and the KV operations on the context.

    Batch boundaries are always [stable block][rest of the prefix][tails]: that fixed split is what
    makes reuse exact. ``tokens`` is what sequence 0 holds now (complete pieces only).
    """

    def __init__(self, native: NativeModel, store: StableStore | None, memory: Entries | None = None) -> None:
        self.native = native
        self.store = store  # the stable block's disk tier (None: none)
        self.memory = memory  # saved states after the stable block (None: none kept)
        self.tokens: tuple[int, ...] = ()
        self.owner: Owner | None = None  # whose cells follow the stable block in sequence 0
        self.stable_len = 0  # the stable block's length in sequence 0 (0: none there)

    # -- sequences -----------------------------------------------------------------
    def share(self, seqs: Iterable[int], src: int = 0) -> None:
        """Make each of ``seqs`` share sequence ``src``'s cells (no copy in a unified cache)."""
        for j in seqs:
            self.native.seq_cp(src, j, -1, -1)

    def unshare(self, seqs: Iterable[int]) -> None:
        """Drop every cell of each of ``seqs``."""
        for j in seqs:
            self.native.seq_rm(j, -1, -1)

    def snapshot(self) -> bytearray:
        """Sequence 0's state as it is (bench's ``serial/restore`` saves the prefix so, to reload it per tail)."""
        return self.native.state_get(0)

    def reload(self, state: bytes | bytearray) -> None:
        """Sequence 0 emptied and set to a :meth:`snapshot` of it again (what it held is unchanged)."""
        self.native.seq_rm(0, -1, -1)
        self.native.state_set(0, state)

    def drop(self) -> None:
        """Empty sequence 0."""
        self.native.seq_rm(0, -1, -1)
        self.tokens, self.owner, self.stable_len = (), None, 0

    def keep(self, tokens: tuple[int, ...]) -> None:
        """Drop sequence 0's cells past ``tokens`` (a prefix of what it holds)."""
        self.native.seq_rm(0, len(tokens), -1)
        self.tokens = tokens
        if len(tokens) <= self.stable_len:
            self.owner = None
            self.stable_len = len(tokens)

    # -- the stable block ------------------------------------------------------------
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

        Keeps it when resident, else restores it from the disk tier, else computes it (and
        stores it; ``progress`` is told how far that decode has got).

        Returns:
            The ms spent computing it, or None when it was resident or restored.
        """
        if self.tokens[: len(stable)] == stable and len(self.tokens) >= len(stable):
            self.stable_len = len(stable)
            self.keep(stable)
            return None
        self.drop()
        state = self.store.get(key, stable) if self.store else None
        if state is not None:
            try:
                self.native.state_set(0, state)
                self.tokens, self.stable_len = stable, len(stable)
                return None
            except TriageError:
                log.warning("stored stable state for %s was rejected; recomputing", key)
                self.drop()
        t1 = time.perf_counter()
        self.native.decode([Seq("stable", 0, 0, stable)], should_stop=stop, progress=progress)
        ms = (time.perf_counter() - t1) * 1000
        self.tokens, self.stable_len = stable, len(stable)
        if self.store:
            self.store.put(key, stable, self.native.state_get(0))
        return ms

    # -- the longest hit -------------------------------------------------------------
    def restore(self, run: Run) -> int:
        """Make sequence 0 hold the longest prefix of ``run``'s prefix that is computed and may be reused.

        The stable block first (:meth:`ensure_stable`), then the longer of sequence 0's own cells and
        a memory entry (:meth:`resume`). Fills ``run.tokens``' cached counts and ``run.reuse``.

        Returns:
            How many of the prefix's tokens sequence 0 now holds.
        """
        prefix, stable = run.prompts.prefix, run.prompts.stable
        resident = 0
        if self.owner is not None and self.stable_len == len(stable) and self.tokens[: len(stable)] == stable:
            shared = common_length(self.tokens, prefix)
            if shared > len(stable) and may_reuse(self.owner, (len(stable), len(self.tokens)), run, shared):
                resident = shared
        if resident:
            self.keep(prefix[:resident])
            run.stable_ready = True
            run.tokens.stable_cached = len(stable)
        else:
            self.ensure_stable(run)
        return self.resume(run, resident)

    def ensure_prefix(self, run: Run) -> None:
        """Make sequence 0 hold exactly the prefix, reusing what is resident, remembered or stored; counts the
        tokens the score evaluates (:meth:`~triage.scoring.run.Run.plan`). ``Serial``'s way in."""
        prefix, stable = run.prompts.prefix, run.prompts.stable
        t0 = time.perf_counter()
        if self.tokens == prefix and not (self.owner is not None and self.owner.prefilled):  # serial's own cells
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
        self.owner = Owner(run.ticket_id, run.prompts.ticket_text, False)
        run.timing.prefill_ms = (time.perf_counter() - t0) * 1000

    def resume(self, run: Run, resident: int = 0) -> int:
        """After :meth:`ensure_stable` (or a resident hit of ``resident`` tokens): load the memory entry this
        ticket may reuse that shares most of its prefix, when it shares more than sequence 0 holds.

        The thread facts (``run.reuse``: previous messages, edit, compaction) come from the ticket id's
        own last state. Fills ``run.tokens.prefix_cached`` and ``run.reuse.reused``.

        Returns:
            How many of the prefix's tokens sequence 0 now holds (the stable block's length when
            nothing was reused).
        """
        prefix, stable = run.prompts.prefix, run.prompts.stable
        have = max(resident, len(stable))
        if self.memory is not None:
            own = self.memory.get(run.ticket_id, run.stable_key) if run.ticket_id else None
            if own is not None:
                run.reuse.edited = first_edit(own.messages, run.messages)
                run.reuse.previous = len(own.messages)
                run.reuse.compaction_moved = own.dropped != run.prompts.dropped
            saved, shared = self.memory.longest(run, prefix)
            if saved is not None and shared > have and saved.start == len(stable):
                self.keep(stable)
                spare = self.native.n_seq_max - 1
                self.native.seq_rm(spare, -1, -1)
                try:
                    self.native.state_set(spare, saved.state)
                    self.native.seq_cp(spare, 0, len(stable), shared)  # only the cells the new prefix shares
                finally:
                    self.native.seq_rm(spare, -1, -1)
                self.tokens = prefix[:shared]
                self.owner = saved.owner
                have = shared
        run.reuse.reused = have - len(stable)
        run.tokens.prefix_cached = run.tokens.stable_cached + (have - len(stable))
        return have

    # -- inserting -------------------------------------------------------------------
    def remember(self, run: Run, seq: int = 0, *, prefilled: bool = False) -> None:
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
        p = run.prompts
        saved = Saved(run.stable_key, prefix, len(stable), run.messages, state, p.dropped, p.ticket_text, run.ticket_id)
        self.memory.put(replace(saved, prefilled=prefilled))

    def prefill(self, run: Run, decode: Callable[[tuple[int, ...]], None]) -> int:
        """Compute ``run``'s prefix into sequence 0 after the longest hit, and insert it as a prefill's entry.

        ``decode(rest)`` computes the rest of the prefix into sequence 0 (the engine decodes it as the
        first batch of a cold score, so the cells are the ones a cold score computes).

        Returns:
            How many of the prefix's tokens were already computed (the rest were evaluated). Raises
            ``Cancelled`` from inside the decode; the caller cleans up (:meth:`after_cancel`).
        """
        prefix = run.prompts.prefix
        have = self.restore(run)
        cached = run.tokens.prefix_cached
        if have < len(prefix):
            run.check()
            decode(prefix[have:])
            self.tokens = prefix
            self.owner = Owner(run.ticket_id, run.prompts.ticket_text, True)
            self.remember(run, prefilled=True)
        return cached

    def forget(self, ticket_id: str | None = None) -> None:
        """Reuse nothing of ``ticket_id``'s (None: of any ticket's) beyond the stable block from now on."""
        if self.memory is not None:
            if ticket_id is None:
                self.memory.clear()
            else:
                self.memory.discard(ticket_id)
        if self.owner is not None and ticket_id in (None, self.owner.ticket_id):
            self.owner = None

    def settle(self, run: Run, rest: tuple[int, ...]) -> None:
        """After a fanout decode that evaluated ``rest`` of the prefix: save the new cells, and leave sequence 0
        at the stable block (or, when nothing of the prefix was new, at the reused cells, which may be reused)."""
        if rest:
            self.remember(run)
            self.keep(run.prompts.stable)

    def after_cancel(self, run: Run) -> None:
        """Clean up after a cancelled (possibly aborted) decode.

        llama.cpp keeps the cells of the micro-batches an aborted decode had finished: every
        sequence's cells past the stable block go, and the stable block stays only when
        it was complete. The next score is then exactly a fresh engine's.
        """
        n = self.native
        for seq in range(1, n.n_seq_max):
            n.seq_rm(seq, -1, -1)
        if run.stable_ready:
            self.stable_len = len(run.prompts.stable)
            self.keep(run.prompts.stable)
        else:
            n.clear()
            self.tokens, self.owner, self.stable_len = (), None, 0
