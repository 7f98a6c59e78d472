"""``POST /v1/prefill``: the page reads the ticket ahead while the agent pastes or types.

The request is a score request (the same body, limits, auth, origin checks and pack choice as ``/v1/score``);
its job runs on the engine thread, in the queue's order, and computes the ticket's prompt up to its tails
(:meth:`triage.session.Session.prefill`), so that the score of that ticket (or of a longer or edited version of
it) then costs only the tails and what changed. The answer is the :class:`~triage.scoring.prefill_result.
PrefillResult` as JSON. A newer prefill cancels an older one still waiting or running (the engine holds one
ticket's prompt ahead: only the newest text is worth computing); nothing is kept in the history.
"""

from __future__ import annotations

import time
from dataclasses import asdict

from triage.errors import TriageError
from triage.serve.worker import Job
from triage.session import Session


class Prefills:
    """The server's latest prefill job: a newer one cancels it."""

    def __init__(self) -> None:
        self.latest: Job | None = None

    def take(self, job: Job) -> Job:
        """Make ``job`` a prefill (its work reads the ticket ahead) and the latest one, cancelling the one before."""
        old, self.latest = self.latest, job
        if old is not None and not old.finished:
            old.cancel("superseded")
        job.kind = "prefill"
        job.work = lambda session: run(job, session)
        return job


def run(job: Job, session: Session) -> None:
    """Prefill ``job``'s ticket on the engine thread and emit the result (or the error) as its terminal event."""
    job.started = time.monotonic()
    try:
        done = session.prefill(job.ticket, job.pack, cancel=job.cancelled.is_set)
    except TriageError as exc:
        job.emit("error", {"status": 422, "error": exc.message, "hint": exc.hint})
        return
    job.emit("result", {"ticket_id": job.ticket.id, **asdict(done)})
