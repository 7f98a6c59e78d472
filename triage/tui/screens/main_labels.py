"""The main screen's labels and learning: agents' answers on the cards, re-fitting the head, exports.

An answer on a criterion card is recorded in the history by the desk (:mod:`triage.tui.desk`);
every ``auto_learn_every`` labels (or F-key "learn") the head is fitted again in a thread worker
(``learn``). The labels view, the timeline, exports and the clipboard copy live here too.

Mixed into :class:`~triage.tui.screens.main.MainScreen`, whose state (``host``, ``history``, ``pack``, the
submissions) it works on; Textual finds its message handlers and actions through the screen's MRO.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work

from triage.domain.pack import Pack
from triage.errors import InputError, TriageError
from triage.scoring.protocol import AppEngine
from triage.tui.messages import HeadLearned
from triage.tui.widgets.criterion_card import CriterionCard

log = logging.getLogger(__name__)


if TYPE_CHECKING:  # the screen's state and widgets, for the type checker (main_state.py)
    from triage.store.label_marks import Standing
    from triage.tui.screens.main_state import MainState as _Screen
else:
    _Screen = object


class LabelsPart(_Screen):
    """The main screen's labels, re-fitting, timeline, exports and clipboard."""

    # -- labels and learning ----------------------------------------------------------
    def action_learn(self) -> None:
        """Re-fit the learned head from the history's labels now, in the background."""
        engine = self.host.engine
        if engine is None:
            self.notify("Learning needs a loaded model.", severity="warning")
            return
        if self.history.path is None:
            self.notify("Learning needs a history file; this session keeps history in memory only.", severity="warning")
            return
        self.desk.labels_since_fit = 0
        self.notices.put("learn", f"Learning from the history's labels for pack {self.pack.name}…", "information")
        self._relearn(engine, self.pack, self.history.path)

    @work(thread=True, exclusive=True, group="learn", exit_on_error=False)
    def _relearn(self, engine: AppEngine, pack: Pack, path: Path) -> None:
        from triage.learning.relearn import learn_from_history

        t0 = time.monotonic()
        try:
            from triage.session import starter_on

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
        for note in msg.notes:  # the fit's own terms (C, balanced accuracy, backoff): for the log, not the agent
            log.info("re-fit note: %s", note)
        more = f" {len(msg.notes)} note(s) on the fit are in triage.log." if msg.notes else ""
        self.notices.put(
            "learn",
            f"Learned from {msg.labels} labels in {msg.seconds:.1f} s ({crits}); the next ticket uses it.{more}",
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
        if self.result is None:
            return
        standing = self.standing_labels()
        for card in self.decisions.cards:
            label = standing.get(card.spec.id)
            if label is not None and card.result is not None:
                card.set_label(label)

    def standing_labels(self) -> dict[str, Standing]:
        """The agent's labels that stand for the result on screen, by criterion (empty: none, or no history)."""
        from triage.store.label_marks import standing_for

        ticket_row = self.result_rows[0]
        if ticket_row is None or self.result is None:
            return {}
        return self.desk.record(standing_for, self.history, ticket_row, self.result) or {}

    def on_criterion_card_answered(self, msg: CriterionCard.Answered) -> None:
        """Store the agent's answer as a label, in its own transaction, then move to the next open card."""
        msg.stop()
        if self.result is None or self.result_text is None:
            msg.card.set_answer(None)
            self.notify("Wait for the score to finish, then answer.", severity="warning")
            return
        if None in self.result_rows:
            msg.card.set_answer(None)
            self.notify(
                "Label not saved: the history cannot be written (see the notice at the top).",
                severity="error",
                timeout=10,
            )
            return
        try:
            stored = self.desk.answer(self.result, self.result_text, self.result_rows, msg.criterion, msg.option)
        except InputError as exc:  # an answer the result does not know: never stored
            msg.card.set_answer(None)
            self.notify(exc.message, severity="error", markup=False)
            return
        if not stored:
            msg.card.set_answer(None)  # the write failed; the desk said so
            return
        if self.desk.learn_due:
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
            written = export_result(
                self.result, path, fmt=fmt, ticket_text=self.result_text, labels=self.standing_labels()
            )
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
        from triage.store.export import summary_line

        line = summary_line(self.result, self.standing_labels())
        self.app.copy_to_clipboard(line)
        self.notify(f"Copied: {line}", markup=False)
