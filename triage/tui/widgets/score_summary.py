"""The ticket summary: timings, prefix cache use, model and pack of the result on screen."""

from __future__ import annotations

import time

from textual.markup import escape
from textual.visual import VisualType
from textual.widgets import Static

from triage.domain.result import TicketResult, Tokens, readout_words

PRODUCT_MODEL = "Qwen3-0.6B"


BAR_CELLS = 24
PHASES = {"stable": "preparing the pack (once)", "ticket": "reading the ticket"}


def _ms(ms: float) -> str:
    """A duration as people read it: ms below 10 s, then seconds with one decimal."""
    return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def about_seconds(seconds: float) -> str:
    """An expected duration, as rough as it is: ``under 1 s``, ``about 3 s``, ``about 2 min``."""
    if seconds < 1:
        return "under 1 s"
    if seconds < 90:
        return f"about {seconds:.0f} s"
    return f"about {seconds / 60:.0f} min"


def bar(share: float, cells: int = BAR_CELLS) -> str:
    """A text progress bar of ``cells`` cells, ``share`` (0-1) of them full."""
    full = max(0, min(cells, round(share * cells)))
    return f"[$accent]{'━' * full}[/][dim]{'─' * (cells - full)}[/dim]"


class ScoreSummary(Static):
    """One or two short lines under the ticket box.

    A finished result is said in an agent's words (the ticket, how long it took, the model and pack, what
    decided, the thread); the engine's figures (prefill, prefix tokens and their cache, the readout, what a
    thread's score evaluated and reused) are its *details*, shown instead while :attr:`details` is on
    (ctrl+o). While the box holds another text than the result's ticket (:meth:`set_previous`), a first line
    says whose decisions these are and the lines under it are dimmed.
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        # this session's prefix cache use, over every ticket scored (not reopened)
        self.session_cached = 0
        self.session_input = 0
        self.session_tickets = 0
        self.previous: str | None = None  # the result's ticket id, once the box holds another text
        self._shown = ""
        self._previous_line = ""
        self._reply = False
        self.details = False  # the engine's figures instead of the brief lines (ctrl+o)
        self.brief_text = ""  # the last result's lines, both ways ("" while no result is shown)
        self.details_text = ""
        self.idle()

    def toggle_details(self) -> bool:
        """Show the engine's figures instead of the brief lines, or back; returns whether details are on."""
        self.details = not self.details
        if self.brief_text:
            previous = self.previous
            self.update(self.details_text if self.details else self.brief_text)
            if previous is not None:
                self.set_previous(previous, reply=self._reply)
        return self.details

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        """Show ``content`` (every state below comes through here); a previous mark is dropped."""
        self.previous, self._previous_line = None, ""
        self.remove_class("-previous")
        self._shown = content if isinstance(content, str) else ""
        if self._shown not in (self.brief_text, self.details_text):
            self.brief_text = self.details_text = ""  # another state: no result on show
        super().update(content, layout=layout)

    def set_previous(self, ticket_id: str | None, *, reply: bool = False) -> None:
        """Say that the result shown is the previous ticket ``ticket_id``'s (None: it is the box's again).

        ``reply``: the box holds that ticket with text added under it (F8/F9/F10 would add it as a reply).
        """
        self._reply = reply
        if ticket_id is None:
            if self.previous is not None:
                self.update(self._shown)
            return
        what = (
            "F8/F9/F10 add the text under it as a reply; F5 scores the box as a new ticket"
            if reply
            else "F5 scores the box"
        )
        line = (
            f"[$warning]⚠ previous ticket [b]{escape(ticket_id)}[/b]: the box has changed since these "
            f"decisions; {what}.[/]"
        )
        if line == self._previous_line:
            return
        shown = self._shown
        super().update(line + ("\n[dim]" + shown + "[/dim]" if shown else ""))
        self.previous, self._previous_line = ticket_id, line
        self.add_class("-previous")

    @property
    def session_hit_rate(self) -> float | None:
        """Cached input tokens / input tokens over the tickets scored since the app started."""
        return self.session_cached / self.session_input if self.session_input else None

    def idle(self) -> None:
        """An empty form: nothing scored yet, or cleared for the next ticket."""
        if not self.session_tickets:
            self.update("[dim]No ticket scored yet. Paste a ticket and press [b]F5[/b] to score it.[/dim]")
            return
        n, rate = self.session_tickets, self.session_hit_rate or 0.0
        self.update(
            f"[dim]Paste the next ticket and press [b]F5[/b]. This session: {n} ticket{'' if n == 1 else 's'}, "
            f"prefix hit rate {rate:.0%}.[/dim]"
        )

    def queued(self, ticket_id: str) -> None:
        """Submitted while the model is still loading."""
        self.update(f"ticket [b]{escape(ticket_id)}[/b] · [$accent]waiting for the model to load…[/]")

    def scoring(
        self,
        ticket_id: str,
        tokens: Tokens | None = None,
        prefill_ms: float | None = None,
        done: int = 0,
        total: int = 0,
    ) -> None:
        """Scoring is under way."""
        if tokens is None:
            self.update(
                f"ticket [b]{escape(ticket_id)}[/b] · [$accent]reading the ticket (prefill)…[/]  [dim]esc cancels[/dim]"
            )
            return
        self.update(
            f"ticket [b]{escape(ticket_id)}[/b] · [$accent]{done} of {total} decided…[/]  [dim]esc cancels[/dim]"
        )

    def progress(self, ticket_id: str, phase: str, done: int, total: int, left: float | None = None) -> None:
        """The decode is under way: a bar of the tokens done, and the time left when it can be told."""
        share = min(1.0, done / total) if total else 1.0
        rest = f" · {about_seconds(left)} left" if left is not None else ""
        self.update(
            f"ticket [b]{escape(ticket_id)}[/b] · [$accent]{PHASES.get(phase, phase)}[/] {bar(share)} "
            f"{share:.0%} · {done:,} of {total:,} tokens{rest}  [dim]esc cancels[/dim]"
        )

    def cancelling(self, ticket_id: str) -> None:
        """Esc was pressed; the engine stops between tails."""
        self.update(f"ticket [b]{escape(ticket_id)}[/b] · [$warning]cancelling…[/]")

    def failed(self, ticket_id: str, message: str) -> None:
        """Scoring stopped with an error."""
        self.update(f"ticket [b]{escape(ticket_id)}[/b] · [$error]scoring failed: {escape(message)}[/]")

    def show(
        self,
        result: TicketResult,
        *,
        reopened_at: float | None = None,
        of_messages: int | None = None,
        read: tuple[int, int] | None = None,
    ) -> None:
        """A finished (or cancelled, or reopened) result.

        ``of_messages``: the thread's messages now, when a reopened score decided on fewer. ``read``: of a
        cancelled score, the tokens its decode had read when it stopped, of how many (the last progress); a
        cancelled score says what it did, never the prefill and evaluated tokens of a read that did not end.
        """
        t, tok, model = result.timing, result.tokens, result.model
        head = f"[b]{escape(result.ticket_id)}[/b]"
        if reopened_at is not None:
            head += f" [dim](from history, {time.strftime('%Y-%m-%d %H:%M', time.localtime(reopened_at))})[/dim]"
        if not result.complete:
            head += " · [$warning]cancelled[/]"
        if reopened_at is None:
            self.session_cached += tok.prefix_cached
            self.session_input += tok.total_input
            self.session_tickets += 1
        session = ""
        if self.session_hit_rate is not None and self.session_tickets > 1:  # for one ticket it is the ticket's
            session = f"; session {self.session_hit_rate:.0%}, {self.session_tickets} tickets"
        line1 = (
            f"prefill {_ms(t.prefill_ms)} · total {_ms(t.total_ms)} · "
            f"prefix {tok.prefix} tok, {tok.prefix_cached} cached (hit rate {tok.hit_rate:.0%}{session})"
        )
        if not result.complete:
            line1 = f"cancelled after {_ms(t.total_ms)}: " + cancelled_words(result, read)
        stand_in = f" [$warning](stand-in, not {PRODUCT_MODEL})[/]" if model.get("stand_in") else ""
        line2 = (
            f"{head} · {escape(str(model.get('name')))}{stand_in} · pack {escape(str(result.pack.get('name')))} "
            f"v{escape(str(result.pack.get('version')))} · {escape(readout_words(result.readout, result.orderings))}"
        )
        learned = [c.id for c in result.criteria if c.source == "learned"]
        if result.head and learned:
            line2 += f" · learned head [b]{escape(result.head)}[/b] ({escape(', '.join(learned))})"
        starter = [c.id for c in result.criteria if c.source == "starter"]
        if starter:
            line2 += f" · [b]starter[/b] head, from triage's own examples ({escape(', '.join(starter))})"
        if result.calibration and any(c.source == "calibrated" for c in result.criteria):
            line2 += f" · calibration {escape(result.calibration)}"
        lines = [line1, line2]
        thread = thread_line(result, of_messages) if result.complete else None
        if thread:
            lines.append(thread)
        warnings = [f"[$warning]⚠ {escape(w)}[/]" for w in result.warnings + card_notes(result)]
        self.details_text = "\n".join(lines + warnings + ["[dim]ctrl+o: the short form[/dim]"])
        self.brief_text = "\n".join([brief_line(result, reopened_at, of_messages), *warnings])
        self.update(self.details_text if self.details else self.brief_text)


def brief_line(result: TicketResult, reopened_at: float | None = None, of_messages: int | None = None) -> str:
    """A finished result in an agent's words: ``ID · scored in 0.6 s · MODEL (stand-in) · pack P v3 · starter
    head · thread of 2 messages`` and where the details are (ctrl+o)."""
    model = result.model
    parts = [f"[b]{escape(result.ticket_id)}[/b]"]
    if reopened_at is not None:
        parts[0] += f" [dim](from history, {time.strftime('%Y-%m-%d %H:%M', time.localtime(reopened_at))})[/dim]"
    if not result.complete:
        parts.append(f"[$warning]cancelled after {len(result.criteria)} decision(s)[/]")
    else:
        parts.append(f"scored in {_seconds(result.timing.total_ms)}")
    stand_in = " [$warning](stand-in)[/]" if model.get("stand_in") else ""
    parts.append(f"{escape(str(model.get('name')))}{stand_in}")
    parts.append(f"pack {escape(str(result.pack.get('name')))} v{escape(str(result.pack.get('version')))}")
    sources = {c.source for c in result.criteria}
    if result.head and "learned" in sources:
        parts.append(f"learned head [b]{escape(result.head)}[/b]")
    if "starter" in sources:
        parts.append("[b]starter[/b] head")
    if result.calibration and "calibrated" in sources:
        parts.append("calibrated")
    n = result.thread.messages
    if n > 1 or (of_messages or 0) > 1:
        thread = f"thread of {n} message{'' if n == 1 else 's'}"
        if of_messages is not None and of_messages > n:
            thread += f" [dim](now {of_messages}: these decisions are on the first {n})[/dim]"
        parts.append(thread)
    return " · ".join(parts) + "  [dim]ctrl+o details[/dim]"


def card_notes(result: TicketResult) -> list[str]:
    """What the cards' short warnings mean, once for the screen: ``low coverage on queue, urgency: …``."""
    low = [c for c in result.criteria if any(w.startswith("low coverage:") for w in c.warnings)]
    if not low:
        return []
    return [
        f"low coverage on {', '.join(c.id for c in low)}: the model's next word was mostly none of the options, "
        f"so {'that decision is' if len(low) == 1 else 'those decisions are'} less sure"
    ]


def cancelled_words(result: TicketResult, read: tuple[int, int] | None) -> str:
    """What a cancelled score did: the tokens its read got through (when known) and the decisions it made."""
    n = len(result.criteria)
    if n:
        done = f"{n} decision{'' if n == 1 else 's'} made before the stop"
    elif read is not None and read[1]:
        done = f"read {read[0]:,} of {read[1]:,} tokens ({read[0] / read[1]:.0%}), no decision made"
    else:
        done = "stopped before the read finished, no decision made"
    return done


def _seconds(ms: float) -> str:
    """A score's time: ``0.4 s``, ``12 s``."""
    return f"{ms / 1000:.1f} s" if ms < 10_000 else f"{ms / 1000:.0f} s"


def thread_line(result: TicketResult, of_messages: int | None = None) -> str | None:
    """What scoring a thread cost and reused: ``evaluated 105 tokens, reused 114 of the thread``.

    None for a plain ticket scored afresh (line 1 says it all). Says when an earlier message
    was edited (read again from there) and when the thread was compacted.
    """
    th, tok = result.thread, result.tokens
    if th.messages <= 1 and not th.previous and not (of_messages or 0) > 1:
        return None
    n = th.messages
    what = "thread" if n > 1 else "ticket"
    head = f"[b]{what}[/b] of {n} message{'' if n == 1 else 's'}" if n > 1 else "[b]ticket[/b]"
    if of_messages is not None and of_messages > n:
        head += f" [dim](now {of_messages}: these decisions are on the first {n})[/dim]"
    if th.reused:
        cost = f"evaluated {tok.evaluated} tokens, reused {th.reused} of the {what}"
        if th.previous:
            cost += f" (kept from its score at {th.previous} message{'' if th.previous == 1 else 's'})"
    else:
        cost = f"evaluated {tok.evaluated} tokens, reused none of the {what}"
    parts = [head, cost]
    if th.edited is not None:
        parts.append(f"[$warning]message {th.edited} was edited: read again from there[/]")
    if th.dropped:
        moved = "; the cut moved, read again from there" if th.compaction_moved else ""
        parts.append(f"[$warning]compacted: messages 2-{th.dropped + 1} left out{moved}[/]")
    return " · ".join(parts)
