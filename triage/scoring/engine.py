"""The scoring engine: one model, one context, every criterion of a ticket.

A ticket's prompts share a long prefix (stable block + ticket) and differ only
in their short tails (criterion + options in one order). The engine prefills
the prefix once into sequence 0 and then, per mode:

A criterion is read by name (``label``, the default: one tail per criterion,
the options' answer words listed in the stable block) or by letter (``letter``:
the tail lists the options as A/B/C, optionally in every rotation); see
:mod:`triage.scoring.readout`.

* ``full``: evaluates every prompt whole, from an empty cache. The baseline.
* ``serial``: runs each tail after the prefix, then goes back to the prefix by
  ``truncate`` (drop the tail's cells, ``llama_memory_seq_rm``) or ``restore``
  (reload a saved sequence state, ``llama_state_seq_set_data``).
* ``fanout``: shares the prefix into one sequence per tail (``llama_memory_seq_cp``,
  no copy in a unified cache) and decodes all tails in one batch.
* ``split``: like ``serial`` but from an empty cache for every prompt, with the
  same batch boundaries. Reuse must match it bit for bit; bench and tests use it.

Batch boundaries are always [stable block][rest of prefix][tail]: llama.cpp's
quantized kernels give slightly different numbers for different batch shapes,
and a fixed split is what makes reuse exact.

The prefix left in sequence 0 stays resident after a ticket, so the next ticket
of the same pack reuses the stable block, and re-scoring a ticket reuses all of
it. A ``stable_store`` (see :mod:`triage.scoring.prefix`) persists the stable block's
state across restarts.

One engine owns the llama.cpp context, which is not thread-safe: calls are
serialised by a lock, and a caller can cancel between tails.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from triage.scoring import debias, readout
from triage.errors import TriageError
from triage.store.files import write_text_atomic
from triage.model.native import Cancelled, NativeModel, Seq
from triage.scoring.head import Head, check_match as check_head, feature_ids
from triage.scoring.options import DEFAULT_MODE, MODES, ScoreOptions  # noqa: F401  (re-exported)
from triage.scoring.pack import Pack
from triage.scoring.prompt import DEFAULT_READOUT, PromptBuilder, PromptFormat, PromptSpec, TicketPrompts, check_readout, detect_format
from triage.scoring.result import CriterionResult, OptionScore, TicketResult, Timing, Tokens
from triage.scoring.ticket import Ticket, make_ticket
from triage.scoring.tokenizer import NativeTokenizer

log = logging.getLogger(__name__)

DEFAULT_N_CTX = 4096
PRIOR_TEXT = "N/A"


class StableStore(Protocol):
    """Persists the stable block's KV state (see :class:`triage.scoring.prefix.StableCache`)."""

    def get(self, key: str, tokens: tuple[int, ...]) -> bytes | None: ...

    def put(self, key: str, tokens: tuple[int, ...], state: bytes | bytearray) -> None: ...

    def swap_last(self, parts: dict[str, str]) -> dict[str, str] | None: ...


class Calibration(Protocol):
    """What the engine needs of a calibration (:class:`triage.scoring.calibrate.Calibration`)."""

    name: str

    def covers(self, criterion_id: str) -> bool: ...

    def apply(self, criterion_id: str, logprobs: np.ndarray) -> np.ndarray: ...


@dataclass
class Prefilled:
    """The prefix is in the cache; tails come next."""

    prompts: TicketPrompts
    tokens: Tokens
    prefill_ms: float
    criteria: int


@dataclass
class CriterionScored:
    """One criterion is done (streamed as soon as it is)."""

    result: CriterionResult


@dataclass
class TicketScored:
    """The whole ticket is done (or was cancelled: ``result.complete`` is False)."""

    result: TicketResult


ScoreEvent = Prefilled | CriterionScored | TicketScored


@dataclass
class _Readouts:
    """The raw readouts of one criterion, one per ordering."""

    orders: list[tuple[int, ...]] = field(default_factory=list)
    reads: list[readout.Readout] = field(default_factory=list)
    ms: float = 0.0
    tokens: int = 0


@dataclass(frozen=True)
class _Reader:
    """How this ticket's tails are decoded and read: by letter, or by name.

    A tail is one :class:`~triage.model.native.Seq` in its own sequence, except for a
    criterion whose answers need whole-answer scoring: its tail then belongs to
    one sequence per option (one KV cell each token, shared), and each option's
    answer tokens but the last follow in that option's sequence, in the same
    batch (teacher forcing).
    """

    letters: list[int] | None  # letter readout
    plans: list[readout.AnswerPlan] | None  # label readout, per criterion
    feature_ids: np.ndarray | None = None  # label readout: token ids whose logits are the learned head's features

    def kind(self, ci: int) -> str:
        """What the result schema calls this criterion's readout."""
        if self.plans is None:
            return "letter"
        return "label-whole" if self.plans[ci].whole else "label"

    def _plan(self, spec: PromptSpec) -> readout.AnswerPlan | None:
        return None if self.plans is None else self.plans[spec.criterion]

    def width(self, spec: PromptSpec) -> int:
        """How many sequences the tail of ``spec`` occupies."""
        plan = self._plan(spec)
        return len(plan.tokens) if plan is not None and plan.whole else 1

    def extra_tokens(self, spec: PromptSpec) -> int:
        """Answer tokens decoded after the tail (teacher forcing)."""
        plan = self._plan(spec)
        return plan.extra_tokens if plan is not None else 0

    def pieces(self, key: object, spec: PromptSpec, tail: tuple[int, ...], pos: int, seq: int) -> tuple[list[Seq], int]:
        """What to decode for ``spec``'s tail at ``pos`` in sequences ``seq``, ``seq + 1``, ...

        Returns:
            (pieces, how many sequences they use).
        """
        plan = self._plan(spec)
        if plan is None or not plan.whole:
            return [Seq((key, "t"), seq, pos, tail)], 1
        width = len(plan.tokens)
        out = [Seq((key, "t"), seq, pos, tail, also=tuple(range(seq + 1, seq + width)))]
        end = pos + len(tail)
        for o, toks in enumerate(plan.tokens):
            if len(toks) > 1:
                out.append(Seq((key, "c", o), seq + o, end, toks[:-1], every=True))
        return out, width

    def read(self, key: object, spec: PromptSpec, out: dict[object, np.ndarray]) -> readout.Readout:
        """The readout of ``spec`` from the logits that :meth:`pieces` asked for."""
        if self.letters is not None:
            return readout.read(out[(key, "t")], self.letters[: len(spec.order)])
        plan = self.plans[spec.criterion]  # type: ignore[index]
        logits = out[(key, "t")]
        if not plan.whole:
            read = readout.read_first(logits, plan)
        else:
            read = readout.read_whole(logits, [out.get((key, "c", o)) for o in range(len(plan.tokens))], plan)
        if self.feature_ids is None:
            return read
        return replace(read, features=logits[self.feature_ids].astype(np.float32))


def file_sha256(path: Path) -> str:
    """sha256 of a file, in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


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
        stable_store: persists the stable block's state across runs (optional).
        prior_dir: keeps content-free priors across runs (optional).
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
        prior_dir: Path | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        self.name = name or self.model_path.stem
        self.stand_in = stand_in
        t0 = time.perf_counter()
        self.native = NativeModel(self.model_path, n_ctx=n_ctx, n_threads=threads)
        self.load_ms = (time.perf_counter() - t0) * 1000
        self.sha256 = sha256 or file_sha256(self.model_path)
        self.tokenizer = NativeTokenizer(self.native)
        self.chat_template = self.native.meta("tokenizer.chat_template")
        self.fmt: PromptFormat = detect_format(self.chat_template, self.tokenizer, prompt_style)
        self.stable_store = stable_store
        self.prior_dir = prior_dir
        self._lock = threading.Lock()
        self._builders: dict[tuple[str, str], PromptBuilder] = {}
        self._plans: dict[str, list[readout.AnswerPlan]] = {}  # by pack hash, per criterion
        self.feature_ids = feature_ids(self.native.n_vocab, self.native.n_embd)
        self._resident: tuple[int, ...] = ()  # what sequence 0 holds now
        self._priors: dict[tuple[str, str, str], dict[str, np.ndarray]] = {}
        self._last_stable: dict[str, str] | None = None
        self.stable_change: str | None = None  # why the stable block last changed, said once

    @classmethod
    def from_ref(cls, ref: Any, **kwargs: Any) -> Engine:
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
    def model_info(self) -> dict[str, Any]:
        """The ``model`` object of the result schema."""
        return {"name": self.name, "path": str(self.model_path), "sha256": self.sha256, "stand_in": self.stand_in}

    @property
    def n_ctx(self) -> int:
        """The context size in tokens."""
        return self.native.n_ctx

    def format_for(self, kind: str = DEFAULT_READOUT) -> PromptFormat:
        """This model's prompt format with readout ``kind`` (its id keys prefixes, priors, calibrations)."""
        return self.fmt.with_readout(kind)

    def builder(self, pack: Pack, kind: str = DEFAULT_READOUT) -> PromptBuilder:
        """The prompt builder for ``pack`` and readout ``kind`` with this model's format and tokenizer.

        Raises:
            TriageError: the pack cannot be read this way with this model (a letter
                that is not one token; answers that cannot be told apart).
        """
        b = self._builders.get((pack.hash, kind))
        if b is None:
            b = PromptBuilder(pack, self.format_for(kind), self.tokenizer)
            if kind == "letter":
                readout.letter_ids(self.tokenizer, max(len(c.options) for c in pack.criteria))
            else:
                self.answer_plans(pack, b)
            self._builders[(pack.hash, kind)] = b
        return b

    def answer_plans(self, pack: Pack, builder: PromptBuilder | None = None) -> list[readout.AnswerPlan]:
        """Per criterion, how the label readout reads its options (first token or whole answer)."""
        plans = self._plans.get(pack.hash)
        if plans is None:
            b = builder or self.builder(pack, "label")
            plans = []
            for c in pack.criteria:
                try:
                    plans.append(readout.answer_plan(b.answer_tokens(c), [o.answer_text for o in c.options]))
                except TriageError as exc:
                    raise TriageError(f"pack {pack.name!r}, criterion {c.id!r}: {exc.message}", hint=exc.hint) from None
            self._plans[pack.hash] = plans
        return plans

    def stable_key(self, pack: Pack, kind: str = DEFAULT_READOUT) -> str:
        """Names the stable block's cached state: model sha256, prompt format (with readout), pack hash."""
        fid = self.format_for(kind).id
        return f"{self.sha256[:16]}-{fid.replace('/', '_').replace(':', '_')}-{pack.hash}"

    # -- public API ---------------------------------------------------------------
    def score(
        self,
        ticket: Ticket | str,
        pack: Pack,
        options: ScoreOptions | None = None,
        *,
        cancel: Callable[[], bool] | None = None,
        calibration: Calibration | None = None,
        head: Head | None = None,
    ) -> Iterator[ScoreEvent]:
        """Score one ticket, yielding events as work completes.

        Yields :class:`Prefilled`, then one :class:`CriterionScored` per criterion
        (in pack order for ``serial``/``full``; together for ``fanout``), then
        :class:`TicketScored`. When ``cancel()`` turns True, scoring stops between
        tails and the final result has ``complete=False``.

        Each criterion is decided by the first that covers it: the learned
        ``head`` (label readout only; from the raw readout and the answer
        position's features), else the ``calibration``, else the readout itself
        (zero-shot); its result's ``source`` says which.
        """
        options = options or ScoreOptions()
        if isinstance(ticket, str):
            ticket = make_ticket(ticket)
        prior = self.prior(pack, options.effective_orderings, options.readout) if options.prior else None
        with self._lock:
            yield from self._score_locked(ticket, pack, options, cancel, calibration, head, prior)

    def score_ticket(self, ticket: Ticket | str, pack: Pack, options: ScoreOptions | None = None, **kw: Any) -> TicketResult:
        """Score one ticket and return only the final result."""
        final: TicketResult | None = None
        for event in self.score(ticket, pack, options, **kw):
            if isinstance(event, TicketScored):
                final = event.result
        assert final is not None
        return final

    def raw_readouts(self, ticket: Ticket | str, pack: Pack, options: ScoreOptions) -> tuple[TicketResult, dict[str, list[tuple[tuple[int, ...], np.ndarray, float]]]]:
        """Score and also return each criterion's per-ordering readouts.

        Returns:
            (result, {criterion id: [(order, position log-probs, coverage), ...]}).
            Eval uses this to compute every debiasing variant from one pass.
        """
        result, captured, _ = self.readouts_and_features(ticket, pack, options)
        return result, captured

    def readouts_and_features(
        self, ticket: Ticket | str, pack: Pack, options: ScoreOptions,
    ) -> tuple[TicketResult, dict[str, list[tuple[tuple[int, ...], np.ndarray, float]]], dict[str, np.ndarray]]:
        """:meth:`raw_readouts`, plus each criterion's answer-position features (label readout only).

        The features are what a learned head reads (:mod:`triage.scoring.head`);
        ``triage learn`` and eval's ``learned`` variant fit on them.
        """
        captured: dict[str, list[tuple[tuple[int, ...], np.ndarray, float]]] = {}
        features: dict[str, np.ndarray] = {}
        self._capture, self._capture_features = captured, features
        try:
            result = self.score_ticket(ticket, pack, options)
        finally:
            self._capture = self._capture_features = None
        return result, captured, features

    _capture: dict[str, list[tuple[tuple[int, ...], np.ndarray, float]]] | None = None
    _capture_features: dict[str, np.ndarray] | None = None

    def prior(self, pack: Pack, orderings: str, kind: str = DEFAULT_READOUT) -> dict[str, np.ndarray]:
        """Content-free prior: each criterion's option log-probs for an "N/A" ticket.

        Computed once per (pack, readout, orderings) for this model, then kept.
        """
        orderings = "none" if kind == "label" else orderings
        key = (pack.hash, kind, orderings)
        if key not in self._priors:
            prior = self._load_prior(pack, orderings, kind)
            if prior is None:
                opts = ScoreOptions(mode="serial", orderings=orderings, readout=kind)
                _, raw = self.raw_readouts(make_ticket(PRIOR_TEXT, "prior"), pack, opts)
                prior = {
                    cid: debias.combine([debias.to_option_space(lp, order) for order, lp, _ in reads])
                    for cid, reads in raw.items()
                }
                self._save_prior(pack, orderings, kind, prior)
            self._priors[key] = prior
        return self._priors[key]

    def _prior_file(self, pack: Pack, orderings: str, kind: str) -> Path | None:
        return None if self.prior_dir is None else self.prior_dir / f"{self.stable_key(pack, kind)}-{orderings}.json"

    def _load_prior(self, pack: Pack, orderings: str, kind: str) -> dict[str, np.ndarray] | None:
        """A prior saved by an earlier run, if it matches this model, format and pack exactly."""
        path = self._prior_file(pack, orderings, kind)
        if path is None:
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data["model_sha256"] != self.sha256 or data["prompt_format"] != self.format_for(kind).id or data["pack_hash"] != pack.hash:
                return None
            prior = {c.id: np.array(data["logprobs"][c.id], dtype=np.float64) for c in pack.criteria}
            if any(len(prior[c.id]) != len(c.options) or not np.all(np.isfinite(prior[c.id])) for c in pack.criteria):
                return None
            return prior
        except (OSError, ValueError, KeyError, TypeError, RecursionError):  # RecursionError: JSON nested thousands deep
            return None  # missing or damaged: recompute

    def _save_prior(self, pack: Pack, orderings: str, kind: str, prior: dict[str, np.ndarray]) -> None:
        path = self._prior_file(pack, orderings, kind)
        if path is None:
            return
        data = {"model_sha256": self.sha256, "prompt_format": self.format_for(kind).id, "pack_hash": pack.hash, "orderings": orderings,
                "text": PRIOR_TEXT, "logprobs": {k: v.tolist() for k, v in prior.items()}}
        try:
            write_text_atomic(path, json.dumps(data))
        except OSError as exc:
            log.warning("cannot save the prior to %s: %s", path, exc)

    # -- internals ----------------------------------------------------------------------
    def _score_locked(
        self,
        ticket: Ticket,
        pack: Pack,
        options: ScoreOptions,
        cancel: Callable[[], bool] | None,
        calibration: Calibration | None,
        head: Head | None,
        prior: dict[str, np.ndarray] | None,
    ) -> Iterator[ScoreEvent]:
        t_start = time.perf_counter()
        kind = options.readout
        builder = self.builder(pack, kind)
        orders = [debias.orders_for(len(c.options), options.effective_orderings) for c in pack.criteria]
        prompts = builder.build(ticket.text, orders, n_ctx=self.n_ctx)
        chosen = list(range(len(pack.criteria))) if options.criteria is None else pack.criterion_indices(options.criteria)
        if len(chosen) < len(pack.criteria):
            prompts = replace(prompts, prompts=[s for s in prompts.prompts if s.criterion in chosen])
        if kind == "letter":
            reader = _Reader(readout.letter_ids(self.tokenizer, max(len(c.options) for c in pack.criteria)), None)
            head = None  # a head reads options by name
        else:
            wanted = head is not None or self._capture_features is not None  # the features cost a gather: only when read
            reader = _Reader(None, self.answer_plans(pack, builder), self.feature_ids if wanted else None)
            if head is not None and (why := check_head(head, engine=self, pack=pack, readout=kind)):
                raise TriageError(f"the learned head {head.name} does not fit: {why}")
        tokens = Tokens(
            prefix=len(prompts.prefix),
            stable=len(prompts.stable),
            ticket=prompts.ticket_tokens,
            tails=sum(len(prompts.tail(s)) + reader.extra_tokens(s) for s in prompts.prompts),
            full_prompts=prompts.full_tokens,
        )
        timing = Timing()
        warnings = list(prompts.warnings)
        stable_note = self._note_stable_change(pack, kind)
        by_crit: list[_Readouts] = [_Readouts() for _ in pack.criteria]
        results: list[CriterionResult | None] = [None] * len(pack.criteria)
        complete = True
        stop = cancel or (lambda: False)
        try:
            rest: tuple[int, ...] = ()
            if options.mode == "serial" or (options.mode == "fanout" and self._resident == prompts.prefix):
                self._ensure_prefix(prompts, pack, kind, tokens, timing, stop)
            elif options.mode == "fanout":
                # The ticket goes into the same batch as the tails (see _fanout): only the stable block first.
                t0 = time.perf_counter()
                self._ensure_stable(prompts.stable, pack, kind, tokens, timing, stop)
                self._resident = ()  # until the batch has run
                tokens.prefix_cached = tokens.stable_cached
                rest = prompts.prefix[len(prompts.stable):]
                timing.prefill_ms = (time.perf_counter() - t0) * 1000
            else:
                self._drop_resident()
            if options.mode in ("serial", "fanout"):
                tokens.evaluated = (tokens.prefix - tokens.prefix_cached) + tokens.tails
                if stable_note and tokens.stable_cached < tokens.stable:  # only when it cost a prefill
                    warnings.append(stable_note)
                    self.stable_change = stable_note
            if options.mode != "fanout":
                yield Prefilled(prompts, tokens, timing.prefill_ms, len(chosen))

            if options.mode == "fanout":
                timing.prefill_ms += self._fanout(prompts, reader, by_crit, stop, rest)
                yield Prefilled(prompts, tokens, timing.prefill_ms, len(chosen))
                for ci in chosen:
                    results[ci] = self._criterion_result(ci, pack, by_crit[ci], prior, calibration, head, reader)
                    yield CriterionScored(results[ci])  # type: ignore[arg-type]
            else:
                per_crit: dict[int, list[PromptSpec]] = {}
                for spec in prompts.prompts:
                    per_crit.setdefault(spec.criterion, []).append(spec)
                saved = self.native.state_get(0) if options.mode == "serial" and options.strategy == "restore" else None
                first = True
                for ci, specs in per_crit.items():
                    for spec in specs:
                        if stop():
                            raise Cancelled()
                        t0 = time.perf_counter()
                        read = self._run_one(options.mode, prompts, spec, reader, saved, first, stop)
                        first = False
                        ms = (time.perf_counter() - t0) * 1000
                        acc = by_crit[ci]
                        acc.orders.append(spec.order)
                        acc.reads.append(read)
                        acc.ms += ms
                        acc.tokens += reader.extra_tokens(spec) + (len(spec.tokens) if options.mode in ("full", "split") else len(prompts.tail(spec)))
                    results[ci] = self._criterion_result(ci, pack, by_crit[ci], prior, calibration, head, reader)
                    yield CriterionScored(results[ci])  # type: ignore[arg-type]
                if options.mode == "serial":
                    self._back_to_prefix(prompts)
            if options.mode in ("full", "split"):
                tokens.evaluated = sum(r.tokens for r in by_crit)
        except Cancelled:
            complete = False
            self._drop_resident()
            done = sum(r is not None for r in results)
            warnings.append(f"cancelled after {done} of {len(chosen)} criteria")
        timing.tails_ms = sum(r.ms for r in by_crit)
        timing.total_ms = (time.perf_counter() - t_start) * 1000
        if self._capture is not None:
            for ci in chosen:
                acc = by_crit[ci]
                self._capture[pack.criteria[ci].id] = [(o, r.position_logprobs, r.coverage) for o, r in zip(acc.orders, acc.reads, strict=True)]
                if self._capture_features is not None and acc.reads and acc.reads[0].features is not None:
                    self._capture_features[pack.criteria[ci].id] = acc.reads[0].features
        final = TicketResult(
            ticket_id=ticket.id,
            ticket_sha256=ticket.sha256,
            model=self.model_info,
            pack={"name": pack.name, "version": pack.version, "hash": pack.hash},
            prompt_format=builder.fmt.id,
            mode=options.mode if options.mode != "serial" else f"serial/{options.strategy}",
            orderings=options.effective_orderings,
            readout=kind,
            prior=options.prior,
            criteria=[r for r in results if r is not None],
            timing=timing,
            tokens=tokens,
            warnings=warnings,
            calibration=calibration.name if calibration is not None else None,
            head=head.name if head is not None and any(head.covers(pack.criteria[ci].id) for ci in chosen) else None,
            complete=complete,
            created_at=time.time(),
        )
        yield TicketScored(final)

    def stable_parts(self, pack: Pack, kind: str = DEFAULT_READOUT) -> dict[str, str]:
        """What identifies the stable block, by name (for saying what changed)."""
        return {"model": f"{self.name} ({self.sha256[:12]})", "prompt format": self.format_for(kind).id, "pack": f"{pack.name} v{pack.version} ({pack.hash})"}

    def _note_stable_change(self, pack: Pack, kind: str = DEFAULT_READOUT) -> str | None:
        """Say once, naming what changed, when the stable block differs from the last one.

        The last one is this engine's previous ticket, or, for the first ticket of a
        process, the last one recorded by the stable store (the previous run).
        """
        parts = self.stable_parts(pack, kind)
        prev = self._last_stable
        if prev != parts and self.stable_store is not None:
            recorded = self.stable_store.swap_last(parts)
            prev = recorded if prev is None else prev
        self._last_stable = parts
        if not prev or prev == parts:
            return None
        changed = [f"{k}: {prev.get(k, '?')} → {v}" for k, v in parts.items() if prev.get(k) != v]
        return "stable prefix changed, so its prefill is paid again once (" + "; ".join(changed) + ")"

    def _drop_resident(self) -> None:
        self.native.seq_rm(0, -1, -1)
        self._resident = ()

    def hold_stable(self, pack: Pack, kind: str = DEFAULT_READOUT) -> float:
        """Leave exactly ``pack``'s stable block in the cache, as between two tickets.

        Keeps it when resident (dropping the last ticket's cells), else restores it
        from the stable store, else computes it (and stores it). Returns the ms
        spent computing it (0 when it was resident or restored).
        """
        with self._lock:
            timing, stable = Timing(), self.builder(pack, kind).stable_tokens
            self._ensure_stable(stable, pack, kind, Tokens(), timing, lambda: False)
            self._resident = stable
            return timing.stable_ms

    def clear(self) -> None:
        """Empty the cache: the next ticket computes (or restores) its stable block again."""
        with self._lock:
            self._drop_resident()

    def _ensure_stable(self, stable: tuple[int, ...], pack: Pack, kind: str, tokens: Tokens, timing: Timing, stop: Callable[[], bool]) -> None:
        """Make sequence 0 start with the stable block and hold nothing after it."""
        if self._resident[: len(stable)] == stable and len(self._resident) >= len(stable):
            self.native.seq_rm(0, len(stable), -1)
            tokens.stable_cached = len(stable)
            return
        self._drop_resident()
        key = self.stable_key(pack, kind)
        state = self.stable_store.get(key, stable) if self.stable_store else None
        if state is not None:
            try:
                self.native.state_set(0, state)
                tokens.stable_cached = len(stable)
                return
            except TriageError:
                log.warning("stored stable state for %s was rejected; recomputing", key)
                self._drop_resident()
        t1 = time.perf_counter()
        self.native.decode([Seq("stable", 0, 0, stable)], should_stop=stop)
        timing.stable_ms = (time.perf_counter() - t1) * 1000
        if self.stable_store:
            self.stable_store.put(key, stable, self.native.state_get(0))

    def _ensure_prefix(self, prompts: TicketPrompts, pack: Pack, kind: str, tokens: Tokens, timing: Timing, stop: Callable[[], bool]) -> None:
        """Make sequence 0 hold exactly the prefix, reusing what is resident or stored."""
        prefix, stable = prompts.prefix, prompts.stable
        t0 = time.perf_counter()
        if self._resident == prefix:
            tokens.prefix_cached = len(prefix)
            tokens.stable_cached = len(stable)
            return
        self._ensure_stable(stable, pack, kind, tokens, timing, stop)
        self._resident = ()  # until the prefix is complete
        rest = prefix[len(stable):]
        self.native.decode([Seq("prefix", 0, len(stable), rest)], should_stop=stop)
        self._resident = prefix
        tokens.prefix_cached = tokens.stable_cached
        timing.prefill_ms = (time.perf_counter() - t0) * 1000

    def _run_one(self, mode: str, prompts: TicketPrompts, spec: PromptSpec, reader: _Reader, saved: bytearray | None, first: bool, stop: Callable[[], bool]) -> readout.Readout:
        """Evaluate one prompt in ``full``, ``split`` or ``serial`` mode; return its readout."""
        n = self.native
        p = len(prompts.prefix)
        if mode == "full":
            n.seq_rm(0, -1, -1)
            return self._decode_tail(reader, spec, spec.tokens, 0, stop)
        if mode == "split":
            n.seq_rm(0, -1, -1)
            s = len(prompts.stable)
            n.decode([Seq("s", 0, 0, prompts.stable)], should_stop=stop)
            n.decode([Seq("r", 0, s, prompts.prefix[s:])], should_stop=stop)
            return self._decode_tail(reader, spec, prompts.tail(spec), p, None)
        if saved is not None:
            if not first:
                n.seq_rm(0, -1, -1)
                n.state_set(0, saved)
            return self._decode_tail(reader, spec, prompts.tail(spec), p, None)
        read = self._decode_tail(reader, spec, prompts.tail(spec), p, None)
        n.seq_rm(0, p, -1)
        return read

    def _decode_tail(self, reader: _Reader, spec: PromptSpec, tail: tuple[int, ...], pos: int, stop: Callable[[], bool] | None) -> readout.Readout:
        """Decode one tail into sequence 0 after ``pos`` cells (plus, for whole-answer
        reads, one more sequence per option sharing the prefix) and read it."""
        n = self.native
        pieces, width = reader.pieces("x", spec, tail, pos, 0)
        for k in range(1, width):
            n.seq_cp(0, k, -1, -1)
        try:
            out = n.decode(pieces, should_stop=stop)
        finally:
            for k in range(1, width):
                n.seq_rm(k, -1, -1)
        return reader.read("x", spec, out)

    def _back_to_prefix(self, prompts: TicketPrompts) -> None:
        self.native.seq_rm(0, len(prompts.prefix), -1)
        self._resident = prompts.prefix

    def _fanout(self, prompts: TicketPrompts, reader: _Reader, by_crit: list[_Readouts], stop: Callable[[], bool], rest: tuple[int, ...] = ()) -> float:
        """All tails in as few batches as fit, each in its own sequence(s) sharing the prefix.

        With ``rest`` (the ticket's part of the prefix, not yet in the cache), the
        first batch also carries it: its tokens belong to sequence 0 and to every
        tail's sequence of that batch, so prefill and tails cost one decode. The
        ticket's cells are then dropped again (only the stable block stays
        resident), so that no later ticket reuses a prefix computed in another
        batch shape than its own. Returns the ms of the ticket's share.
        """
        n = self.native
        p = len(prompts.prefix)
        s = p - len(rest)
        prefill_ms = 0.0
        specs = prompts.prompts
        groups: list[list[int]] = [[]]
        room = n.n_ctx - p
        used = seqs_used = 0
        for i, spec in enumerate(specs):
            t = len(prompts.tail(spec)) + reader.extra_tokens(spec)
            w = reader.width(spec)
            if groups[-1] and (used + t > room or seqs_used + w > n.n_seq_max - 1):
                groups.append([])
                used = seqs_used = 0
            groups[-1].append(i)
            used += t
            seqs_used += w
        for g, group in enumerate(groups):
            if stop():
                raise Cancelled()
            t0 = time.perf_counter()
            pieces: list[Seq] = []
            sizes: dict[int, int] = {}
            k = 1
            for i in group:
                got, width = reader.pieces(i, specs[i], prompts.tail(specs[i]), p, k)
                for j in range(k, k + width):
                    n.seq_cp(0, j, -1, -1)
                pieces += got
                sizes[i] = sum(len(g_.tokens) for g_ in got)
                k += width
            with_rest = g == 0 and bool(rest)
            if with_rest:
                pieces.insert(0, Seq("rest", 0, s, rest, also=tuple(range(1, k))))
            try:
                out = n.decode(pieces)
            finally:
                for j in range(1, k):
                    n.seq_rm(j, -1, -1)
            ms = (time.perf_counter() - t0) * 1000
            total = sum(sizes.values())
            if with_rest:  # one batch: time shared by tokens
                share = ms * len(rest) / (len(rest) + total)
                prefill_ms += share
                ms -= share
            for i in group:
                spec = specs[i]
                acc = by_crit[spec.criterion]
                acc.orders.append(spec.order)
                acc.reads.append(reader.read(i, spec, out))
                acc.ms += ms * sizes[i] / total  # one batch: time shared by tokens
                acc.tokens += sizes[i]
        if rest:
            n.seq_rm(0, s, -1)
            self._resident = prompts.stable
        return prefill_ms

    def _criterion_result(
        self,
        ci: int,
        pack: Pack,
        acc: _Readouts,
        prior: dict[str, np.ndarray] | None,
        calibration: Calibration | None,
        head: Head | None,
        reader: _Reader,
    ) -> CriterionResult:
        crit = pack.criteria[ci]
        per_order = [debias.to_option_space(r.position_logprobs, o) for o, r in zip(acc.orders, acc.reads, strict=True)]
        combined = debias.combine(per_order)
        source = "zero-shot"
        if head is not None and head.covers(crit.id) and acc.reads[0].features is not None:
            # fitted on the raw readout (no prior, no calibration): see triage.scoring.learn
            combined = head.apply(crit.id, acc.reads[0].features, combined)
            source = "learned"
        else:
            if prior is not None:
                combined = debias.divide_prior(combined, prior[crit.id])
            if calibration is not None and calibration.covers(crit.id):
                combined = calibration.apply(crit.id, combined)
                source = "calibrated"
        probs = np.exp(combined)
        probs = probs / probs.sum()
        ranked = np.argsort(-probs)
        choice = int(ranked[0])
        first_argmax = int(np.argmax(per_order[0]))
        flips = sum(int(np.argmax(lp)) != first_argmax for lp in per_order[1:])
        coverage = float(np.mean([r.coverage for r in acc.reads]))
        warnings = []
        if coverage < readout.LOW_COVERAGE:
            what = "the option letters" if reader.letters is not None else "the options' answers"
            warnings.append(f"low coverage: only {coverage:.0%} of the model's next-token mass is on {what}")
        top = acc.reads[0].top_token
        return CriterionResult(
            id=crit.id,
            question=crit.question,
            choice=crit.options[choice].id,
            options=[OptionScore(o.id, o.label, float(probs[i])) for i, o in enumerate(crit.options)],
            margin=float(probs[ranked[0]] - probs[ranked[1]]),
            coverage=coverage,
            tail_tokens=acc.tokens,
            tail_ms=acc.ms,
            orderings=len(acc.orders),
            top_token=self.tokenizer.decode([top]),
            raw_choice=crit.options[first_argmax].id,
            order_flips=flips,
            readout=reader.kind(ci),
            source=source,
            index=ci,
            warnings=warnings,
        )
