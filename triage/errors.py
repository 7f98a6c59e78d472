"""The one exception type the CLI and the TUI turn into a message instead of a traceback, and its typed failures.

A score fails in one of three ways, each a :class:`TriageError` with its hint: the fit (:class:`FitError`), the
history (:class:`HistoryError`) or the engine (:class:`EngineError`). :mod:`triage.session` raises them; each
front end maps them once: ``triage serve`` to its HTTP statuses, ``triage score`` to its exit codes, the app
to its notices.
"""

from __future__ import annotations


class TriageError(Exception):
    """A failure the user can act on.

    Args:
        message: what went wrong, specifically (name the file, the field, the value).
        hint: what to do about it, e.g. the command that fixes it.
        exit_code: the process exit status the CLI uses (2 = bad input or usage).
    """

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  {self.hint}"


class InputError(TriageError):
    """Bad input from the user: a file, a ticket, an option value."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, exit_code=2)


class FitError(InputError):
    """A head or calibration that cannot be read, or does not fit the model, pack or options (exit 2; ``serve``:
    422)."""


class HistoryError(TriageError):
    """The history cannot be written: locked by another process, read-only, full, of a newer schema, damaged
    (exit 1; ``serve``: 409). :class:`triage.store.history_faults.HistoryFault` is one."""


class ResultNotKept(HistoryError):
    """The ticket was scored, but the history refused its result (the score's row says it failed)."""


class EngineError(TriageError):
    """The engine could not score the ticket: a decode failed, the context is full, the model is gone (exit 1;
    ``serve``: 422)."""
