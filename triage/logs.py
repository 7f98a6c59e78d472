"""Where triage's own log and llama.cpp's log output go: a file in the user state dir.

Nothing from llama.cpp is ever written to the terminal (it would garble the TUI
and pollute JSON output); ``triage.model.native`` routes it into the ``triage.llama``
logger, and this sends the ``triage`` loggers to ``<state>/triage.log``.

The log is a convenience, never a reason to fail: when the file cannot be written
(a full or small disk under ``TRIAGE_HOME``, a file size limit), one line on stderr
says so and logging to the file stops. Python's own handler would print
``--- Logging error ---`` and a traceback for every record instead.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

from triage.store.paths import user_dirs

_installed: Path | None = None


class LogFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log file that, when it cannot be written, says so once and stops."""

    failed: str | None = None  # why the file could not be written; nothing is written after

    def emit(self, record: logging.LogRecord) -> None:  # noqa: D102
        if self.failed is None:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        """Called by ``emit`` with the exception being handled: one line, then no more writes."""
        exc = sys.exc_info()[1]
        if self.failed is not None:
            return
        if not isinstance(exc, OSError):
            super().handleError(record)  # a bad format string is a bug: Python's report is the right one
            return
        self.failed = exc.strerror or str(exc) or type(exc).__name__
        stream, self.stream = self.stream, None
        try:
            if stream is not None:
                stream.close()  # drops what is buffered (its flush fails the same way)
        except (OSError, ValueError):
            pass
        try:
            print(
                f"triage: note: the log file {self.baseFilename} cannot be written ({self.failed}); "
                "nothing more is logged to it this run",
                file=sys.stderr,
            )
        except (OSError, ValueError):
            pass

    def flush(self) -> None:  # noqa: D102
        if self.failed is None:
            try:
                super().flush()
            except OSError:
                self.handleError(None)  # type: ignore[arg-type]

    def close(self) -> None:  # noqa: D102
        try:
            super().close()
        except OSError:
            pass


def setup_file_logging(level: int = logging.INFO) -> Path | None:
    """Log ``triage.*`` (llama.cpp included) to a rotating file; idempotent.

    Returns:
        the log file's path, or None when the state dir is not writable.
    """
    global _installed
    if _installed is not None:
        return _installed
    path = user_dirs().state / "triage.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = LogFileHandler(path, maxBytes=2 << 20, backupCount=2, encoding="utf-8")
    except OSError:
        return None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("triage")
    root.addHandler(handler)
    root.setLevel(level)
    # llama.cpp's INFO is chatty (every tensor at load); keep its warnings and errors.
    logging.getLogger("triage.llama").setLevel(logging.WARNING)
    _installed = path
    return path
