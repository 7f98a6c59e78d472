"""Packed backlog decodes: several tickets' fanout in one ``llama_decode`` (a measuring instrument).

Not the product: ``triage score`` and the Ray workers score one ticket per decode
(``Engine.score_many``). :func:`score_packed` keeps it measurable (bench/packed.py, tests/test_packed.py);
it is the lab's, and takes :class:`~triage.lab.options.LabOptions`.

A backlog scores one ticket after another, and one ticket's fanout decode holds about a
hundred tokens for a short ticket (its own tokens and one tail per criterion): a small
batch, where llama.cpp's prompt processing is slowest per token and each decode's fixed
cost is paid again. Packing puts several tickets into one decode:

* the stable block stays in sequence 0, shared into every sequence used (no copy in a
  unified KV cache);
* each ticket gets its own sequences: its tokens go into all of them at once (one cell,
  several sequence ids, as fanout does for one ticket), followed by its tails;
* tickets are added to a pack while its tokens stay within ``budget`` (and the context's
  cells and sequences allow), in input order.

Each ticket's numbers differ from a lone fanout decode by the batch shape (other kernels,
another summation order): up to 0.071 in probability on the 135M model (docs/engine.md). Its time is the
pack's time shared by tokens. After the decode each ticket's cells are kept for its next
score (threads, :mod:`triage.scoring.prefix_store`) and dropped from the cache.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from triage.domain.pack import Pack
from triage.domain.ticket import Ticket
from triage.errors import TriageError
from triage.lab.options import LabOptions
from triage.lab.score import seams
from triage.model.seq import Seq
from triage.scoring.cue import check_read
from triage.scoring.decide import Calibrator, Decider
from triage.scoring.head import Head
from triage.scoring.prefix_store import PrefixStore
from triage.scoring.run import Run, ScoreEvent, TicketScored
from triage.scoring.start import start_run

if TYPE_CHECKING:
    from triage.scoring.engine import Engine

# 0: one ticket per decode, what the product runs (a head is fitted on one-per-decode numbers, and a
# packed ticket's drift from them: docs/engine.md). Only bench/packed.py and the tests ask for more (512).
DEFAULT_BUDGET = 0


def score_packed(
    engine: Engine,
    tickets: Iterable[Ticket],
    pack: Pack,
    options: LabOptions | None = None,
    *,
    calibration: Calibrator | None = None,
    head: Head | None = None,
    features: bool = False,
    budget: int = DEFAULT_BUDGET,
    read: str | None = None,
) -> Iterator[tuple[Ticket, TicketScored | TriageError]]:
    """:meth:`Engine.score_many <triage.scoring.engine.Engine.score_many>` with up to ``budget`` tokens of
    fanout packed into one decode (0: one ticket per decode, as ``score_many``).

    Other modes and a ticket whose thread state is kept are scored alone even then. Yields
    ``(ticket, done)`` per ticket, in input order, as soon as its pack is decoded, where ``done`` is
    the :class:`TicketScored` or the :class:`TriageError` that stopped that ticket (the others still
    score). ``read``: as :meth:`Engine.score`'s (bench/learn_throughput.py packs at the shared read
    position).
    """
    lab = options or LabOptions()
    product = lab.product
    got = seams(engine, pack, lab)
    both = (got["readout"], got["schedule"])
    decider = Decider(pack, engine.tokenizer, calibration, head)
    key = engine.stable_key(pack, lab.readout)
    how = (decider, features, check_read(read) if read else None)
    pending: list[tuple[Ticket, Run]] = []
    pending_tokens = 0

    def flush() -> Iterator[tuple[Ticket, TicketScored | TriageError]]:
        nonlocal pending_tokens
        runs = list(pending)
        pending.clear()
        pending_tokens = 0
        failed: set[int] = set()
        for group in packs([r for _, r in runs], engine.resident, budget):
            try:
                Packed(group).decode(engine.resident)
            except TriageError:  # the pack did not go through: each of its tickets alone
                failed |= {id(r) for r in group}
        for ticket, run in runs:
            if id(run) in failed:
                yield ticket, engine.score_alone(ticket, pack, product, how, both)
            else:
                yield ticket, engine.finish(run, ticket, pack, Decoded())

    with engine.lock:
        for ticket in tickets:
            if any(t.id == ticket.id for t, _ in pending):  # a thread's next turn: after the turn before
                yield from flush()
            if lab.mode != "fanout" or budget <= 0 or engine.memory.get(ticket.id, key) is not None:
                yield from flush()
                yield ticket, engine.score_alone(ticket, pack, product, how, both)
                continue
            try:
                run = start_run(engine, ticket, pack, product, how, both[0])
            except TriageError as exc:
                yield ticket, exc
                continue
            tokens = cost(run)[0]
            if pending and pending_tokens + tokens > budget:
                yield from flush()
            pending.append((ticket, run))
            pending_tokens += tokens
        yield from flush()


def cost(run: Run) -> tuple[int, int]:
    """``(tokens, sequences)`` one ticket adds to a pack: its own tokens and tails, one sequence per tail."""
    p = run.prompts
    reader = run.reader
    tokens = len(p.prefix) - len(p.stable) + sum(len(p.tail(s)) + reader.extra_tokens(s) for s in p.prompts)
    return tokens, sum(reader.width(s) for s in p.prompts)


def packs(runs: list[Run], kv: PrefixStore, budget: int) -> list[list[Run]]:
    """``runs`` in input order, cut into packs that fit ``budget`` tokens, the cells and the sequences."""
    n = kv.native
    stable = len(runs[0].prompts.stable) if runs else 0
    out: list[list[Run]] = [[]]
    used = seqs = 0
    for run in runs:
        t, w = cost(run)
        full = used + t > budget or used + t > n.n_ctx - stable or seqs + w > n.n_seq_max - 2
        if out[-1] and full:
            out.append([])
            used = seqs = 0
        out[-1].append(run)
        used += t
        seqs += w
    return [p for p in out if p]


class Packed:
    """Decodes a pack of runs (each with only its stable block in the cache) in one batch.

    Used through :func:`score_packed`; each run then goes
    through :class:`Decoded`, which only yields the events of what was read here.
    """

    name = "fanout"

    def __init__(self, runs: list[Run]) -> None:
        self.runs = runs

    def decode(self, kv: PrefixStore) -> None:
        """One decode for every run of the pack; fills their readouts, token counts and timing."""
        n = kv.native
        first = self.runs[0]
        kv.ensure_stable(first)  # a computed stable block is the first ticket's cost, as for one ticket
        first.timing.prefill_ms = first.timing.stable_ms
        for run in self.runs[1:]:
            run.stable_ready = True
            run.tokens.stable_cached = len(run.prompts.stable)
        pieces: list[Seq] = []
        layout: list[tuple[Run, int, list[int]]] = []  # run, its first sequence, each tail's tokens
        k = 1
        for r, run in enumerate(self.runs):
            p, stable = run.prompts, run.prompts.stable
            start = k
            sizes: list[int] = []
            tails: list[Seq] = []
            for i, spec in enumerate(p.prompts):
                got = run.reader.pieces((r, i), spec, p.tail(spec), (len(p.prefix), k))
                tails += got
                sizes.append(sum(len(s.tokens) for s in got))
                k += run.reader.width(spec)
            kv.share(range(start, k))
            rest = p.prefix[len(stable) :]
            pieces.append(Seq((r, "rest"), start, len(stable), rest, also=tuple(range(start + 1, k))))
            pieces += tails
            run.tokens.prefix_cached = run.tokens.stable_cached
            run.tokens.evaluated = len(rest) + run.tokens.tails
            layout.append((run, start, sizes))
        t0 = time.perf_counter()
        try:
            out = n.decode(pieces, should_stop=first.stop)
            ms = (time.perf_counter() - t0) * 1000
            total = sum(len(s.tokens) for s in pieces)
            for r, (run, start, sizes) in enumerate(layout):
                n_rest = len(run.prompts.prefix) - len(run.prompts.stable)
                share = ms * (n_rest + sum(sizes)) / total
                run.timing.prefill_ms += share * n_rest / (n_rest + sum(sizes))
                tails_ms = share - share * n_rest / (n_rest + sum(sizes))
                for i, spec in enumerate(run.prompts.prompts):
                    read = run.reader.read((r, i), spec, out)
                    run.record(spec, read, (tails_ms * sizes[i] / max(sum(sizes), 1), sizes[i]))
                run.timing.total_ms = share + (run.timing.stable_ms if run is first else 0.0)
                kv.remember(run, seq=start)
        finally:
            for j in range(1, k):
                n.seq_rm(j, -1, -1)
        kv.keep(first.prompts.stable)


class Decoded:
    """The schedule of one run whose decode :class:`Packed` already did: it yields the events."""

    name = "fanout"

    def run(self, run: Run, kv: PrefixStore) -> Iterator[ScoreEvent]:
        yield run.prefilled()
        for ci in run.chosen:
            yield run.done(ci)
