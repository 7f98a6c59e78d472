"""The one exception type the CLI and the TUI turn into a message instead of a traceback."""

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
