"""A scripted stand-in for :class:`triage.scoring.engine.Engine`, for fast, deterministic TUI tests.

It builds real prompts (the one prompt builder, a character tokenizer) and
streams the engine's own event types with known probabilities, fixed
timings and optional delays. Like the real engine it keeps each scored ticket's
prefix by ticket id, so a thread scored again with one more message reuses the
tokens it shares with the last score (``result.thread``: messages, previous,
reused, edited, dropped; ``tokens.evaluated`` counts only the rest). A ``gate`` holds it after ``hold_after``
criteria until the test releases it, so "half-way" and cancellation can be
tested without races. With ``prefill_steps`` it tells a ``progress`` callback how far its
"prefill" has got in that many steps (holding at ``prefill_hold_at`` until the gate opens), as
the real engine does from inside a decode; it measures its rate (``speed``) as the engine does.

``FakeEngine`` subclasses the protocol it implements (:class:`triage.scoring.protocol.AppEngine`), so the type
checker (``./scripts/test`` runs mypy over this file) refuses it when a protocol member is missing or differs.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from triage.domain.pack import Pack
from triage.domain.result import CriterionResult, ModelInfo, OptionScore, ThreadInfo, TicketResult, Timing, Tokens
from triage.domain.thread import Message
from triage.domain.ticket import Ticket, make_ticket
from triage.errors import TriageError
from triage.scoring.decide import Calibrator
from triage.scoring.engine import CriterionScored, Prefilled, ScoreEvent, ScoreOptions, TicketScored
from triage.scoring.head import Head
from triage.scoring.options import DEFAULT_READOUT
from triage.scoring.prefill_result import PrefillResult
from triage.scoring.prefix_store import common_length, first_edit
from triage.scoring.prompt import PromptBuilder, PromptFormat
from triage.scoring.protocol import AppEngine
from triage.scoring.readout import LABEL, ReadoutKind, product_readout
from triage.scoring.run import Progress, RawReadouts
from triage.scoring.schedule import Schedule
from triage.scoring.speed import Speed

FIXED_TIME = 1_700_000_000.0


class CharTokenizer:
    """One token per character: exact, reversible, and fast enough for tests."""

    def encode(self, text: str) -> list[int]:
        return [ord(ch) for ch in text]

    def control(self, token: str) -> int | None:
        return None  # no ChatML tokens: the plain prompt format

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids)

    @property
    def bos(self) -> int | None:
        return None


def scripted_probabilities(n: int, choice: int, strength: float) -> list[float]:
    """``strength`` on ``choice``, the rest shared with a clear runner-up."""
    rest = 1.0 - strength
    weights = list(range(n - 1, 0, -1))
    others = [rest * w / sum(weights) for w in weights]
    probs = others[:choice] + [strength] + others[choice:]
    return probs[:n]


class FakeEngine(AppEngine):
    """Streams scripted results like the real engine.

    Args:
        name: model name shown in the app.
        stand_in: whether this pretends to be a stand-in model.
        n_ctx: context size for the prompt builder's shortening.
        delay: seconds each criterion takes (checked for cancel every 10 ms).
        hold_after: after this many criteria, wait for ``gate`` (None: never).
        low_coverage: criterion ids that get a low-coverage warning.
        fixed_time: stamp results with a fixed ``created_at`` (stable snapshots).
        prefill_steps: progress reports before the prefix is in (0: none).
        prefill_hold_at: after this many of them, wait for ``gate`` (None: never).
        shared: read every criterion at the shared position in one decode, as a starter head does: the
            first criterion carries the decode's tail cost, the others none (``readout`` ``shared``).
        prefill_delay: seconds a :meth:`prefill` of a whole prefix takes (checked for cancel every 10 ms).

    A :meth:`prefill` is recorded in :attr:`prefills` (``(text, result)``); the next :meth:`score` of a prompt that
    shares its prefix counts the shared tokens as cached. :attr:`stable_note`, when set, is said once on the
    warnings of the next score, as the engine says a changed stable block.
    """

    def __init__(
        self,
        *,
        name: str = "fake-0.1b",
        stand_in: bool = True,
        n_ctx: int = 2048,
        delay: float = 0.0,
        hold_after: int | None = None,
        low_coverage: tuple[str, ...] = (),
        fixed_time: bool = True,
        prefill_steps: int = 0,
        prefill_hold_at: int | None = None,
        shared: bool = False,
        prefill_delay: float = 0.0,
    ) -> None:
        self.name = name
        self.prefill_delay = prefill_delay
        self.prefills: list[tuple[str, PrefillResult]] = []
        self.prefilling = threading.Event()  # set while a prefill runs
        self.stable_note: str | None = None
        self._prefilled: tuple[int, ...] = ()
        self.shared = shared
        self.stand_in = stand_in
        self._n_ctx = n_ctx
        self.delay = delay
        self.hold_after = hold_after
        self.gate = threading.Event()
        self.low_coverage = set(low_coverage)
        self.fixed_time = fixed_time
        self.prefill_steps = prefill_steps
        self.prefill_hold_at = prefill_hold_at
        self.speed = Speed()
        self.model_path = Path(f"/models/{name}.gguf")
        self.sha256 = hashlib.sha256(name.encode()).hexdigest()
        self._tokenizer = CharTokenizer()
        self.fmt = PromptFormat("plain")
        self.load_ms = 1.0
        self.scored: list[str] = []  # ticket texts, in the order scoring started
        self.held = threading.Event()  # set while waiting at the gate
        self.closed = False
        self._builders: dict[tuple[str, str], PromptBuilder] = {}
        self._resident: tuple[int, ...] = ()
        self._kept: dict[str, tuple[tuple[int, ...], tuple[Message, ...], int]] = {}  # id: prefix, messages, dropped
        self._lock = threading.Lock()

    @property
    def tokenizer(self) -> CharTokenizer:
        return self._tokenizer

    @property
    def n_ctx(self) -> int:
        return self._n_ctx

    @property
    def model_info(self) -> ModelInfo:
        return {"name": self.name, "path": str(self.model_path), "sha256": self.sha256, "stand_in": self.stand_in}

    def format_for(self, kind: str = DEFAULT_READOUT) -> PromptFormat:
        return self.fmt.with_readout(kind)

    def builder(self, pack: Pack, readout: ReadoutKind | str = LABEL) -> PromptBuilder:
        kind = product_readout(readout)
        b = self._builders.get((pack.hash, kind.name))
        if b is None:
            fmt = self.fmt.with_readout(kind.name)
            b = self._builders[(pack.hash, kind.name)] = PromptBuilder(pack, fmt, self.tokenizer, kind)
        return b

    def stable_key(self, pack: Pack, kind: str = DEFAULT_READOUT) -> str:
        """As the engine's: model sha256, prompt format (with readout), pack hash."""
        fid = self.format_for(kind).id
        return f"{self.sha256[:16]}-{fid.replace('/', '_').replace(':', '_')}-{pack.hash}"

    def forget(self, ticket_id: str | None = None) -> None:
        """Drop the kept prefix of ``ticket_id`` (None: of every ticket); its next score reads it whole."""
        with self._lock:
            if ticket_id is None:
                self._kept.clear()
            else:
                self._kept.pop(ticket_id, None)

    def close(self) -> None:
        self.closed = True

    def _wait(self, seconds: float, stop: Callable[[], bool]) -> bool:
        """Sleep up to ``seconds``; True when cancelled meanwhile."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if stop():
                return True
            time.sleep(0.01)
        return stop()

    def score(
        self,
        ticket: Ticket | str,
        pack: Pack,
        options: ScoreOptions | None = None,
        *,
        cancel: Callable[[], bool] | None = None,
        calibration: Calibrator | None = None,
        head: Head | None = None,
        features: bool = False,  # the real engine gathers what a head reads; the fake has no hidden state
        schedule: Schedule | None = None,  # only its name is the fake's (the result's mode)
        readout: ReadoutKind | None = None,  # its prompts and what the result calls it; one order per criterion
        progress: Callable[[Progress], None] | None = None,
    ) -> Iterator[ScoreEvent]:
        kind = readout or LABEL
        if isinstance(ticket, str):
            ticket = make_ticket(ticket)
        stop = cancel or (lambda: False)
        with self._lock:
            self.scored.append(ticket.text)
            orders = [[tuple(range(len(c.options)))] for c in pack.criteria]
            prompts = self.builder(pack, kind).build(ticket.text, orders, n_ctx=self.n_ctx, messages=ticket.messages)
            cached = len(prompts.prefix) if self._resident == prompts.prefix else 0
            cached = max(cached, common_length(self._prefilled, prompts.prefix))
            self._prefilled = ()
            thread = ThreadInfo(messages=len(ticket.thread), dropped=prompts.dropped)
            kept = self._kept.get(ticket.id)
            if kept is not None:
                thread.previous, thread.edited = len(kept[1]), first_edit(kept[1], ticket.thread)
                thread.compaction_moved = kept[2] != prompts.dropped
                shared = common_length(kept[0], prompts.prefix)
                if len(prompts.stable) < shared < len(prompts.prefix):  # as the engine: only when something is new
                    thread.reused = shared - len(prompts.stable)
                    cached = max(cached, shared)
            tokens = Tokens(
                prefix=len(prompts.prefix),
                prefix_cached=cached,
                stable=len(prompts.stable),
                ticket=prompts.ticket_tokens,
                tails=len(prompts.tail(prompts.prompts[0]))
                if self.shared
                else sum(len(prompts.tail(s)) for s in prompts.prompts),
                full_prompts=prompts.full_tokens,
            )
            tokens.evaluated = tokens.prefix - cached + tokens.tails
            timing = Timing(prefill_ms=0.0 if cached == tokens.prefix else 120.0 * (1 - cached / tokens.prefix))
            warnings = list(prompts.warnings)
            if self.stable_note:
                warnings.append(self.stable_note)
                self.stable_note = None
            if thread.edited is not None:
                warnings.append(
                    f"message {thread.edited} changed since this ticket was last scored; read again from there"
                )
            complete = self._prefill(tokens.evaluated, stop, progress)
            if complete:
                yield Prefilled(prompts, tokens, timing.prefill_ms, len(pack.criteria))
            results: list[CriterionResult] = []
            for ci, _crit in enumerate(pack.criteria if complete else ()):
                if self.hold_after is not None and ci == self.hold_after:
                    self.held.set()
                    while not self.gate.wait(0.01):
                        if stop():
                            break
                    self.held.clear()
                if self._wait(self.delay, stop):
                    complete = False
                    break
                tail = len(prompts.tail(prompts.prompts[ci])) if not self.shared or ci == 0 else 0
                results.append(self._criterion(ci, pack, ticket, tail))
                yield CriterionScored(results[-1])
            if complete:
                self._resident = prompts.prefix
                self._kept[ticket.id] = (prompts.prefix, ticket.thread, prompts.dropped)
            else:
                self._resident = ()
                warnings.append(f"cancelled after {len(results)} of {len(pack.criteria)} criteria")
            timing.tails_ms = sum(r.tail_ms for r in results)
            timing.total_ms = timing.prefill_ms + timing.tails_ms + 5.0
            if complete:
                self.speed.record(tokens.evaluated, timing.total_ms)
            yield TicketScored(
                TicketResult(
                    ticket_id=ticket.id,
                    ticket_sha256=ticket.sha256,
                    model=self.model_info,
                    pack={"name": pack.name, "version": pack.version, "hash": pack.hash},
                    prompt_format=self.fmt.with_readout(kind.name).id,
                    mode=schedule.name if schedule is not None else "fanout",
                    orderings=kind.read_as.orderings,
                    readout=kind.read_as.readout,
                    prior=kind.read_as.prior,
                    criteria=results,
                    timing=timing,
                    tokens=tokens,
                    warnings=warnings,
                    calibration=calibration.name if calibration is not None else None,
                    head=head.name if head is not None else None,
                    complete=complete,
                    created_at=FIXED_TIME if self.fixed_time else time.time(),
                    thread=thread,
                )
            )

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
        """As the engine: one ticket at a time in input order, ``(ticket, final event)``; a ticket whose text holds
        ``FAIL`` gets the :class:`TriageError` that stops it (the others still score)."""
        for ticket in tickets:
            if "FAIL" in ticket.text:
                yield ticket, TriageError(f"ticket {ticket.id} could not be scored")
                continue
            events = self.score(ticket, pack, options, calibration=calibration, head=head, features=features)
            final = [e for e in events if isinstance(e, TicketScored)]
            yield ticket, final[-1]

    def prefill(self, ticket: Ticket | str, pack: Pack, *, cancel: Callable[[], bool] | None = None) -> PrefillResult:
        """Pretend to compute the prompt before the tails (``prefill_delay`` for the whole of it, pro rata); what was
        resident or prefilled before counts as cached, up to the first changed token. A cancel keeps the part done."""
        if isinstance(ticket, str):
            ticket = make_ticket(ticket)
        stop = cancel or (lambda: False)
        with self._lock:
            self.prefilling.set()
            try:
                t0 = time.perf_counter()
                orders = [[tuple(range(len(c.options)))] for c in pack.criteria]
                prompts = self.builder(pack).build(ticket.text, orders, n_ctx=self.n_ctx, messages=ticket.messages)
                prefix = prompts.prefix
                cached = max(common_length(self._resident, prefix), common_length(self._prefilled, prefix))
                todo = len(prefix) - cached
                done, complete = todo, True
                if self.prefill_delay and todo:
                    end = time.monotonic() + self.prefill_delay * todo / len(prefix)
                    start = time.monotonic()
                    while time.monotonic() < end:
                        if stop():
                            done, complete = int(todo * (time.monotonic() - start) / (end - start)), False
                            break
                        time.sleep(0.01)
                elif stop():
                    done, complete = 0, False
                self._prefilled = prefix[: cached + done]
                result = PrefillResult(len(prefix), cached, done, (time.perf_counter() - t0) * 1000, complete)
                self.prefills.append((ticket.text, result))
                return result
            finally:
                self.prefilling.clear()

    def _prefill(self, total: int, stop: Callable[[], bool], progress: Callable[[Progress], None] | None) -> bool:
        """Tell ``progress`` the prefill's steps (holding where asked); False when cancelled meanwhile."""
        if not self.prefill_steps or progress is None:
            return True  # no prefill to watch: a cancel is seen between criteria
        for k in range(1, self.prefill_steps + 1):
            if self.prefill_hold_at is not None and k == self.prefill_hold_at + 1:
                self.held.set()
                while not self.gate.wait(0.01):
                    if stop():
                        break
                self.held.clear()
            if stop():
                return False
            progress(Progress("ticket", total * k // self.prefill_steps, total))
        return not stop()

    def _criterion(self, ci: int, pack: Pack, ticket: Ticket, tail_tokens: int) -> CriterionResult:
        crit = pack.criteria[ci]
        n = len(crit.options)
        choice = (len(ticket.text) + ci) % n
        probs = scripted_probabilities(n, choice, 0.55 + 0.08 * (ci % 4))
        ranked = sorted(range(n), key=lambda i: -probs[i])
        low = crit.id in self.low_coverage
        coverage = 0.2 if low else 0.93
        return CriterionResult(
            id=crit.id,
            question=crit.question,
            choice=crit.options[choice].id,
            options=[OptionScore(o.id, o.label, probs[i]) for i, o in enumerate(crit.options)],
            margin=probs[ranked[0]] - probs[ranked[1]],
            coverage=coverage,
            tail_tokens=tail_tokens,
            tail_ms=0.0 if self.shared and ci else 40.0 + 7.0 * ci,
            orderings=1,
            top_token=" A",
            raw_choice=crit.options[choice].id,
            order_flips=0,
            readout="shared" if self.shared else "letter",
            index=ci,
            warnings=[f"low coverage: only {coverage:.0%} of the model's next-token mass is on the option letters"]
            if low
            else [],
        )

    def score_ticket(
        self, ticket: Ticket | str, pack: Pack, options: ScoreOptions | None = None, **kw: Any
    ) -> TicketResult:
        """Only the final result (``kw``: as :meth:`score`'s)."""
        final = None
        for event in self.score(ticket, pack, options, **kw):
            if isinstance(event, TicketScored):
                final = event.result
        assert final is not None
        return final

    def raw_readouts(
        self, ticket: Ticket | str, pack: Pack, options: ScoreOptions | None = None, **kw: Any
    ) -> tuple[TicketResult, RawReadouts]:
        """The result and, per criterion, its one ordering's readout as the engine gives it: the options' scripted
        log-probabilities in natural order and the coverage."""
        result = self.score_ticket(ticket, pack, options, **kw)
        raw: RawReadouts = {
            c.id: [(tuple(range(len(c.options))), np.log([o.probability for o in c.options]), c.coverage)]
            for c in result.criteria
        }
        return result, raw


# -- factories and helpers for the app's tests ------------------------------------------------


def current_worker_cancelled() -> bool:
    """True when called from a Textual worker that has been cancelled (the app is closing)."""
    try:
        from textual.worker import get_current_worker

        return get_current_worker().is_cancelled
    except Exception:
        return False


class FakeFactory:
    """An engine factory for :func:`triage.tui.app.make_app` that hands out one fake.

    Args:
        engine: the fake to return.
        hold: block loading until :attr:`gate` is set (the "loading" state).
        error: raise this instead of loading (the "no model" state).
    """

    def __init__(self, engine: FakeEngine | None = None, *, hold: bool = False, error: Exception | None = None) -> None:
        self.engine = engine or FakeEngine()
        self.gate = threading.Event()
        if not hold:
            self.gate.set()
        self.error = error
        self.requests: list[str | None] = []

    def __call__(self, requested: str | None, notice: Callable[[str], None]) -> FakeEngine:
        self.requests.append(requested)
        while not self.gate.wait(0.01):
            if current_worker_cancelled():
                from triage.errors import TriageError

                raise TriageError("loading was cancelled")
        if self.error is not None:
            raise self.error
        return self.engine


def ui_options(**kw: Any) -> Any:
    """UI options for tests: fixed theme, no blinking, no spinners, no tokenizer preload, no read-ahead (scores
    are cold unless a test asks for ``read_ahead``: tests/test_tui_prefill.py)."""
    from triage.tui.options import UIOptions

    defaults: dict[str, Any] = dict(
        theme="textual-dark",
        remember_theme=False,
        cursor_blink=False,
        animate=False,
        preload_tokenizer=False,
        read_ahead=False,
    )
    defaults.update(kw)
    return UIOptions(**defaults)


def fake_app(factory: Any = None, *, pack: Pack | None = None, **options: Any) -> Any:
    """The real app (``make_app``) with a scripted engine factory and test options."""
    from triage.tui.app import make_app

    return make_app(ui_options(**options), engine_factory=factory or FakeFactory(), pack=pack)


async def wait_until(pilot: Any, predicate: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    """Let the app run until ``predicate()`` holds; fail after ``timeout`` seconds.

    Bare ``pilot.pause()`` calls are not reliable: workers finish when they finish.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")
        await pilot.pause(0.02)
