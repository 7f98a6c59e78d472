"""The scoring engine: one model, one context, every criterion of a ticket.

A ticket's prompts share a long prefix (stable block + ticket block) and differ only
in their short tails (the criterion's question). The engine builds them with the one
prompt builder into one :class:`~triage.scoring.run.Run` (:mod:`triage.scoring.start`)
and hands it to one schedule. Two seams, each an object passed to :meth:`Engine.score`:

* ``schedule``, how the prompts are decoded: :mod:`triage.scoring.schedule` (``fanout``,
  the product and the default);
* ``readout``, how a criterion is read and its readings combined:
  :mod:`triage.scoring.readout` (``label``, the product and the default), a strategy that
  owns its prompt lines, orders, validation, reader and combination.

What is already computed, and where, is the prefix store's: :mod:`triage.scoring.prefix_store`
(sequence 0's cells, saved states in memory, the stable block's file of :mod:`triage.scoring.stable_file`).


The lab's instruments (the letter readout and its orderings, the content-free prior,
``serial`` and bench's schedules: :mod:`triage.lab`) plug in there; this module never
imports them. A criterion is decided by :mod:`triage.scoring.decide` (head, else
calibration, else zero-shot); what is already computed, and where, is the prefix store's
(:mod:`triage.scoring.prefix_store`, with the stable block's files of :mod:`triage.scoring.stable_file`).

One engine owns the llama.cpp context, which is not thread-safe: calls are serialised
by :attr:`Engine.lock` (the lab's packed decodes hold it for a backlog). A caller's
``cancel()`` is checked between decodes and, through llama.cpp's abort callback, inside
one; a cancelled score leaves the cache clean.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from triage.domain.pack import Pack
from triage.domain.result import ModelInfo, TicketResult
from triage.domain.ticket import Ticket, make_ticket
from triage.errors import TriageError
from triage.model.digest import sha256_file
from triage.model.native import FLASH_ATTN, Cancelled, NativeModel
from triage.scoring.cue import check_read
from triage.scoring.decide import Calibrator, Decider
from triage.scoring.head import Head, feature_ids
from triage.scoring.options import DEFAULT_MODE, DEFAULT_READOUT, ScoreOptions
from triage.scoring.prefill_result import PrefillResult
from triage.scoring.prefix_store import Entries, PrefixStore, StableStore
from triage.scoring.prompt import PromptBuilder, PromptFormat, detect_format
from triage.scoring.readout import LABEL, AnswerPlan, LabelReader, Reader, ReadoutKind, product_readout
from triage.scoring.run import CriterionScored, Prefilled, Progress, RawReadouts, Run, ScoreEvent, TicketScored
from triage.scoring.schedule import Fanout, Schedule
from triage.scoring.speed import Speed
from triage.scoring.start import start_run
from triage.scoring.tokenizer import NativeTokenizer
from triage.settings import DEFAULTS

if TYPE_CHECKING:
    from triage.model.resolve import ModelRef

__all__ = [  # re-exported: callers import the events, options and defaults from here
    "DEFAULT_MODE",
    "DEFAULT_N_CTX",
    "Calibrator",
    "CriterionScored",
    "Engine",
    "Prefilled",
    "Progress",
    "ScoreEvent",
    "ScoreOptions",
    "StableStore",
    "TicketScored",
]

DEFAULT_N_CTX = DEFAULTS.n_ctx


class Engine:
    """Scores tickets against criteria packs with one loaded model.

    Args:
        model_path: the GGUF file.
        name: the model's catalog name (default: the file name).
        sha256: the file's sha256 (computed when not given).
        stand_in: True when this is not Qwen3-0.6B.
        n_ctx: context size in tokens.
        threads: CPU threads (default: all cores).
        prompt_style: ``auto`` (from the model's chat template), ``chat`` or ``plain``.
        stable_store: persists the stable block's state across runs, and says when it changed (optional).
        thread_cache_mib: the prefix store's byte budget for saved states (recent tickets' and
            prefills' cells after the stable block), so that a thread that comes back with a new
            message, or a prefilled ticket, costs only what is new (0: none kept; None: as much as
            the context's own KV cache).
        flash_attn: llama.cpp's flash attention (on by default; bench compares it off).
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        name: str | None = None,
        sha256: str | None = None,
        stand_in: bool = True,
        n_ctx: int = DEFAULT_N_CTX,
        threads: int | None = None,
        prompt_style: str = "auto",
        stable_store: StableStore | None = None,
        thread_cache_mib: int | None = None,
        flash_attn: bool = FLASH_ATTN,
    ) -> None:
        self.model_path = Path(model_path)
        self.name = name or self.model_path.stem
        self.stand_in = stand_in
        t0 = time.perf_counter()
        self.native = NativeModel(self.model_path, n_ctx=n_ctx, n_threads=threads, flash_attn=flash_attn)
        self.load_ms = (time.perf_counter() - t0) * 1000
        self.sha256 = sha256 or sha256_file(self.model_path)
        self.tokenizer = NativeTokenizer(self.native)
        self.chat_template = self.native.meta("tokenizer.chat_template")
        self.fmt: PromptFormat = detect_format(self.chat_template, self.tokenizer, prompt_style)
        self.lock = threading.Lock()  # held while a score uses the context (the lab's packed decodes hold it too)
        self._builders: dict[tuple[str, str], tuple[PromptBuilder, Reader]] = {}  # by (pack hash, readout name)
        self.feature_ids = feature_ids(self.native.n_vocab, self.native.n_embd)
        self.memory = Entries(None if thread_cache_mib is None else int(thread_cache_mib) << 20)
        self.resident = PrefixStore(self.native, stable_store, self.memory)  # the prefix store
        self.speed = Speed()  # tokens per second, measured over the last scores (the app's time estimate)
        self._notes: list[str] = []  # said by a prefill that paid the stable block: the next score says them

    @classmethod
    def from_ref(cls, ref: ModelRef, **kwargs: Any) -> Engine:
        """Load from a resolved model (``triage.model.resolve.ModelRef``)."""
        return cls(ref.path, name=ref.name, sha256=ref.sha256, stand_in=ref.stand_in, **kwargs)

    def close(self) -> None:
        """Free the model and context."""
        self.native.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def model_info(self) -> ModelInfo:
        """The ``model`` object of the result schema."""
        return {"name": self.name, "path": str(self.model_path), "sha256": self.sha256, "stand_in": self.stand_in}

    @property
    def n_ctx(self) -> int:
        """The context size in tokens."""
        return self.native.n_ctx

    def format_for(self, kind: str = DEFAULT_READOUT) -> PromptFormat:
        """This model's prompt format with readout ``kind`` (its id keys prefixes, heads, calibrations)."""
        return self.fmt.with_readout(kind)

    def builder(self, pack: Pack, readout: ReadoutKind | str = LABEL) -> PromptBuilder:
        """The prompt builder for ``pack`` and ``readout`` with this model's format and tokenizer.

        Raises:
            TriageError: the pack cannot be read this way with this model (answers that
                cannot be told apart; for the lab's letters, a letter that is not one token).
        """
        return self.prepared(pack, readout)[0]

    def reader(self, pack: Pack, readout: ReadoutKind | str = LABEL) -> Reader:
        """How ``pack``'s tails are decoded and read with ``readout`` on this model (checked once)."""
        return self.prepared(pack, readout)[1]

    def prepared(self, pack: Pack, readout: ReadoutKind | str = LABEL) -> tuple[PromptBuilder, Reader]:
        """:meth:`builder` and :meth:`reader` together, built and checked once per pack and readout name.

        ``readout``: the strategy, or ``label`` for the product's (the lab passes its strategies).
        """
        kind = product_readout(readout)
        got = self._builders.get((pack.hash, kind.name))
        if got is None:
            b = PromptBuilder(pack, self.format_for(kind.name), self.tokenizer, kind)
            got = self._builders[(pack.hash, kind.name)] = (b, kind.reader(pack, self.tokenizer, b.answer_tokens))
        return got

    def answer_plans(self, pack: Pack) -> list[AnswerPlan]:
        """Per criterion, how the label readout reads its options (first token or whole answer)."""
        reader = self.reader(pack, LABEL)
        assert isinstance(reader, LabelReader)
        return list(reader.plans)

    def stable_key(self, pack: Pack, kind: str = DEFAULT_READOUT) -> str:
        """Names the stable block's cached state: model sha256, prompt format (with readout ``kind``), pack hash."""
        fid = self.format_for(kind).id
        return f"{self.sha256[:16]}-{fid.replace('/', '_').replace(':', '_')}-{pack.hash}"

    def stable_parts(self, pack: Pack, kind: str = DEFAULT_READOUT) -> dict[str, str]:
        """What identifies the stable block, by name (for saying what changed)."""
        return {
            "model": f"{self.name} ({self.sha256[:12]})",
            "prompt format": self.format_for(kind).id,
            "pack": f"{pack.name} v{pack.version} ({pack.hash})",
        }

    @property
    def stable_store(self) -> StableStore | None:
        """Where the stable block's state is kept across runs (None: nowhere)."""
        return self.resident.store

    # -- public API ---------------------------------------------------------------
    def score(
        self,
        ticket: Ticket | str,
        pack: Pack,
        options: ScoreOptions | None = None,
        *,
        cancel: Callable[[], bool] | None = None,
        calibration: Calibrator | None = None,
        head: Head | None = None,
        features: bool = False,
        schedule: Schedule | None = None,
        readout: ReadoutKind | None = None,
        read: str | None = None,
        progress: Callable[[Progress], None] | None = None,
    ) -> Iterator[ScoreEvent]:
        """Score one ticket, yielding events as work completes.

        Yields :class:`Prefilled`, then one :class:`CriterionScored` per criterion
        (together for ``fanout``; in pack order for the lab's schedules), then
        :class:`TicketScored`. When ``cancel()`` turns True, scoring stops, between
        decodes or inside one, and the final result has ``complete=False``.

        Each criterion is decided by the first that covers it: the learned
        ``head`` (label readout only; from the raw readout and the answer
        position's features), else the ``calibration``, else the readout itself
        (zero-shot); its result's ``source`` says which.

        Args:
            features: gather the answer position's features even without a head (they
                come back on :class:`TicketScored`; label readout only).
            schedule: decode with this schedule (default :class:`~triage.scoring.schedule.Fanout`,
                the product's; the lab passes its own: :mod:`triage.lab.score`).
            readout: read with this strategy (default :data:`~triage.scoring.readout.LABEL`, the
                product's; the lab passes its letters and its prior: :mod:`triage.lab.score`).
            read: where learned criteria are read: ``tail`` or ``shared:CUE``
                (:mod:`triage.scoring.cue`); None: where the head was fitted. A head fitted
                on another position is refused.
            progress: told how far the decodes have got (:class:`Progress`), from inside a
                decode too (the thread that iterates this generator calls it; keep it quick).
                The batches, and so the numbers, are those of a score without it.
        """
        options = options or ScoreOptions()
        schedule = schedule or Fanout()
        if isinstance(ticket, str):
            ticket = make_ticket(ticket)
        decider = Decider(pack, self.tokenizer, calibration, head)
        how = (decider, features, check_read(read) if read else None)
        with self.lock:
            run = start_run(self, ticket, pack, options, how, readout or LABEL)
            run.stop = cancel
            run.on_progress = progress
            run.warnings[:0], self._notes = self._notes, []
            yield from self._run(run, ticket, pack, schedule)

    def score_many(
        self,
        tickets: Iterable[Ticket],
        pack: Pack,
        options: ScoreOptions | None = None,
        *,
        calibration: Calibrator | None = None,
        head: Head | None = None,
        features: bool = False,
    ) -> Iterator[tuple[Ticket, TicketScored | TriageError]]:
        """Score a backlog's tickets one by one in input order, each as :meth:`score` does.

        Yields ``(ticket, done)`` per ticket, where ``done`` is the :class:`TicketScored` or the
        :class:`TriageError` that stopped that ticket (the others still score). What ``triage score``
        and the Ray workers run; several tickets in one decode is the lab's instrument
        (:mod:`triage.lab.packed`).
        """
        options = options or ScoreOptions()
        how = (Decider(pack, self.tokenizer, calibration, head), features, None)
        with self.lock:
            for ticket in tickets:
                yield ticket, self.score_alone(ticket, pack, options, how)

    def score_alone(
        self,
        ticket: Ticket,
        pack: Pack,
        options: ScoreOptions,
        how: tuple[Decider, bool, str | None],
        seams: tuple[ReadoutKind, Schedule] | None = None,
    ) -> TicketScored | TriageError:
        """Score one ticket as :meth:`score` does, with :attr:`lock` held; its :class:`TriageError` is returned,
        not raised. ``seams``: the readout and schedule (default the product's)."""
        readout, schedule = seams or (LABEL, Fanout())
        try:
            run = start_run(self, ticket, pack, options, how, readout)
            return self.finish(run, ticket, pack, schedule)
        except TriageError as exc:
            return exc

    def finish(self, run: Run, ticket: Ticket, pack: Pack, schedule: Schedule) -> TicketScored:
        """Run ``schedule`` on ``run`` and return only its final :class:`TicketScored`."""
        return next(e for e in self._run(run, ticket, pack, schedule) if isinstance(e, TicketScored))

    def score_ticket(
        self, ticket: Ticket | str, pack: Pack, options: ScoreOptions | None = None, **kw: Any
    ) -> TicketResult:
        """Score one ticket and return only the final result (``kw``: as :meth:`score`'s)."""
        return self._scored(ticket, pack, options, **kw).result

    def raw_readouts(
        self, ticket: Ticket | str, pack: Pack, options: ScoreOptions | None = None, **kw: Any
    ) -> tuple[TicketResult, RawReadouts]:
        """Score and also return each criterion's per-ordering readings (``kw``: as :meth:`score`'s).

        Returns:
            (result, {criterion id: [(order, position log-probs, coverage), ...]}).
            Eval uses this to compute every debiasing variant from one pass.
        """
        done = self._scored(ticket, pack, options, **kw)
        return done.result, done.readouts

    def readouts_and_features(
        self,
        ticket: Ticket | str,
        pack: Pack,
        options: ScoreOptions | None = None,
        read: str | None = None,
        **kw: Any,
    ) -> tuple[TicketResult, RawReadouts, dict[str, np.ndarray]]:
        """:meth:`raw_readouts`, plus each criterion's answer-position features (label readout only).

        The features are what a learned head reads (:mod:`triage.scoring.head`);
        ``triage learn`` and eval's ``learned`` variant fit on them. ``read="shared:CUE"``:
        every criterion read at the shared position, as a shared head is applied.
        """
        done = self._scored(ticket, pack, options, features=True, read=read, **kw)
        return done.result, done.readouts, done.features

    def prefill(self, ticket: Ticket | str, pack: Pack, *, cancel: Callable[[], bool] | None = None) -> PrefillResult:
        """Compute ``ticket``'s prompt up to its tails and keep it, so that its score costs only the rest.

        Under :attr:`lock`: the stable block first, as a score does, then the ticket's part after the
        longest hit of the prefix store, decoded as a cold score's first batch (with its tails, dropped
        after) and inserted there as a prefill's entry. The next score of this
        ticket, or of one whose text extends or edits it (up to the first changed token), reuses it.
        ``cancel()`` is checked before and inside the decode; a cancelled prefill leaves the cache as
        after a cancelled score (the stable block when it was complete) and ``complete`` False.
        """
        if isinstance(ticket, str):
            ticket = make_ticket(ticket)
        options = ScoreOptions()
        how = (Decider(pack, self.tokenizer, None, None), False, None)
        t0 = time.perf_counter()
        with self.lock:
            run = start_run(self, ticket, pack, options, how, LABEL)
            run.stop = cancel
            n = len(run.prompts.prefix)
            try:
                run.check()
                cached = self.resident.prefill(run, partial(self._first_batch, run))
            except Cancelled:
                self.resident.after_cancel(run)
                self._hold_note(run)
                done = run.tokens.stable - run.tokens.stable_cached if run.stable_ready else 0  # the stable block stays
                ms = (time.perf_counter() - t0) * 1000
                return PrefillResult(n, run.tokens.prefix_cached, done, ms, False)
            self._hold_note(run)
        return PrefillResult(n, cached, n - cached, (time.perf_counter() - t0) * 1000)

    def _hold_note(self, run: Run) -> None:
        """A prefill that paid a changed stable block leaves its note for the next score to say (once)."""
        self._notes += [w for w in run.warnings if w == run.stable_note]

    def hold_stable(self, pack: Pack, kind: ReadoutKind | str = LABEL) -> float:
        """Leave exactly ``pack``'s stable block in the cache, as between two tickets.

        Keeps it when resident (dropping the last ticket's cells), else restores it
        from the stable store, else computes it (and stores it). Returns the ms
        spent computing it (0 when it was resident or restored).
        """
        with self.lock:
            key = self.stable_key(pack, product_readout(kind).name)
            return self.resident.hold(self.builder(pack, kind).stable_tokens, key) or 0.0

    def clear(self) -> None:
        """Empty the cache: the next ticket computes (or restores) its stable block again."""
        with self.lock:
            self.resident.drop()

    def forget(self, ticket_id: str | None = None) -> None:
        """Drop the kept state of ``ticket_id`` (None: of every ticket, prefills too); its next score reads it whole."""
        with self.lock:
            self.resident.forget(ticket_id)

    # -- internals ----------------------------------------------------------------------
    def _first_batch(self, run: Run, rest: tuple[int, ...]) -> None:
        """Decode ``rest`` of ``run``'s prefix as a cold fanout score's first batch does (with its tails, whose
        cells and readouts are then dropped), so the prefix's cells are bit for bit a cold score's."""
        Fanout.batch(run, self.resident, Fanout.groups(run, self.resident)[0], rest)

    def _scored(self, ticket: Ticket | str, pack: Pack, options: ScoreOptions | None, **kw: Any) -> TicketScored:
        final: TicketScored | None = None
        for event in self.score(ticket, pack, options, **kw):
            if isinstance(event, TicketScored):
                final = event
        assert final is not None
        return final

    def _run(self, run: Run, ticket: Ticket, pack: Pack, schedule: Schedule) -> Iterator[ScoreEvent]:
        """Run ``schedule`` on ``run`` and yield its events, then the final :class:`TicketScored`."""
        t_start = time.perf_counter()
        complete = True
        try:
            yield from schedule.run(run, self.resident)
        except Cancelled:
            complete = False
            self.resident.after_cancel(run)
            run.warnings.append(f"cancelled after {len(run.results)} of {len(run.chosen)} criteria")
        if run.reuse.edited is not None:
            run.warnings.append(
                f"message {run.reuse.edited} changed since this ticket was last scored; read again from there"
            )
        run.timing.tails_ms = sum(a.ms for a in run.accs.values())
        run.timing.total_ms += (time.perf_counter() - t_start) * 1000  # a packed run's decode share is in already
        if complete:  # the measured rate: the stable block apart (its tokens are not the ticket's)
            self.speed.record(len(run.prompts.stable), run.timing.stable_ms)
            self.speed.record(run.tokens.evaluated, run.timing.total_ms - run.timing.stable_ms)
        final = run.ticket_result(
            ticket, pack, (self.model_info, self.format_for(run.readout.name).id, schedule.name), complete
        )
        raw, feats = run.raw([c.id for c in pack.criteria])
        yield TicketScored(final, raw, feats)
