"""How far a llama.cpp decode has got, told from inside it, without changing what it computes.

llama.cpp runs one ``llama_decode`` call as micro-batches of at most ``n_ubatch`` tokens, taken in
order (a unified KV cache splits a batch simply), each through one compute graph whose node count
does not depend on how many tokens it holds (docs/engine.md, "Progress inside a decode", has the
measured counts). Its CPU backend asks the abort callback once per node. So counting those calls
says which micro-batch runs and how far through its layers it is: tokens done, at the granularity
of a graph node, while the batch shapes, and so the numbers, stay exactly those of an unwatched
decode.

The node count is learned from a finished call (calls / micro-batches); :class:`DecodeMeter`
reports nothing inside a call until it knows it (:class:`~triage.model.native.NativeModel`
learns it at load from a one-token decode).
"""

from __future__ import annotations

from collections.abc import Callable

Report = Callable[[int, int], None]  # (tokens done, tokens of the whole decode)


class DecodeMeter:
    """Turns abort-callback calls into tokens done for one ``decode()`` at a time.

    Args:
        n_ubatch: the context's micro-batch size.
    """

    def __init__(self, n_ubatch: int) -> None:
        self.n_ubatch = n_ubatch
        self.nodes: float | None = None  # graph nodes per micro-batch, once a finished call said so
        self.counting = False
        self._calls = 0
        self._sizes: list[int] = []
        self._base = 0
        self._total = 0
        self._shown = -1
        self._report: Report | None = None

    def start(self, n_tokens: int, base: int, total: int, report: Report | None) -> None:
        """A ``llama_decode`` call of ``n_tokens`` begins, after ``base`` of the decode's ``total`` tokens."""
        self._calls = 0
        self._sizes = [min(self.n_ubatch, n_tokens - i) for i in range(0, n_tokens, self.n_ubatch)]
        self._base, self._total, self._report = base, total, report
        self.counting = True

    def tick(self) -> None:
        """One graph node was computed (called from inside the decode)."""
        self._calls += 1
        if self._report is None or self.nodes is None:
            return
        done = min(self._base + self.within(), self._total - 1)  # all of it is said once, by done()
        step = max(1, self._total // 100)
        if done >= self._shown + step:
            self._shown = done
            self._report(done, self._total)

    def within(self) -> int:
        """Tokens of the running call done so far (whole micro-batches, then the share of nodes computed)."""
        if self.nodes is None or not self._sizes:
            return 0
        ub = int(self._calls // self.nodes)
        if ub >= len(self._sizes):
            return sum(self._sizes)
        part = (self._calls - ub * self.nodes) / self.nodes
        return sum(self._sizes[:ub]) + int(self._sizes[ub] * part)

    def finish(self, ok: bool) -> None:
        """The call returned (``ok``: it finished, so its calls per micro-batch are the node count)."""
        if ok and self._calls and self._sizes:
            self.nodes = self._calls / len(self._sizes)
        self.counting = False

    def done(self, tokens: int) -> None:
        """The decode has ``tokens`` of its total done (after a call): said when anyone listens."""
        self._shown = tokens
        if self._report is not None:
            self._report(tokens, self._total)

    def stop(self) -> None:
        """The decode is over: nothing is reported until the next :meth:`start`."""
        self._report = None
        self._shown = -1
        self.counting = False
