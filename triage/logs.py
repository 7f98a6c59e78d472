"""Where triage's own log and llama.cpp's log output go: a file in the user state dir.

Nothing from llama.cpp is ever written to the terminal (it would garble the TUI
and pollute JSON output); ``triage.model.native`` routes it into the ``triage.llama``
logger, and this sends the ``triage`` loggers to ``<state>/triage.log``.
"""

from __future__ import annotations

import logging
import logging.handlers
from pathlib import Path

from triage.store.paths import user_dirs

_installed: Path | None = None


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
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=2 << 20, backupCount=2, encoding="utf-8")
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
