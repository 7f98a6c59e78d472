"""The main screen: the ticket box, the decision cards, and the work behind them.

Blocking work runs in thread workers that only post messages:

* ``model``: loads the engine at start (and on "switch model");
* ``score``: one exclusive worker per submission; a new submit cancels the old;
* ``count``: token counting, debounced, so typing and huge pastes stay smooth.

The ticket on screen is the *open ticket*. A reply (F8 customer, F9 agent, F10
internal note) is added to it as its next message: the ticket becomes a thread,
keeps its id (the engine reuses its kept state by id, so only the new message and
the tails are evaluated), is saved into the same history row before scoring, and
is scored again. The ticket box then shows the thread (:class:`ThreadView`) above
the editor, which takes the next message.

Every submission has an id. Messages of a submission that is no longer
current update history but never the screen, so stale results cannot
overwrite newer ones.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.markup import escape
from textual.screen import Screen
from textual.worker import get_current_worker

from triage.domain.pack import Pack
from triage.domain.result import TicketResult
from triage.domain.ticket import Ticket, clean_text, make_ticket
from triage.errors import InputError, TriageError
from triage.scoring.options import ScoreOptions
from triage.store.history import History, SavedScore
from triage.tui.engine_host import EngineHost
from triage.tui.messages import (
    CriterionDecided,
    DecodeProgressed,
    HeadLearned,
    ModelLoaded,
    ModelLoadFailed,
    ScoreFailed,
    TicketDecided,
    TicketEdited,
    TicketPasted,
    TicketPrefilled,
    TokensCounted,
)
from triage.tui.options import UIOptions
from triage.tui.submission import Submission
from triage.tui.widgets.criterion_card import CriterionCard
from triage.tui.widgets.decisions import DecisionsPanel
from triage.tui.widgets.key_footer import KeyFooter
from triage.tui.widgets.model_status import ModelState, ModelStatus
from triage.tui.widgets.notice_bar import NoticeBar
from triage.tui.widgets.score_summary import PRODUCT_MODEL, ScoreSummary, about_seconds
from triage.tui.widgets.thread_view import ThreadView
from triage.tui.widgets.ticket_input import TicketInput

if TYPE_CHECKING:
    from triage.scoring.fit import Fits, ModelIdentity

log = logging.getLogger(__name__)
T = TypeVar("T")
REPLY_KEYS = {"customer": "F8", "agent": "F9", "note": "F10"}
REPLY_WORDS = {"customer": "customer reply", "agent": "agent reply", "note": "internal note"}


class ModelUnavailableHook(Protocol):
    """The app's side of a failed model load (``TriageApp.model_unavailable``).

    A protocol, so this screen never imports the app (the app imports the screen).
    """

    def model_unavailable(self, failure: ModelLoadFailed) -> None: ...


class MainScreen(Screen[None]):
    """Paste, score, read the decisions."""

    BINDINGS = [
        Binding("f1", "app.help", "Help"),
        Binding("f2", "app.history", "History"),
        Binding("f3", "export('json')", "Export"),
        Binding("f4", "copy_summary", "Copy"),
        Binding("f5", "score", "Score", priority=True),
        Binding("f6", "label", "Label", priority=True),
        Binding("f7", "app.agreement", "Agreement", show=False, priority=True),
        Binding(
            "f8",
            "reply('customer')",
            "Customer",
            tooltip="Add the box's text as a customer reply and score again",
            priority=True,
        ),
        Binding(
            "f9",
            "reply('agent')",
            "Agent",
            tooltip="Add the box's text as an agent reply and score again",
            priority=True,
        ),
        Binding("f10", "reply('note')", "Note", show=False, priority=True),
        Binding("ctrl+t", "timeline", "Timeline", priority=True),
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+l", "clear", "Clear", show=False),
    ]
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (70, "-normal"), (150, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]

    def __init__(self, host: EngineHost, history: History, options: UIOptions, pack: Pack) -> None:
        super().__init__()
        self.host = host
        self.history = history
        self.options = options
        self.pack = pack
        self.auto_score = options.auto_score
        self.model_state: ModelState = "loading"
        self.current: Submission | None = None
        self.pending: Submission | None = None  # submitted before the model was up
        self.result: TicketResult | None = None  # the result on screen
        self.result_text: str | None = None  # its ticket text (for Markdown export)
        self.result_rows: tuple[int | None, int | None] = (None, None)  # its ticket row and score id in history
        self.open_ticket: Ticket | None = None  # the ticket on screen (submitted or reopened): replies go to it
        self.open_row: int | None = None  # its history row
        self.composing = False  # the box shows the open thread; the editor takes its next message
        self._labels_since_fit = 0  # labels for this pack since its stored head was learned (across restarts)
        self._subs: dict[int, Submission] = {}
        self._seq = 0
        self._count_stamp = 0.0
        self._load_seq = 0

    # -- widgets ----------------------------------------------------------------------
    @property
    def ticket(self) -> TicketInput:
        return self.query_one(TicketInput)

    @property
    def thread_view(self) -> ThreadView:
        return self.query_one(ThreadView)

    @property
    def decisions(self) -> DecisionsPanel:
        return self.query_one(DecisionsPanel)

    @property
    def summary(self) -> ScoreSummary:
        return self.query_one(ScoreSummary)

    @property
    def status(self) -> ModelStatus:
        return self.query_one(ModelStatus)

    @property
    def notices(self) -> NoticeBar:
        return self.query_one(NoticeBar)

    @property
    def triage_app(self) -> ModelUnavailableHook:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield ModelStatus(animate=self.options.animate, id="model-status")
        yield NoticeBar(id="notices")
        yield ThreadView(id="thread")
        yield TicketInput(cursor_blink=self.options.cursor_blink, id="ticket")
        yield ScoreSummary(id="summary")
        yield DecisionsPanel(id="decisions")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._show_settings()
        self.decisions.show_pack(self.pack)
        self.ticket.focus()
        if self.history.notice:
            self.notices.put("history", self.history.notice, "warning")
        if self.options.config_notes:  # removed config keys: ignored, and said so with their lines
            self.notices.put("config", " · ".join(self.options.config_notes), "warning")
        self.load_model(self.options.model)
        if self.options.preload_tokenizer:
            self._preload_tokenizer()

    def _show_settings(self) -> None:
        from triage.domain.result import readout_words

        product = ScoreOptions()  # how every ticket is read: by name
        self.status.settings(self.pack, readout_words(product.readout, product.effective_orderings), self.auto_score)

    # -- model ------------------------------------------------------------------------
    def load_model(self, requested: str | None) -> None:
        """Load (or switch to) a model in the background; the UI stays live."""
        self._supersede()
        self.model_state = "loading"
        self.status.loading(requested)
        self.notices.drop("model")
        self.notices.drop("stand-in")
        self._load_seq += 1
        self._load_model(self._load_seq, requested)

    @work(thread=True, exclusive=True, group="model", exit_on_error=False)
    def _load_model(self, load: int, requested: str | None) -> None:
        t0 = time.monotonic()
        try:
            engine, notices = self.host.load(requested)
        except TriageError as exc:
            from triage.model.resolve import NoModelError

            self.post_message(
                ModelLoadFailed(load, requested, exc.message, exc.hint, first_run=isinstance(exc, NoModelError))
            )
            return
        except Exception as exc:  # a crash in native code's wrapper must not take the app down
            log.exception("loading model %s failed", requested)
            self.post_message(ModelLoadFailed(load, requested, f"could not load the model: {exc}", None))
            return
        self.post_message(ModelLoaded(load, engine.name, engine.stand_in, engine.n_ctx, notices, time.monotonic() - t0))

    @work(thread=True, exclusive=True, group="tokenizer", exit_on_error=False)
    def _preload_tokenizer(self) -> None:
        from triage.scoring.tokenizer import qwen3_tokenizer

        try:
            qwen3_tokenizer()
        except Exception:  # counting falls back to the engine once it loads
            log.exception("could not load the Qwen3 tokenizer")

    def on_model_loaded(self, msg: ModelLoaded) -> None:
        if msg.load != self._load_seq:
            return  # a newer load is under way
        self.model_state = "ready"
        self.status.ready(msg.name, stand_in=msg.stand_in, n_ctx=msg.n_ctx)
        log.info("model %s loaded in %.1f s", msg.name, msg.seconds)
        if msg.stand_in:
            self.notices.put("stand-in", self._stand_in_notice(msg), "warning")
        self.decisions.set_waiting()
        self._count_labels_since_fit()
        self._fit_starter(self.host.engine, self.pack)
        if self.pending is not None:
            sub, self.pending = self.pending, None
            self._start(sub)
        self._request_count()
        self.refresh_bindings()

    @work(thread=True, exclusive=True, group="starter", exit_on_error=False)
    def _fit_starter(self, engine: Any, pack: Pack) -> None:
        """The built-in pack's starter head on this model's first use (triage.evaluation.starter), in the
        background: tickets are scored zero-shot until it is stored, then the fit policy applies it."""
        from triage.evaluation import starter
        from triage.scoring.fit import FitRequest

        if engine is None:
            return
        request = FitRequest.of(config=self.options.config)
        if not starter.needs_fit(engine, pack, request):
            return

        def say(line: str) -> None:
            self.app.call_from_thread(self.notices.put, "starter", line[0].upper() + line[1:], "information")

        def progress(done: int, total: int) -> None:
            if done % 25 == 0 or done == total:
                say(f"fitting the starter head on triage's example tickets: {done} of {total} (zero-shot until then)")

        try:
            starter.ensure(engine, pack, request, say=say, progress=progress)
        except Exception:  # the starter is a convenience: it must never take the app down
            log.exception("fitting the starter head failed")

    def _count_labels_since_fit(self) -> None:
        """Start the auto re-fit's count from the labels given since this model and pack's stored head was
        learned (its file's time; every label when there is none), so that labels of earlier sessions count."""
        engine = self.host.engine
        if engine is None:
            return
        from triage.scoring.fitstore import head_name, heads_dir
        from triage.store import labels as lab

        path = heads_dir() / head_name(engine.sha256, self.pack.hash, engine.format_for("label").id)
        try:
            since = path.stat().st_mtime
        except OSError:
            since = 0.0
        try:
            self._labels_since_fit = lab.count_since(self.history, self.pack.hash, since)
        except Exception:  # the count is a convenience: a history that cannot say leaves it at 0
            log.exception("could not count the labels since the last re-fit")
            self._labels_since_fit = 0

    def _stand_in_notice(self, msg: ModelLoaded) -> str:
        if msg.notices:
            return "Stand-in model: " + " ".join(msg.notices)
        try:
            from triage.model.catalog import load_catalog
            from triage.model.installed import pull_command

            hint = f"; get it with `{pull_command(load_catalog().default)}`"
        except Exception:
            hint = ""
        return (
            f"Stand-in model: {msg.name} is running instead of {PRODUCT_MODEL}, so decisions are less reliable{hint}."
        )

    def on_model_load_failed(self, msg: ModelLoadFailed) -> None:
        if msg.load != self._load_seq:
            return
        self.model_state = "failed"
        self.status.failed()
        text = f"No model: {msg.message}."
        if msg.hint:
            text += f"\n{msg.hint[0].upper()}{msg.hint[1:]}."
        text += "\nThen restart triage, or pick a model with ctrl+p → Switch model."
        self.notices.put("model", text.replace("..", "."), "error")
        if self.pending is not None:
            sub, self.pending = self.pending, None
            sub.finished = True
            self.decisions.failed()
            self.summary.failed(sub.ticket.id, "no model is loaded")
        self.refresh_bindings()
        self.triage_app.model_unavailable(msg)

    # -- token count ------------------------------------------------------------------
    def on_ticket_edited(self, _msg: TicketEdited) -> None:
        self._request_count()
        self._mark_previous()

    def _mark_previous(self) -> None:
        """Dim and name the decisions on screen while the box holds another text than their ticket's
        (:func:`triage.tui.box_state.box_change`): they are the previous ticket's until F5 scores the box."""
        from triage.tui.box_state import box_change

        result = self.result
        change = (
            "same"
            if result is None
            else box_change(self.ticket.ticket_text, self.result_text, composing=self.composing)
        )
        previous = result.ticket_id if result is not None and change != "same" else None
        self.decisions.set_previous(previous)
        self.summary.set_previous(previous, reply=change == "added")

    def _request_count(self) -> None:
        text = self.ticket.ticket_text
        if self.composing and self.open_ticket is not None:  # the thread with the message being written
            text = self.open_ticket.text + ("\n\n" + text if text.strip() else "")
        self._count_stamp = stamp = time.monotonic()
        if not text.strip():
            self.ticket.border_subtitle = ""
            return
        if len(text) > 100_000:
            self.ticket.border_subtitle = "[dim]counting tokens…[/dim]"
        self._count(text, stamp, self.pack)

    @work(thread=True, exclusive=True, group="count", exit_on_error=False)
    def _count(self, text: str, stamp: float, pack: Pack) -> None:
        from triage.domain.ticket import clean_text
        from triage.scoring import debias
        from triage.scoring.loader import engine_settings
        from triage.tui.counting import count_ticket

        worker = get_current_worker()
        orderings = ScoreOptions().effective_orderings
        orders = [debias.orders_for(len(c.options), orderings) for c in pack.criteria]
        try:
            with self.host.borrow() as engine:  # kept open while we tokenize, even beside a running score
                speed = getattr(engine, "speed", None)  # the engine's measured rate: "about N s"
                if engine is not None:
                    builder, n_ctx = engine.builder(pack), engine.n_ctx
                else:
                    builder, n_ctx = None, engine_settings(self.options.n_ctx, None, self.options.config)["n_ctx"]
                counted = count_ticket(
                    clean_text(text),
                    pack,
                    orders,
                    builder=builder,
                    n_ctx=n_ctx,
                    cancelled=lambda: worker.is_cancelled,
                    speed=speed,
                )
        except TriageError as exc:  # e.g. the pack alone does not fit n_ctx
            log.warning("token count failed: %s", exc.message)
            return
        if counted is not None:
            self.post_message(
                TokensCounted(stamp, counted.tokens, counted.budget, counted.n_ctx, counted.estimated, counted.seconds)
            )

    def on_tokens_counted(self, msg: TokensCounted) -> None:
        if msg.stamp != self._count_stamp:
            return
        approx = "≈" if msg.estimated else ""
        when = f" · {about_seconds(msg.seconds)}" if msg.seconds is not None else ""
        if msg.tokens > msg.budget:
            what = "the thread will be compacted" if self.composing else "the middle will be cut"
            self.ticket.border_subtitle = (
                f"[$warning]⚠ {approx}{msg.tokens:,} tokens: over the {msg.budget:,}-token budget; {what}[/]{when}"
            )
        else:
            self.ticket.border_subtitle = f"{approx}{msg.tokens:,} tokens [dim]of {msg.budget:,}[/dim]{when}"

    # -- scoring ----------------------------------------------------------------------
    def on_ticket_pasted(self, _msg: TicketPasted) -> None:
        if self.auto_score:
            self.action_score()
        else:
            self._mark_previous()

    def action_score(self) -> None:
        """Score the ticket in the box (a running score is cancelled first).

        With a thread open and nothing typed in the editor, the thread is scored again;
        text in the editor is a new ticket.
        """
        text = self.ticket.ticket_text
        if self.composing and self.open_ticket is not None and not text.strip():
            self._submit(self.open_ticket, self.open_row)
            return
        try:
            ticket = make_ticket(text)
        except InputError as exc:
            self.notify(exc.message, severity="warning", markup=False)
            return
        if self.model_state == "failed":
            self.notify("No model is loaded; see the message at the top.", severity="error")
            return
        self._close_thread()
        self._submit(ticket, None)

    def action_reply(self, role: str) -> None:
        """Add the editor's text to the open ticket as its next message (``role``), then score it again.

        The ticket keeps its id, so the engine reuses what it kept of the ticket's last
        score; the reply is saved into the ticket's history row before scoring starts.
        Pressed while the editor still holds the scored ticket unchanged, the box turns
        to the thread and the editor empties for the reply. Text typed under the
        scored ticket (the ticket kept above it) is the reply.
        """
        key, what = REPLY_KEYS[role], REPLY_WORDS[role]
        base = self.open_ticket
        if base is None:
            self.notify(f"Score a ticket first (F5); {key} adds an {what} to the ticket on screen.", severity="warning")
            return
        if self.model_state == "failed":
            self.notify("No model is loaded; see the message at the top.", severity="error")
            return
        text = clean_text(self.ticket.ticket_text)
        if not self.composing:  # the editor holds the (plain) ticket on screen
            if not text or text == base.text:
                self._open_thread(base, scored=len(base.thread))
                self.notify(f"Type or paste the {what} in the box, then press {key} to add it and score again.")
                return
            if text.startswith(base.text):
                text = text[len(base.text) :].strip()
        if not text:
            self.notify(f"Type or paste the {what} in the box first, then press {key}.", severity="warning")
            return
        messages = [{"role": m.role, "text": m.text} for m in base.thread] + [{"role": role, "text": text}]
        try:
            ticket = make_ticket(None, base.id, messages)
        except InputError as exc:
            self.notify(exc.message, severity="warning", markup=False)
            return
        if self._submit(ticket, self.open_row):
            self._open_thread(ticket, scored=len(base.thread))

    def _open_thread(self, ticket: Ticket, *, scored: int | None = None) -> None:
        """Show ``ticket``'s messages above the editor, which is emptied for the next message and gets the focus
        (the reply is typed there; typed on a card, its letters and digits would answer the card)."""
        self.composing = True
        self.thread_view.show(ticket.id, ticket.thread, scored)
        self.ticket.replying = True
        self.ticket.set_ticket("")
        self.ticket.focus()
        self._request_count()

    def _close_thread(self) -> None:
        """The box is a plain editor again (a new ticket, or cleared)."""
        if self.composing:
            self.composing = False
            self.thread_view.hide()
        self.ticket.replying = False

    def _submit(self, ticket: Ticket, row: int | None) -> bool:
        """Save ``ticket`` (into ``row``, a thread's) and score it; False when no model can score it."""
        if self.model_state == "failed":
            self.notify("No model is loaded; see the message at the top.", severity="error")
            return False
        self._supersede()
        self._seq += 1
        sub = Submission(self._seq, ticket, self.pack)
        # saved now, in its own transaction: a crash keeps the ticket (and a thread's new message)
        sub.ticket_row = self._record(self.history.save_ticket, ticket, row=row)
        self.open_ticket, self.open_row = ticket, sub.ticket_row
        self.current = sub
        self._subs[sub.id] = sub
        self.result = self.result_text = None
        self.result_rows = (None, None)
        self.decisions.begin(self.pack, model_ready=self.model_state == "ready")
        if self.model_state == "ready":
            self._start(sub)
        else:
            self.pending = sub
            self.summary.queued(ticket.id)
        self.refresh_bindings()
        return True

    def _start(self, sub: Submission) -> None:
        engine = self.host.engine
        sub.started = True
        if sub.ticket_row is not None and engine is not None:
            pack = {"name": sub.pack.name, "version": sub.pack.version, "hash": sub.pack.hash}
            sub.score_id = self._record(
                self.history.start_score,
                sub.ticket_row,
                model=engine.model_info,
                pack=pack,
                orderings=sub.options.effective_orderings,
                messages=len(sub.ticket.thread),
            )
        self.summary.scoring(sub.ticket.id)
        self._score(sub)

    @work(thread=True, exclusive=True, group="score", exit_on_error=False)
    def _score(self, sub: Submission) -> None:
        from triage.scoring.engine import CriterionScored, Prefilled, Progress, TicketScored

        worker = get_current_worker()

        def stop() -> bool:
            return sub.cancel.is_set() or worker.is_cancelled

        try:
            with self.host.lock:  # llama.cpp is not thread-safe: one user at a time
                if not sub.claim():
                    return  # superseded or cancelled before its turn: the screen ended its history row
                engine = self.host.engine
                if engine is None:
                    raise TriageError("no model is loaded")
                options = sub.options  # what `triage score` scores with
                fits = self._stored_fits(engine, sub.pack, options)
                keep = sub.score_id is not None  # what a head reads, for learning later

                def progress(p: Progress) -> None:  # from inside a decode: only post
                    self.post_message(DecodeProgressed(sub.id, p.phase, p.done, p.total))

                for event in engine.score(
                    sub.ticket, sub.pack, options, cancel=stop, features=keep, progress=progress, **fits.engine_kwargs()
                ):
                    if isinstance(event, Prefilled):
                        self.post_message(TicketPrefilled(sub.id, event.tokens, event.prefill_ms, event.criteria))
                    elif isinstance(event, CriterionScored):
                        self.post_message(CriterionDecided(sub.id, event.result))
                    elif isinstance(event, TicketScored):
                        from triage.store.features import from_scored

                        kept = from_scored(event.readouts, event.features) if keep and event.result.complete else {}
                        self.post_message(TicketDecided(sub.id, event.result, kept))
        except TriageError as exc:
            self.post_message(ScoreFailed(sub.id, exc.message))
        except Exception as exc:
            log.exception("scoring ticket %s failed", sub.ticket.id)
            self.post_message(ScoreFailed(sub.id, f"{type(exc).__name__}: {exc}"))

    def _stored_fits(self, engine: ModelIdentity, pack: Pack, options: ScoreOptions) -> Fits:
        """What decides beside the readout: the learned head and calibration, by the one fit policy.

        The config's ``calibration`` is asked for as the CLI asks for it; when it does not fit,
        the notice says why and the ticket is scored without it. A stored head or calibration
        that is passed over (learned for another model, other options, damaged) is named in a
        notice, with why.
        """
        from triage.scoring.fit import FitRequest, choose_fits

        refused = None
        try:
            fits = choose_fits(engine, pack, options, FitRequest.of(config=self.options.config))
        except InputError as exc:  # the config's calibration file: it must not stop scoring
            refused = f"{exc.message}; scoring without it"
            fits = choose_fits(engine, pack, options, FitRequest(no_calibration=True))
        for about in ("head", "calibration"):
            said = fits.passed_over(about) + ([refused] if refused and about == "calibration" else [])
            if said:
                self.app.call_from_thread(self.notices.put, about, " ".join(said), "warning")
            else:
                self.app.call_from_thread(self.notices.drop, about)
        return fits

    def _is_current(self, submission: int) -> bool:
        return self.current is not None and self.current.id == submission

    def on_decode_progressed(self, msg: DecodeProgressed) -> None:
        sub = self._subs.get(msg.submission)
        if sub is None or not self._is_current(msg.submission) or sub.tokens is not None or sub.cancel.is_set():
            return  # stale, or past the prefill (the criteria line says the rest), or being cancelled
        left = sub.time_left(msg.phase, msg.done, msg.total, time.monotonic())
        self.summary.progress(sub.ticket.id, msg.phase, msg.done, msg.total, left)

    def on_ticket_prefilled(self, msg: TicketPrefilled) -> None:
        sub = self._subs.get(msg.submission)
        if sub is None or not self._is_current(msg.submission):
            return
        sub.tokens, sub.prefill_ms = msg.tokens, msg.prefill_ms
        self.decisions.prefilled()
        self.summary.scoring(sub.ticket.id, msg.tokens, msg.prefill_ms, 0, msg.criteria)

    def on_criterion_decided(self, msg: CriterionDecided) -> None:
        sub = self._subs.get(msg.submission)
        if sub is None or not self._is_current(msg.submission):
            return
        sub.decided += 1
        self.decisions.decided(msg.result)
        self.summary.scoring(sub.ticket.id, sub.tokens, sub.prefill_ms, sub.decided, len(sub.pack.criteria))

    def on_ticket_decided(self, msg: TicketDecided) -> None:
        sub = self._subs.pop(msg.submission, None)
        if sub is None:
            return
        sub.finished = True
        if sub.score_id is not None:  # history records every result, stale ones too
            self._record(self.history.finish_score, sub.score_id, msg.result)
            if msg.kept:
                self._keep_features(sub.score_id, msg.result, msg.kept)
        if not self._is_current(msg.submission):
            return
        self.result, self.result_text = msg.result, sub.ticket.text
        self.result_rows = (sub.ticket_row, sub.score_id)
        self.decisions.finish(msg.result)
        self._show_labels()
        self.summary.show(msg.result)
        if self.composing and self.open_ticket is not None:
            self.thread_view.show(self.open_ticket.id, self.open_ticket.thread, msg.result.thread.messages)
        self._mark_previous()  # the box may have been given another ticket while this one was scored
        if not msg.result.complete:
            self.notify(
                f"Scoring cancelled: {len(msg.result.criteria)} of {len(sub.pack.criteria)} criteria were done.",
                severity="warning",
            )
        self.refresh_bindings()

    def on_score_failed(self, msg: ScoreFailed) -> None:
        sub = self._subs.pop(msg.submission, None)
        if sub is None:
            return
        sub.finished = True
        if sub.score_id is not None:
            self._record(self.history.fail_score, sub.score_id, msg.message)
        if not self._is_current(msg.submission):
            return
        self.decisions.failed()
        self.summary.failed(sub.ticket.id, msg.message)
        self.notify(f"Scoring failed: {msg.message}", severity="error", timeout=10, markup=False)
        self.refresh_bindings()

    def action_cancel(self) -> None:
        """Stop the running score; the engine stops between tails."""
        sub = self.current
        if sub is None or sub.finished:
            return
        if not sub.started:
            self.pending = None
            sub.finished = True
            self._subs.pop(sub.id, None)
            self.decisions.cancelled()
            self.summary.idle()
            self.notify("Cancelled before scoring started.")
        else:
            sub.cancel.set()
            self.workers.cancel_group(self, "score")
            if self._abandon(sub):  # its worker had not begun: nothing will come back
                self.decisions.cancelled()
                self.summary.idle()
                self.notify("Cancelled before scoring started.")
            else:
                self.summary.cancelling(sub.ticket.id)
        self.refresh_bindings()

    def _supersede(self) -> None:
        """Cancel whatever is running or waiting; its result will be ignored."""
        sub = self.current
        if sub is not None and not sub.finished:
            sub.cancel.set()
            if not sub.started:
                self.pending = None
                sub.finished = True
                self._subs.pop(sub.id, None)
            else:
                self._abandon(sub)

    def _abandon(self, sub: Submission) -> bool:
        """End a started submission whose worker has not begun scoring (True), as cancelled in history.

        False: its worker is scoring it and will post the (cancelled) result itself.
        """
        if not sub.abandon():
            return False
        sub.finished = True
        self._subs.pop(sub.id, None)
        if sub.score_id is not None:
            self._record(self.history.cancel_score, sub.score_id)
        return True

    @property
    def scoring(self) -> bool:
        """A submission is running or waiting for the model."""
        return self.current is not None and not self.current.finished

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":
            return True if self.scoring else None
        if action in ("export", "copy_summary", "label"):
            return True if self.result is not None else None
        if action == "reply":  # hidden until there is a ticket to reply to
            return True if self.open_ticket is not None else False
        if action == "timeline":
            return True if self.open_row is not None and self.result is not None else False
        return True

    # -- history, export, clipboard ---------------------------------------------------
    def _record(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        """Write to history; a failure is shown, never fatal (scoring goes on)."""
        from triage.store.history_faults import HistoryFault

        try:
            return fn(*args, **kwargs)
        except (sqlite3.Error, HistoryFault) as exc:  # locked, read-only, a full disk: said, never fatal
            log.exception("history write failed")
            self.notify(f"Could not save to history: {exc}", severity="error", timeout=10, markup=False)
            return None

    def reopen(self, saved: SavedScore) -> None:
        """Show a ticket from history with its decisions."""
        self._supersede()
        self.current = None
        self.open_row = saved.ticket_row
        if saved.is_thread:  # the whole thread, so that more replies can be added
            messages = [{"role": m.role, "text": m.text} for m in saved.messages]
            self.open_ticket = make_ticket(None, saved.ticket_id, messages)
            self._open_thread(self.open_ticket, scored=saved.scored)
        else:
            self._close_thread()
            self.ticket.set_ticket(saved.text)
            try:
                self.open_ticket = make_ticket(saved.text, saved.ticket_id)
            except InputError:
                self.open_ticket = None
        self.result, self.result_text = saved.result, saved.text
        self.result_rows = (saved.ticket_row, saved.score_id)
        if saved.result is not None:
            self.decisions.show_result(saved.result)
            self._show_labels()
            self.summary.show(
                saved.result, reopened_at=saved.result.created_at or None, of_messages=len(saved.messages) or 1
            )
            self._mark_previous()
        else:
            self.decisions.show_pack(self.pack)
            note = {
                "running": "its scoring never finished",
                "failed": f"its scoring failed: {saved.error}",
                "cancelled": "its scoring was cancelled before it began",
            }.get(saved.status, "never scored")
            self.summary.update(
                f"ticket [b]{escape(saved.ticket_id)}[/b] "
                f"[dim](from history)[/dim] · {escape(note)}. Press F5 to score it."
            )
        self.ticket.focus()
        self.refresh_bindings()

    def on_paste(self, event: events.Paste) -> None:
        """A paste while a card has the focus (the agent was labelling) is the next ticket: it goes to the box.

        The box's last ticket is in the history already (F2), so the new paste replaces it. With a
        thread open the box holds its next message: the paste goes there too (F5 would make it a new
        ticket, F8/F9/F10 a reply).
        """
        if self.focused is self.ticket or isinstance(self.focused, TicketInput):
            return
        event.stop()
        # the box's ticket is in the history already; a message being written to a thread is kept (the paste adds to it)
        if self.result is not None and self.ticket.ticket_text.strip() and not self.composing:
            self.ticket.set_ticket("")
        self.ticket.focus()
        self.ticket.post_message(events.Paste(event.text))

    # -- labels and learning ----------------------------------------------------------
    def _keep_features(self, score_id: int, result: TicketResult, kept: dict[str, Any]) -> None:
        from triage.store import features as feat

        ident = feat.Identity(result.model.get("sha256", ""), result.prompt_format, result.pack.get("hash", ""))
        keep = self.options.settings.keep_features
        self._record(feat.save, self.history, score_id, ident, kept, keep=keep)

    @property
    def auto_learn_every(self) -> int | None:
        """Re-fit after this many new labels (config ``auto_learn``, ``auto_learn_every``), or None when off."""
        settings = self.options.settings
        if not settings.auto_learn:
            return None
        return max(1, int(settings.auto_learn_every))

    def action_learn(self) -> None:
        """Re-fit the learned head from the history's labels now, in the background."""
        engine = self.host.engine
        if engine is None:
            self.notify("Learning needs a loaded model.", severity="warning")
            return
        if self.history.path is None:
            self.notify("Learning needs a history file; this session keeps history in memory only.", severity="warning")
            return
        self._labels_since_fit = 0
        self.notices.put("learn", f"Learning from the history's labels for pack {self.pack.name}…", "information")
        self._relearn(engine, self.pack, self.history.path)

    @work(thread=True, exclusive=True, group="learn", exit_on_error=False)
    def _relearn(self, engine: Any, pack: Pack, path: Path) -> None:
        from triage.evaluation.relearn import learn_from_history

        t0 = time.monotonic()
        try:
            from triage.scoring.fit import starter_on

            outcome = learn_from_history(path, engine, pack, starter=starter_on(self.options.config))
        except Exception as exc:  # a failed re-fit must never take the app down
            log.exception("re-learning from the history failed")
            self.post_message(HeadLearned(None, 0, time.monotonic() - t0, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(HeadLearned(outcome.head, outcome.labels, time.monotonic() - t0, outcome.why, outcome.notes))

    def on_head_learned(self, msg: HeadLearned) -> None:
        if msg.head is None:
            self.notices.put("learn", f"Not re-learned from {msg.labels} label(s): {msg.why}", "warning")
            return
        crits = ", ".join(sorted(msg.head.criteria))
        self.notices.put(
            "learn",
            f"Learned from {msg.labels} labels in {msg.seconds:.1f} s ({crits}); the next "
            "ticket uses it." + (" " + " ".join(msg.notes) if msg.notes else ""),
            "information",
        )

    # -- labels -----------------------------------------------------------------------
    def action_label(self) -> None:
        """Move to the first card not yet answered, to confirm or correct it."""
        cards = [c for c in self.decisions.cards if c.result is not None]
        if self.result is None or not cards:
            self.notify("Nothing to label yet: score a ticket first.", severity="warning")
            return
        if self.summary.previous is not None:
            self.notify(
                f"The cards are the previous ticket {self.summary.previous}'s decisions: press F5 to score the box "
                "first (or F2 to reopen that ticket).",
                severity="warning",
                markup=False,
            )
            return
        next((c for c in cards if c.answer is None), cards[0]).focus()

    def _show_labels(self) -> None:
        """Show on its cards the agent's labels that stand for the result on screen: given on it, or carried
        from an earlier score of the thread (:mod:`triage.store.label_marks`)."""
        from triage.store.label_marks import standing_for

        ticket_row = self.result_rows[0]
        if ticket_row is None or self.result is None:
            return
        standing = self._record(standing_for, self.history, ticket_row, self.result) or {}
        for card in self.decisions.cards:
            label = standing.get(card.spec.id)
            if label is not None and card.result is not None:
                card.set_answer(label.option, given_at=label.given_at if label.carried else None)

    def on_criterion_card_answered(self, msg: CriterionCard.Answered) -> None:
        """Store the agent's answer as a label, in its own transaction, then move to the next open card."""
        from triage.store import labels as lab

        msg.stop()
        ticket_row, score_id = self.result_rows
        if self.result is None or self.result_text is None:
            msg.card.set_answer(None)
            self.notify("Wait for the score to finish, then answer.", severity="warning")
            return
        if ticket_row is None or score_id is None:
            msg.card.set_answer(None)
            self.notify(
                "Label not saved: the history cannot be written (see the notice at the top).",
                severity="error",
                timeout=10,
            )
            return
        scored = lab.ScoredTicket(ticket_row, self.result.ticket_id, self.result_text, score_id, self.result)
        try:
            stored = self._record(
                lab.record, self.history, scored, [lab.Answer(msg.criterion, msg.option)], origin="app"
            )
        except InputError as exc:  # an answer the result does not know: never stored
            msg.card.set_answer(None)
            self.notify(exc.message, severity="error", markup=False)
            return
        if not stored:
            msg.card.set_answer(None)  # the write failed; _record said so
            return
        self._labels_since_fit += 1
        every = self.auto_learn_every
        if every is not None and self._labels_since_fit >= every:
            self.action_learn()
        cards = [c for c in self.decisions.cards if c.result is not None]
        later = cards[cards.index(msg.card) + 1 :] if msg.card in cards else []
        nxt = next((c for c in later if c.answer is None), None)
        if nxt is not None:
            nxt.focus()

    def action_timeline(self) -> None:
        """Show how each criterion's choice and confidence moved over the open thread's messages."""
        from triage.tui.screens.timeline import TimelineScreen

        if self.open_row is None or self.result is None:
            self.notify("No timeline yet: score a ticket first, then add replies (F8, F9).", severity="warning")
            return
        self.app.push_screen(TimelineScreen(self.history, self.open_row, self.result))

    def action_export(self, fmt: str = "json") -> None:
        """Ask where to export the decisions on screen, then write them."""
        from triage.tui.screens.export import ExportRequest, ExportScreen

        result = self.result
        if result is None:
            self.notify("Nothing to export yet: score a ticket first.", severity="warning")
            return

        def done(request: ExportRequest | None) -> None:
            if request is not None:
                self.export_to(request.path, request.fmt)

        self.app.push_screen(ExportScreen(result, fmt, Path.cwd()), done)

    def export_to(self, path: Path, fmt: str) -> Path | None:
        """Write the decisions on screen to ``path`` as ``json`` or ``markdown``."""
        from triage.store.export import export_result

        if self.result is None:
            return None
        try:
            written = export_result(self.result, path, fmt=fmt, ticket_text=self.result_text)
        except (OSError, ValueError, TriageError) as exc:  # the output guard refuses a folder, a database
            self.notify(f"Export failed: {exc}", severity="error", timeout=10, markup=False)
            return None
        self.notify(f"Exported {fmt.upper() if fmt == 'json' else 'Markdown'} to {written}", markup=False)
        return written

    def action_copy_summary(self) -> None:
        """Copy the one-line summary of the decisions on screen."""
        if self.result is None:
            self.notify("Nothing to copy yet: score a ticket first.", severity="warning")
            return
        line = self.result.summary()
        self.app.copy_to_clipboard(line)
        self.notify(f"Copied: {line}", markup=False)

    # -- settings ---------------------------------------------------------------------
    def action_clear(self) -> None:
        """Empty the ticket box and the cards."""
        if self.scoring:
            self.action_cancel()
        self.current = None
        self.open_ticket, self.open_row = None, None
        self._close_thread()
        self.ticket.set_ticket("")
        self.ticket.border_subtitle = ""
        self.result = self.result_text = None
        self.result_rows = (None, None)
        self.decisions.show_pack(self.pack)
        self.summary.idle()
        self.ticket.focus()
        self.refresh_bindings()

    def set_pack(self, pack: Pack) -> None:
        """Score with another criteria pack from now on."""
        self.pack = pack
        self._count_labels_since_fit()
        self._show_settings()
        if not self.scoring:
            self.decisions.show_pack(pack)
            self.result = self.result_text = None
            self.summary.idle()
        self._request_count()
        self.notify(f"Pack {pack.name} v{pack.version}: {len(pack.criteria)} criteria.", markup=False)
        self.refresh_bindings()

    def action_toggle_auto_score(self) -> None:
        """Score as soon as a ticket is pasted (remembered in the config)."""
        from triage.store.config import save_config

        self.auto_score = not self.auto_score
        self._show_settings()
        try:
            save_config({"auto_score": self.auto_score})
        except (OSError, TriageError) as exc:
            log.warning("could not save auto_score: %s", exc)
        self.notify(f"Auto-score after paste {'on' if self.auto_score else 'off'}.")

    def end_unfinished(self) -> None:
        """The app is closing: a score still open ends as cancelled in history.

        Its worker's (cancelled) result is a message that no screen will read any more;
        without this its row would say "unfinished" for ever.
        """
        for sub in list(self._subs.values()):
            if sub.started and not sub.finished and sub.score_id is not None:
                self.history.cancel_score(sub.score_id)
            sub.finished = True
        self._subs.clear()

    def stop_all(self) -> None:
        """Cancel running work (the app is closing)."""
        self._supersede()
        self.workers.cancel_group(self, "score")
        self.workers.cancel_group(self, "count")
