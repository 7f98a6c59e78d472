"""Recently scored tickets' KV state, kept in memory so that a growing thread costs its new message only.

After a ticket is scored, the cells of its part of the prefix (everything after the
stable block) are saved (``llama_state_seq_get_data`` of a sequence that holds only
those cells) under the ticket's id, with the tokens they hold and the messages they
came from. When the same id comes back (a thread with a new reply), the longest common
token prefix of the saved tokens and the new prompt is found and verified, the saved
cells are loaded behind the resident stable block, and only the tokens after that
point are evaluated, with the tails.

The store is an LRU with a byte cap: ``thread_cache_mib`` in the config (0 turns it
off), else as many bytes as the context's own KV cache (the model's KV bytes per token,
measured from the stable block's state, times ``n_ctx``): 448 MiB for Qwen3-0.6B at
4,096 tokens (112 KiB per token; a 300-token ticket is 33 MiB), 92 MiB for the 135M
test model (23 KiB per token).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from triage.domain.thread import Message


@dataclass(frozen=True)
class Saved:
    """One ticket's saved state.

    Args:
        stable_key: the stable block the cells follow (model, prompt format, pack).
        tokens: every token of sequence 0 the cells complete (stable block first).
        start: where the saved cells begin (the stable block's length).
        messages: the thread the cells were computed from.
        state: the cells, as ``llama_state_seq_get_data`` wrote them.
        dropped: how many messages compaction left out of them.
        ticket: the ticket block's text they were computed from (a ticket scored again
            unchanged is read whole, whatever follows it: the same numbers every time).
    """

    stable_key: str
    tokens: tuple[int, ...]
    start: int
    messages: tuple[Message, ...]
    state: bytes | bytearray
    dropped: int = 0
    ticket: str = ""

    @property
    def nbytes(self) -> int:
        return len(self.state)


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


class ThreadStates:
    """Saved ticket states by ticket id, least recently used dropped first past ``cap_bytes``.

    ``cap_bytes`` None: sized on first use (:meth:`size_for`).
    """

    def __init__(self, cap_bytes: int | None = None) -> None:
        self.cap_bytes = None if cap_bytes is None else max(0, int(cap_bytes))
        self._items: OrderedDict[str, Saved] = OrderedDict()
        self.nbytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, ticket_id: str, stable_key: str) -> Saved | None:
        """The state saved for ``ticket_id`` after the same stable block, marked as recently used."""
        saved = self._items.get(ticket_id)
        if saved is None or saved.stable_key != stable_key:
            self.misses += saved is None
            return None
        self._items.move_to_end(ticket_id)
        self.hits += 1
        return saved

    def size_for(self, bytes_per_token: float, n_ctx: int) -> None:
        """Cap an auto-sized store at ``n_ctx`` tokens' worth of KV state (no change when set)."""
        if self.cap_bytes is None:
            self.cap_bytes = int(bytes_per_token * n_ctx)

    @property
    def enabled(self) -> bool:
        """Whether states are kept (the cap is not 0)."""
        return self.cap_bytes != 0

    def put(self, ticket_id: str, saved: Saved) -> None:
        """Keep ``saved`` for ``ticket_id`` (replacing its older state), then trim to the cap."""
        self.discard(ticket_id)
        if self.cap_bytes is None or saved.nbytes > self.cap_bytes:
            return
        self._items[ticket_id] = saved
        self.nbytes += saved.nbytes
        while self.nbytes > self.cap_bytes:
            _, old = self._items.popitem(last=False)
            self.nbytes -= old.nbytes

    def discard(self, ticket_id: str) -> None:
        """Forget ``ticket_id``'s state."""
        old = self._items.pop(ticket_id, None)
        if old is not None:
            self.nbytes -= old.nbytes

    def clear(self) -> None:
        """Forget every state."""
        self._items.clear()
        self.nbytes = 0
