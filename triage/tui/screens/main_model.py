"""The main screen's model: loading it (and the tokenizer), fitting the starter head, the token count.

* ``model``: the engine loads in a thread worker at start and on "switch model"; a failure is
  said on the screen (and the app may offer the first-run screen);
* ``starter``: the built-in pack's starter head is fitted once, after the model is up;
* ``count``: the ticket's token count, debounced, so typing and huge pastes stay smooth.

Mixed into :class:`~triage.tui.screens.main.MainScreen`, whose state (``host``, ``history``, ``pack``, the
submissions) it works on; Textual finds its message handlers and actions through the screen's MRO.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from textual import work
from textual.worker import get_current_worker

from triage.domain.pack import Pack
from triage.errors import TriageError
from triage.scoring.protocol import AppEngine
from triage.tui.messages import ModelLoaded, ModelLoadFailed, TicketEdited, TokensCounted
from triage.tui.widgets.score_summary import PRODUCT_MODEL, about_seconds

log = logging.getLogger(__name__)


if TYPE_CHECKING:  # the screen's state and widgets, for the type checker (main_state.py)
    from triage.tui.screens.main_state import MainState as _Screen
else:
    _Screen = object


class ModelPart(_Screen):
    """The main screen's model loading and token count."""

    # -- model ------------------------------------------------------------------------
    def load_model(self, requested: str | None) -> None:
        """Load (or switch to) a model in the background; the UI stays live."""
        self.desk.supersede()
        self.stop_prefill()  # the load waits for the engine's lock: a read-ahead gives it up at once
        self.model_state = "loading"
        self.status.loading_model(requested)
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
        if self.desk.pending is not None:
            sub, self.desk.pending = self.desk.pending, None
            self._start(sub)
        self._request_count()
        self.refresh_bindings()

    @work(thread=True, exclusive=True, group="starter", exit_on_error=False)
    def _fit_starter(self, engine: AppEngine | None, pack: Pack) -> None:
        """The built-in pack's starter head on this model's first use (triage.learning.starter), in the
        background: tickets are scored zero-shot until it is stored, then the fit policy applies it."""
        if engine is None:
            return
        session = self.desk.session(engine)
        if not session.starter_due(pack):
            return

        def say(line: str) -> None:
            self.app.call_from_thread(self.notices.put, "starter", line[0].upper() + line[1:], "information")

        def progress(done: int, total: int) -> None:
            if done % 25 == 0 or done == total:
                say(f"fitting the starter head on triage's example tickets: {done} of {total} (zero-shot until then)")

        try:
            session.ensure_starter(pack, say=say, progress=progress)
        except Exception:  # the starter is a convenience: it must never take the app down
            log.exception("fitting the starter head failed")

    def _count_labels_since_fit(self) -> None:
        """Start the auto re-fit's count from the labels given since the stored head was learned (the desk's)."""
        if self.host.engine is not None:
            self.desk.count_labels_since_fit(self.host.engine, self.pack)

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
        if self.desk.pending is not None:
            sub, self.desk.pending = self.desk.pending, None
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
        self.ticket.scored_text = self.result_text if result is not None and not self.composing else None
        self.decisions.set_previous(previous)
        self.summary.set_previous(previous, reply=change == "added")

    def _request_count(self) -> None:
        text = self.ticket.ticket_text
        if self.composing and self.open_ticket is not None:  # the thread with the message being written
            text = self.open_ticket.text + ("\n\n" + text if text.strip() else "")
        self._count_stamp = stamp = time.monotonic()
        self.ticket.border_subtitle = ""  # a count is of the text it describes: until the new one is in, none
        if not text.strip():
            return
        if len(text) > 100_000:
            self.ticket.border_subtitle = "[dim]counting tokens…[/dim]"
        # what the last score of this pack measured: its tails, and for a reply the thread's tokens it kept
        last = self.result if self.result is not None and self.result.pack.get("hash") == self.pack.hash else None
        tails = last.tokens.tails if last is not None and last.complete else None
        kept = last.tokens.ticket if last is not None and last.complete and self.composing else 0
        self._count(text, stamp, self.pack, tails, kept)

    @work(thread=True, exclusive=True, group="count", exit_on_error=False)
    def _count(self, text: str, stamp: float, pack: Pack, tails: int | None = None, kept: int = 0) -> None:
        from triage.domain.ticket import clean_text
        from triage.scoring.loader import engine_settings
        from triage.scoring.readout import LABEL
        from triage.tui.counting import count_ticket

        worker = get_current_worker()
        orders = [LABEL.orders(len(c.options)) for c in pack.criteria]  # the product's: one order, by name
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
                    tails=tails,
                    kept=kept,
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
            line = f"[$warning]⚠ {approx}{msg.tokens:,} tokens: over the {msg.budget:,}-token budget; {what}[/]{when}"
        else:
            line = f"{approx}{msg.tokens:,} tokens [dim]of {msg.budget:,}[/dim]{when}"
        if self.composing:  # the count is the thread's (with the message being written): said on the thread's edge
            with_it = " with this message" if self.ticket.ticket_text.strip() else ""
            self.thread_view.border_subtitle = f"thread{with_it}: {line}"
            self.ticket.border_subtitle = ""
        else:
            self.ticket.border_subtitle = line
