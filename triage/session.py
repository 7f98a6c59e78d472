"""One scoring session: the engine, the fit policy and the history keeper, for every front end.

This is the only module that combines scoring, the fit policy and the history. ``triage score``,
``triage serve``'s engine thread, the app (through :class:`triage.tui.desk.Desk`) and the Ray workers
score through a :class:`Session`:

- :meth:`Session.fits`: the head and calibration the one policy (:func:`~triage.scoring.fit.choose_fits`)
  chooses *now*, so a head stored while the session runs is applied from the next ticket on; or the
  fixed fits it was given (Ray: the driver chose them for the nodes' model).
- :meth:`Session.score`: one call scores a ticket, streams its events and keeps it in the history
  (the ticket when its score starts, the result, error or cancel when it ends, and what a learned head
  reads, so labels on it are learned from without scoring again). :meth:`Session.score_many` does so
  for a stream of tickets, one decode per ticket.
- :meth:`Session.label`: records an agent's answers on a kept score.

SQLite connections belong to the thread that opened them: the history is opened on first use, in the
thread that uses it. A front end that writes the history on another thread than the engine's (the app:
its screen's thread) uses the parts: :meth:`begin` and :meth:`finish`/:meth:`fail`/:meth:`cancel` on its
thread, :meth:`events` on the engine's.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage.domain.pack import Pack
from triage.domain.ticket import Ticket
from triage.errors import TriageError
from triage.scoring.fit import FitRequest, Fits, choose_fits
from triage.scoring.options import PRODUCT_READ, ScoreOptions
from triage.settings import DEFAULTS
from triage.store import features as feat

if TYPE_CHECKING:
    from triage.domain.result import TicketResult
    from triage.scoring.engine import Progress, ScoreEvent, TicketScored
    from triage.scoring.protocol import ScoringEngine
    from triage.store.history import History
    from triage.store.labels import Answer, Label, ScoredTicket


@dataclass
class Scoring:
    """One ticket scored in a session: the ticket, how it is scored, and its rows in the history (None: not
    kept)."""

    ticket: Ticket
    pack: Pack
    options: ScoreOptions
    ticket_row: int | None = None
    score_id: int | None = None

    @property
    def kept(self) -> bool:
        """Whether the score has a history row (its end, and what a head reads, are kept)."""
        return self.score_id is not None


class Session:
    """The engine, the fit policy and the history keeper (see the module docstring).

    Args:
        engine: the loaded engine (not closed by the session); None for a session that only keeps (the app
            before its model is up: an agent labels a ticket reopened from the history).
        request: the explicit head and calibration asks (``--head``, ``--no-head``, the config's
            ``calibration``, the ``starter`` setting); the policy is asked again for every ticket.
        fits: fixed fits instead of the policy (the Ray workers: the driver chose them).
        history: an open history to keep scores in; else ``history_path`` (None: the user data dir's) is
            opened for writing on first use, in the thread that uses it.
        keep_features: how many scores' head inputs the history keeps (config ``keep_features``).
    """

    def __init__(
        self,
        engine: ScoringEngine | None,
        *,
        request: FitRequest | None = None,
        fits: Fits | None = None,
        history: History | None = None,
        history_path: Path | None = None,
        keep_features: int = DEFAULTS.keep_features,
    ) -> None:
        self.engine = engine
        self.request = request if request is not None else FitRequest()
        self.fixed = fits
        self._history = history
        self._owns_history = history is None
        self.history_path = history_path
        self.keep_features = keep_features

    # -- the fit policy -----------------------------------------------------------------------------
    def fits(self, pack: Pack, options: ScoreOptions) -> Fits:
        """The head and calibration to score ``pack`` with (the fixed ones, else the policy's choice now).

        Raises:
            InputError: an explicit file that cannot be read or does not fit the model, pack or options.
        """
        if self.fixed is not None:
            return self.fixed
        return choose_fits(self.scorer, pack, options, self.request)

    @property
    def scorer(self) -> ScoringEngine:
        """The engine, for what needs one.

        Raises:
            TriageError: the session has none (no model is loaded).
        """
        if self.engine is None:
            raise TriageError("no model is loaded")
        return self.engine

    def starter_due(self, pack: Pack) -> bool:
        """Whether :meth:`ensure_starter` would fit a starter head for ``pack`` now
        (:func:`triage.evaluation.starter.needs_fit`)."""
        from triage.evaluation.starter import needs_fit

        return needs_fit(self.scorer, pack, self.request)

    def ensure_starter(
        self, pack: Pack, *, say: Callable[[str], None], progress: Callable[[int, int], None] | None = None
    ) -> bool:
        """Fit and store the built-in pack's starter head for this model when the policy would want one and none
        is stored (:func:`triage.evaluation.starter.ensure`); True when it fitted one."""
        from triage.evaluation.starter import ensure

        return ensure(self.scorer, pack, self.request, say=say, progress=progress)

    # -- the history ------------------------------------------------------------------------------
    @property
    def history(self) -> History:
        """The history scores are kept in, opened for writing on first use.

        Raises:
            TriageError: it cannot be written (a newer schema, locked, unusable).
        """
        if self._history is None:
            from triage.store.history import History

            self._history = History.open_writable(self.history_path)
        return self._history

    @property
    def history_open(self) -> bool:
        return self._history is not None

    def save_ticket(self, ticket: Ticket, *, row: int | None = None) -> int:
        """Save ``ticket`` (into ``row``, a thread's) in its own transaction; returns its row."""
        return self.history.save_ticket(ticket, row=row)

    def begin(
        self, ticket: Ticket, pack: Pack, options: ScoreOptions, *, keep: bool = True, ticket_row: int | None = None
    ) -> Scoring:
        """A :class:`Scoring` of ``ticket``; with ``keep``, the ticket is saved (unless ``ticket_row`` says where it
        already is) and its score's start recorded, each in its own transaction."""
        scoring = Scoring(ticket, pack, options, ticket_row)
        if not keep:
            return scoring
        if scoring.ticket_row is None:
            scoring.ticket_row = self.save_ticket(ticket)
        scoring.score_id = self.history.start_score(
            scoring.ticket_row,
            model=self.scorer.model_info,
            pack={"name": pack.name, "version": pack.version, "hash": pack.hash},
            orderings=PRODUCT_READ.orderings,
            messages=len(ticket.thread),
        )
        return scoring

    def finish(self, scoring: Scoring, result: TicketResult, kept: dict[str, Any] | None = None) -> None:
        """Keep how a kept score ended: its result and what a head reads (``kept``: :meth:`head_inputs`)."""
        if scoring.score_id is None:
            return
        self.history.finish_score(scoring.score_id, result)
        if kept:
            ident = feat.Identity(result.model.get("sha256", ""), result.prompt_format, result.pack.get("hash", ""))
            feat.save(self.history, scoring.score_id, ident, kept, keep=self.keep_features)

    def fail(self, scoring: Scoring, error: str) -> None:
        """Keep that a kept score stopped with ``error``."""
        if scoring.score_id is not None:
            self.history.fail_score(scoring.score_id, error)

    def cancel(self, scoring: Scoring) -> None:
        """Keep that a kept score was cancelled (never left "running")."""
        if scoring.score_id is not None:
            self.history.cancel_score(scoring.score_id)

    @staticmethod
    def head_inputs(final: TicketScored) -> dict[str, Any]:
        """What a learned head reads of a finished score, as the history keeps it (empty when incomplete)."""
        if not final.result.complete:
            return {}
        return feat.from_scored(final.readouts, final.features)

    def label(self, scored: ScoredTicket, answers: Sequence[Answer], *, origin: str) -> list[Label]:
        """Record an agent's ``answers`` on a kept score (:func:`triage.store.labels.record`).

        Raises:
            InputError: an answer the result does not know (nothing is stored).
        """
        from triage.store import labels

        return labels.record(self.history, scored, list(answers), origin=origin)

    def close(self) -> None:
        """Close the history when the session opened it."""
        if self._history is not None and self._owns_history:
            self._history.close()
            self._history = None

    # -- scoring ----------------------------------------------------------------------------------
    def events(
        self,
        scoring: Scoring,
        *,
        fits: Fits | None = None,
        cancel: Callable[[], bool] | None = None,
        progress: Callable[[Progress], None] | None = None,
    ) -> Iterator[ScoreEvent]:
        """Score ``scoring``'s ticket with ``fits`` (default: :meth:`fits` now) and yield the engine's events;
        what a head reads comes back on the final event when the score is kept. Writes nothing."""
        fits = fits if fits is not None else self.fits(scoring.pack, scoring.options)
        kw: dict[str, Any] = {"cancel": cancel, "features": scoring.kept, **fits.engine_kwargs()}
        if progress is not None:
            kw["progress"] = progress
        yield from self.scorer.score(scoring.ticket, scoring.pack, scoring.options, **kw)

    def score(
        self,
        ticket: Ticket,
        pack: Pack,
        options: ScoreOptions,
        *,
        keep: bool = False,
        fits: Fits | None = None,
        cancel: Callable[[], bool] | None = None,
    ) -> Iterator[ScoreEvent]:
        """Score one ticket and stream its events; with ``keep``, keep it in the history as it goes.

        The ticket is saved before the engine starts; the result (or the error, or the cancel) when it ends.
        A :class:`~triage.errors.TriageError` from the engine is kept as the score's error, then raised.
        """
        from triage.scoring.engine import TicketScored

        fits = fits if fits is not None else self.fits(pack, options)
        scoring = self.begin(ticket, pack, options, keep=keep)
        try:
            for event in self.events(scoring, fits=fits, cancel=cancel):
                if isinstance(event, TicketScored):
                    if event.result.complete:
                        self.finish(scoring, event.result, self.head_inputs(event))
                    else:
                        self.cancel(scoring)
                yield event
        except TriageError as exc:
            record_quietly(self.fail, scoring, exc.message)
            raise
        except BaseException:  # an unexpected failure: the row says so, never "running"
            record_quietly(self.fail, scoring, "internal error while scoring")
            raise

    def score_many(
        self,
        tickets: Iterable[Ticket],
        pack: Pack,
        options: ScoreOptions,
        *,
        keep: bool = False,
        fits: Fits | None = None,
    ) -> Iterator[tuple[Ticket, Scoring, TicketScored | TriageError]]:
        """Score a backlog's tickets in input order, one decode per ticket, with the fits chosen once (``fits``,
        default :meth:`fits` now); keeps each (``keep``) as it is taken and as it ends. Yields ``(ticket, scoring,
        done)``, ``done`` being the final event or the :class:`~triage.errors.TriageError` that stopped that ticket
        (the others still score)."""
        fits = fits if fits is not None else self.fits(pack, options)
        taken: list[Scoring] = []

        def feed() -> Iterator[Ticket]:
            for ticket in tickets:
                taken.append(self.begin(ticket, pack, options, keep=keep))
                yield ticket

        scored = self.scorer.score_many(feed(), pack, options, features=keep, **fits.engine_kwargs())
        for ticket, done in scored:
            scoring = taken.pop(0)
            if isinstance(done, TriageError):
                self.fail(scoring, done.message)
            else:
                self.finish(scoring, done.result, self.head_inputs(done))
            yield ticket, scoring, done


def record_quietly(call: Callable[..., None], *args: object, log: logging.Logger | None = None) -> None:
    """Keep a score's end (``call(*args)``: the session's fail, cancel or finish) where an error is already on
    its way: a history that refuses now (locked, full) is logged (``log``, default ``triage``), never raised
    over that error."""
    try:
        call(*args)
    except (sqlite3.Error, TriageError) as exc:
        (log or logging.getLogger("triage")).warning("could not record the end of a score in the history: %s", exc)
