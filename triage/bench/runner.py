"""Run the bench: warm up, interleave the modes ticket by ticket, probe tails, restart cold and warm.

The run is planned as a list of steps before anything is timed, so the
progress bar knows its length and a reader of the code sees the schedule in
one place (:meth:`BenchRunner.plan`):

1. **warm-up** (untimed): each pack once in serial and fanout on the shortest
   ticket (``--quick``: only the stable block's prefill). The main engine keeps
   each pack's stable-block state in a stable cache of its own, so a reuse mode
   after ``full`` restores it instead of computing it again.
2. **interleaved scoring**: for every repeat and ticket, every mode once, the
   mode order rotated by one per ticket so that drift and position effects hit
   all modes alike. Before each reuse mode the engine is put in the state a
   session has between two tickets: the pack's stable block resident, nothing
   else (``Engine.hold_stable``). Split runs last on its tickets.
3. **tail probe** on a few tickets: single tails of 8-256 tokens decoded after
   the ticket's real prefix (what serial/truncate does per tail), and fresh
   sequences of the same sizes in an empty cache: llama.cpp's raw prompt
   throughput, the physical reference.
4. **stable cache** (issue 7), after the main engine is closed: a fresh engine
   with an empty cache folder scores a short session (cold start), then a new
   engine on the same folder scores the first ticket again (warm restart).
"""

from __future__ import annotations

import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage.bench.machine import CpuSnapshot, cpu_snapshot, load_average
from triage.bench.workload import (
    ENGINE_MODE,
    HEAD_READ,
    LEARNED_MODE,
    LETTER_MODE,
    REUSE_MODES,
    SHARED_MODE,
    SHARED_READ,
    SPLIT,
    BenchTicket,
    Workload,
)
from triage.settings import DEFAULTS

if TYPE_CHECKING:
    from triage.domain.pack import Pack
    from triage.domain.result import TicketResult
    from triage.lab.options import LabOptions, Orderings
    from triage.model.native import NativeModel
    from triage.scoring.engine import Engine
    from triage.scoring.head import Head
    from triage.scoring.prefix_store import StableStore
    from triage.scoring.readout import ReadoutKind
    from triage.scoring.schedule import Schedule

PROBE_SEQ = 62  # the tail probe's copy of the prefix (fan-out uses 1..k)
FRESH_SEQ = 63  # fresh sequences for the raw-throughput reference


@dataclass(frozen=True)
class EngineSpec:
    """How to open an engine; bench opens several (main, cold start, warm restart)."""

    path: Path
    name: str
    sha256: str | None = None
    stand_in: bool = True
    n_ctx: int = DEFAULTS.n_ctx
    threads: int | None = None
    prompt_style: str = "auto"

    def open(self, stable_store: StableStore | None = None) -> Engine:
        """Load the model (the caller closes it)."""
        from triage.scoring.engine import Engine

        return Engine(
            self.path,
            name=self.name,
            sha256=self.sha256,
            stand_in=self.stand_in,
            n_ctx=self.n_ctx,
            threads=self.threads,
            prompt_style=self.prompt_style,
            stable_store=stable_store,
        )


@dataclass
class Sample:
    """One timed scoring of one ticket in one mode."""

    mode: str
    ticket: BenchTicket
    rep: int
    slot: int  # position in this ticket's interleaving (0 = first)
    result: TicketResult


@dataclass
class ProbePoint:
    """One timed decode of the tail probe or the raw reference."""

    ticket_id: str
    kind: str  # "tail" (after the ticket's prefix), "fresh" (empty cache), "fanout_fresh"
    tokens: int
    context: int  # tokens already in the sequence
    ms: float


@dataclass
class StableRun:
    """A fresh engine scoring tickets with a stable cache folder (cold or warm)."""

    pack_label: str  # "default" or "long"
    phase: str  # "cold" or "warm"
    load_ms: float = 0.0
    results: list[TicketResult] = field(default_factory=list)
    cache_stats: dict[str, int] = field(default_factory=dict)
    file_bytes: int = 0


@dataclass
class BenchRun:
    """Everything measured, before any summarising."""

    workload: Workload
    model: dict[str, object] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    probe: list[ProbePoint] = field(default_factory=list)
    stable: list[StableRun] = field(default_factory=list)
    prompt_build_ms: dict[str, float] = field(default_factory=dict)
    stable_tokens: dict[str, int] = field(default_factory=dict)
    stable_prefill_ms: dict[str, float] = field(default_factory=dict)  # the warm-up's stable-block prefill, per pack
    ticket_block_tokens: dict[str, int] = field(default_factory=dict)  # per ticket: the ticket block's own tokens
    load_ms: float = 0.0
    readout_ms: float | None = None  # one readout (softmax over the vocabulary) on this model
    head_ms: float | None = (
        None  # one learned head applied to one criterion: gather the features, one dot product per option
    )
    rss_after_load_mb: float | None = None
    peak_rss_mb: float = 0.0
    load_avg_start: list[float] = field(default_factory=list)
    load_avg_end: list[float] = field(default_factory=list)
    cpu_start: CpuSnapshot | None = None
    cpu_end: CpuSnapshot | None = None
    started_at: float = 0.0
    elapsed_s: float = 0.0
    phase_s: dict[str, float] = field(default_factory=dict)
    paste: list[dict[str, object]] = field(default_factory=list)  # triage.bench.paste's rows


def _rss_mb() -> float | None:
    """Resident set size now (Linux), in MiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _time_readout(engine: Engine, pack: Pack) -> float:
    """Median ms of one readout (a softmax over the whole vocabulary), part of every tail's cost."""
    import numpy as np

    from triage.lab.letter import letter_ids
    from triage.scoring import readout

    letters = letter_ids(engine.tokenizer, max(len(c.options) for c in pack.criteria))
    logits = np.random.default_rng(0).standard_normal(engine.native.n_vocab).astype(np.float32)
    times = []
    for _ in range(15):
        t0 = time.perf_counter()
        readout.read(logits, letters)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _time_fresh(native: NativeModel, filler: tuple[int, ...], size: int) -> float:
    """ms to decode ``size`` tokens (``filler`` repeated) as one fresh sequence, then drop them:
    llama.cpp's raw prompt processing, the physical reference."""
    from triage.model.native import Seq

    toks = (filler * (1 + size // len(filler)))[:size]
    t0 = time.perf_counter()
    native.decode([Seq("f", FRESH_SEQ, 0, toks)])
    ms = (time.perf_counter() - t0) * 1000
    native.seq_rm(FRESH_SEQ, -1, -1)
    return ms


def _schedule(mode: str) -> Schedule | None:
    """The schedule of bench's own that ``mode`` decodes with, made for one score, or None (the engine's)."""
    from triage.lab.full import Full
    from triage.lab.restore import Restore
    from triage.lab.split import Split

    own: dict[str, Callable[[], Schedule]] = {"full": Full, "serial_restore": Restore, SPLIT: Split}
    return own[mode]() if mode in own else None


Step = tuple[str, Callable[[], None]]


class BenchRunner:
    """Plans and runs one bench.

    Args:
        spec: how to open the model.
        workload: tickets, packs, modes.
        probe_reps: how many times each tail-probe size is timed per probe ticket.
    """

    def __init__(self, spec: EngineSpec, workload: Workload, *, probe_reps: int = 2) -> None:
        self.spec = spec
        self.wl = workload
        self.probe_reps = probe_reps
        self.run_data = BenchRun(workload)
        self._heads: dict[
            str, Any
        ] = {}  # the head of each mode that applies one (by where it reads), made on first use
        self.engine: Engine | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._stable_engine: Engine | None = None
        self._phase_t0 = 0.0

    # -- the schedule -----------------------------------------------------------------
    def plan(self) -> list[Step]:
        """Every step of the run, in order, each with a progress label."""
        wl = self.wl
        steps: list[Step] = [("loading the model", self._load)]
        shortest = min(wl.tickets, key=lambda t: len(t.text))
        for pack in self._packs():
            steps.append((f"warm-up {pack.name}", partial(self._warm_up, pack, shortest)))
        for rep in range(wl.repeats):
            for i, ticket in enumerate(wl.tickets):
                modes = list(wl.modes)
                k = (i + rep + 1) % len(
                    modes
                )  # the first ticket starts with a reuse mode: any first-call cost falls on reuse, not on the baseline
                order = modes[k:] + modes[:k]
                if ticket.id in wl.split_ids and rep == 0:
                    order.append(SPLIT)
                for slot, mode in enumerate(order):
                    steps.append((f"{ticket.id} {mode}", partial(self._score, mode, ticket, rep, slot)))
                if rep == 0:
                    steps.append((f"{ticket.id} raw reference", partial(self._raw_reference, ticket)))
                if rep == 0 and ticket.id in wl.probe_ids:
                    steps.append((f"{ticket.id} tail probe", partial(self._probe, ticket)))
        if wl.paste:
            steps.append(("paste: cold, prefill, score after", self._paste))
        steps.append(("closing the model", self._close_main))
        session = [t for t in wl.tickets if t.id in wl.session_ids]
        for label, pack in self._labelled_packs() if session else ():
            for j, ticket in enumerate(session):
                steps.append(
                    (
                        f"cold start {pack.name}: {ticket.id}",
                        partial(self._cold, label, pack, ticket, j == 0),
                    )
                )
            steps.append((f"cold start {pack.name}: done", partial(self._end_cold, label)))
            steps.append((f"warm restart {pack.name}", partial(self._warm, label, pack, session[0])))
        return steps

    def run(self, on_step: Callable[[str], None] | None = None) -> BenchRun:
        """Run every step; ``on_step(label)`` is called after each one."""
        steps = self.plan()
        data = self.run_data
        data.load_avg_start = load_average()
        data.cpu_start = cpu_snapshot()
        data.started_at = time.time()
        t0 = time.perf_counter()
        self._tmp = tempfile.TemporaryDirectory(prefix="triage-bench-")
        try:
            for label, step in steps:
                step()
                if on_step:
                    on_step(label)
        finally:
            self._close_main()
            if self._stable_engine is not None:
                self._stable_engine.close()
                self._stable_engine = None
            self._tmp.cleanup()
        data.elapsed_s = time.perf_counter() - t0
        data.cpu_end = cpu_snapshot()
        data.load_avg_end = load_average()
        data.peak_rss_mb = peak_rss_mb()
        return data

    # -- steps ----------------------------------------------------------------------------
    def _packs(self) -> list[Pack]:
        return [p for _, p in self._labelled_packs()]

    def _labelled_packs(self) -> list[tuple[str, Pack]]:
        out = [("default", self.wl.pack)]
        if self.wl.long_pack is not None:
            out.append(("long", self.wl.long_pack))
        return out

    def _pack_for(self, mode: str) -> Pack:
        if mode == "serial_long":
            assert self.wl.long_pack is not None
            return self.wl.long_pack
        return self.wl.pack

    def _options(self, mode: str, orderings: Orderings | None = None) -> LabOptions:
        from triage.lab.options import LabOptions

        kind, asked = self.wl.mode_readout(mode)
        return LabOptions(mode=ENGINE_MODE[mode], orderings=orderings or asked, readout=kind)

    @staticmethod
    def _readout(kind: str) -> ReadoutKind:
        """The readout strategy called ``kind`` (no prior; its prompts do not depend on the orderings)."""
        from triage.lab.options import LabOptions, as_readout
        from triage.lab.seams import plain_readout

        return plain_readout(LabOptions(readout=as_readout(kind)))

    def _mark(self, phase: str) -> None:
        now = time.perf_counter()
        if self._phase_t0:
            self.run_data.phase_s[phase] = self.run_data.phase_s.get(phase, 0.0) + now - self._phase_t0
        self._phase_t0 = now

    def _load(self) -> None:
        self._phase_t0 = time.perf_counter()
        from triage.scoring.stable_file import StableCache

        eng = self.spec.open(stable_store=StableCache(self._cache_dir("main")))
        self.engine = eng
        data = self.run_data
        data.load_ms = eng.load_ms
        data.rss_after_load_mb = _rss_mb()
        data.model = dict(eng.model_info)
        data.engine = {
            "n_ctx": eng.n_ctx,
            "threads": eng.native.n_threads,
            "prompt_format": eng.fmt.id,
            "n_batch": eng.native.n_batch,
        }
        data.readout_ms = _time_readout(eng, self.wl.pack)
        if LEARNED_MODE in self.wl.modes:
            data.head_ms = self._time_head(eng, self.wl.pack)
        self._mark("load")

    def _warm_up(self, pack: Pack, ticket: BenchTicket) -> None:
        eng = self._main()
        label = "long" if pack is self.wl.long_pack else "default"
        from triage.lab import score as lab

        main = self._readout(self.wl.readout)
        self.run_data.stable_prefill_ms[label] = eng.hold_stable(pack, main)
        if LETTER_MODE in self.wl.modes and label == "default":
            eng.hold_stable(
                pack, self._readout("letter")
            )  # computed and stored once, restored before each letter_serial
        if not self.wl.quick:
            lab.score_ticket(eng, ticket.as_ticket(), pack, self._options("serial_truncate", "none"))
            eng.hold_stable(pack, main)
            lab.score_ticket(eng, ticket.as_ticket(), pack, self._options("fanout", "none"))
        self.run_data.stable_tokens[label] = len(eng.builder(pack, main).stable_tokens)
        self._mark("warm-up")

    def _score(self, mode: str, ticket: BenchTicket, rep: int, slot: int) -> None:
        from triage.lab import score as lab
        from triage.lab.debias import orders_for

        eng = self._main()
        pack = self._pack_for(mode)
        kind, asked = self.wl.mode_readout(mode)
        readout = self._readout(kind)
        if mode == "serial_long" or mode in REUSE_MODES:
            eng.hold_stable(pack, readout)
        if rep == 0 and mode == "full":  # prompt building is part of every mode's "other" time
            orders = [orders_for(len(c.options), asked) for c in pack.criteria]
            t0 = time.perf_counter()
            eng.builder(pack, readout).build(ticket.text, orders, n_ctx=eng.n_ctx)
            self.run_data.prompt_build_ms[ticket.id] = (time.perf_counter() - t0) * 1000
        options = self._options(mode)
        if mode == SPLIT and self.wl.split_criteria:
            options = replace(options, criteria=tuple(c.id for c in pack.criteria[: self.wl.split_criteria]))
        head = self._bench_head(eng, pack, HEAD_READ[mode]) if mode in HEAD_READ else None
        result = lab.score_ticket(eng, ticket.as_ticket(), pack, options, head=head, schedule=_schedule(mode))
        self.run_data.samples.append(Sample(mode, ticket, rep, slot, result))
        if ticket.id not in self.run_data.ticket_block_tokens:
            block = eng.builder(pack, readout).ticket_block_text(ticket.text)
            self.run_data.ticket_block_tokens[ticket.id] = len(eng.tokenizer.encode(block))
        self._mark("scoring")

    def _paste(self) -> None:
        from triage.bench.paste import measure

        self.run_data.paste = measure(self._main(), self.wl.pack, list(self.wl.paste), self.wl.paste_repeats)
        self._mark("paste")

    def _bench_head(self, eng: Engine, pack: Pack, read: str = "tail") -> Head:
        """A learned head on every criterion reading at ``read``: what applying one costs, and what reading
        there costs. At the shared position it is the built-in pack's starter head when one is stored for this
        model (the head a new user's decisions come from: every criterion at the cue), else random weights of
        the real shape, as at the tails (the cost does not depend on the weights)."""
        if read not in self._heads:
            from triage.bench.heads import random_head
            from triage.learning.fitstore import load_head, stored_starter

            path = stored_starter(eng, pack) if read == SHARED_READ else None
            if path is not None:
                self._heads[read] = load_head(path, engine=eng, pack=pack)
                self.wl.notes.append(f"{SHARED_MODE}: the stored starter head ({path.name}), every criterion")
            else:
                self._heads[read] = random_head(eng, pack, read, scale=0.01)
        return self._heads[read]

    def _time_head(self, eng: Engine, pack: Pack) -> float:
        """Median ms to apply the bench head to one criterion, feature gather included."""
        import numpy as np

        head = self._bench_head(eng, pack)
        crit = pack.criteria[0]
        logits = np.random.default_rng(0).standard_normal(eng.native.n_vocab).astype(np.float32)
        lp = np.log(np.full(len(crit.options), 1 / len(crit.options)))
        times = []
        for _ in range(51):
            t0 = time.perf_counter()
            head.apply(crit.id, logits[eng.feature_ids].astype(np.float32), lp)
            times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times)

    def _probe(self, ticket: BenchTicket) -> None:
        """Single tails after the ticket's prefix, and fresh sequences, at the probe sizes."""
        from triage.lab.debias import orders_for
        from triage.model.native import Seq

        eng = self._main()
        n = eng.native
        pack = self.wl.pack
        readout_kind, asked = self.wl.mode_readout("serial_truncate")
        orders = [orders_for(len(c.options), asked) for c in pack.criteria]
        prompts = eng.builder(pack, self._readout(readout_kind)).build(ticket.text, orders, n_ctx=eng.n_ctx)
        tails = [prompts.tail(s) for s in prompts.prompts]
        filler = tuple(tok for t in tails for tok in t)
        while len(filler) < max(self.wl.probe_sizes):
            filler += filler
        typical = int(statistics.median(len(t) for t in tails))
        sizes = sorted(set(self.wl.probe_sizes) | {typical})
        fanout_n = sum(len(t) for t in tails)
        p, s = len(prompts.prefix), len(prompts.stable)
        pts = self.run_data.probe
        for _ in range(self.probe_reps):
            eng.clear()  # raw reference: nothing else in the cache
            for size, kind in [*((z, "fresh") for z in sizes), (fanout_n, "fanout_fresh")]:
                pts.append(ProbePoint(ticket.id, kind, size, 0, _time_fresh(n, filler, size)))
            eng.hold_stable(pack, self._readout(readout_kind))
            eng.resident.share((PROBE_SEQ,))
            n.decode([Seq("rest", PROBE_SEQ, s, prompts.prefix[s:])])
            for size in sizes:
                toks = filler[:size]
                t0 = time.perf_counter()
                n.decode([Seq("t", PROBE_SEQ, p, toks)])
                n.seq_rm(PROBE_SEQ, p, -1)  # as serial/truncate does after each tail
                pts.append(ProbePoint(ticket.id, "tail", size, p, (time.perf_counter() - t0) * 1000))
            n.seq_rm(PROBE_SEQ, -1, -1)
        self._mark("tail probe")

    def _raw_reference(self, ticket: BenchTicket) -> None:
        """llama.cpp's raw prompt processing for exactly the tokens each reuse mode evaluated on this
        ticket: one fresh sequence of that many tokens in an empty cache, one decode (the physical limit)."""
        eng = self._main()
        n = eng.native
        done = {
            s.mode: s.result.tokens.evaluated
            for s in self.run_data.samples
            if s.ticket.id == ticket.id and s.rep == 0 and s.mode in REUSE_MODES
        }
        filler = tuple(eng.builder(self.wl.pack, self._readout(self.wl.readout)).stable_tokens) or (0,)
        eng.clear()
        for mode, size in sorted(done.items()):
            if size <= 0:
                continue
            self.run_data.probe.append(ProbePoint(ticket.id, f"raw:{mode}", size, 0, _time_fresh(n, filler, size)))
        self._mark("raw reference")

    def _close_main(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def _cache_dir(self, label: str) -> Path:
        assert self._tmp is not None
        return Path(self._tmp.name) / label

    def _cold(self, label: str, pack: Pack, ticket: BenchTicket, first: bool) -> None:
        from triage.lab import score as lab
        from triage.scoring.stable_file import StableCache

        if first:
            self._phase_t0 = time.perf_counter()
            self._stable_engine = self.spec.open(stable_store=StableCache(self._cache_dir(label)))
            self.run_data.stable.append(StableRun(label, "cold", load_ms=self._stable_engine.load_ms))
        assert self._stable_engine is not None
        run = self.run_data.stable[-1]
        run.results.append(
            lab.score_ticket(self._stable_engine, ticket.as_ticket(), pack, self._options("serial_truncate"))
        )
        self._mark("stable cache")

    def _end_cold(self, label: str) -> None:
        eng = self._stable_engine
        if eng is not None:
            store = eng.stable_store
            from triage.scoring.stable_file import StableCache  # bench's own store (_cold)

            self.run_data.stable[-1].cache_stats = dict(vars(store.stats)) if isinstance(store, StableCache) else {}
            self.run_data.stable[-1].file_bytes = sum(
                f.stat().st_size for f in self._cache_dir(label).glob("*.kvstate")
            )
            eng.close()
            self._stable_engine = None

    def _warm(self, label: str, pack: Pack, ticket: BenchTicket) -> None:
        from triage.lab import score as lab
        from triage.scoring.stable_file import StableCache

        self._phase_t0 = time.perf_counter()
        store = StableCache(self._cache_dir(label))  # a new instance: nothing in memory, as after a restart
        eng = self.spec.open(stable_store=store)
        try:
            run = StableRun(label, "warm", load_ms=eng.load_ms)
            run.results.append(lab.score_ticket(eng, ticket.as_ticket(), pack, self._options("serial_truncate")))
            run.cache_stats = dict(vars(store.stats))
            self.run_data.stable.append(run)
        finally:
            eng.close()
        self._mark("stable cache")

    def _main(self) -> Engine:
        assert self.engine is not None, "the main engine is not loaded"
        return self.engine
