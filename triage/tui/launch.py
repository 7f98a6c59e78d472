"""``triage`` with no subcommand: start the app.

While the app runs, all logging (llama.cpp's included, through the logger
``triage.llama``) goes to ``<state>/triage.log`` (see :mod:`triage.logs`),
never to the terminal, where it would garble the screen.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path


def route_logging() -> Path | None:
    """Send every log record to ``<state>/triage.log`` and none to the terminal; returns the file.

    :func:`triage.logs.setup_file_logging` (the CLI's) sends ``triage.*`` there.
    Here the rest follows it while the app draws: other libraries' records and
    Python warnings would otherwise reach Python's last-resort handler on
    stderr, which is the app's screen.
    """
    from triage.logs import setup_file_logging

    path = setup_file_logging()
    triage_log = logging.getLogger("triage")
    root = logging.getLogger()
    for old in list(root.handlers):
        if isinstance(old, logging.StreamHandler) and not isinstance(old, logging.FileHandler):
            root.removeHandler(old)  # a stderr handler would draw over the app
    files = [h for h in triage_log.handlers if isinstance(h, logging.FileHandler)]
    if files:
        if files[0] not in root.handlers:
            root.addHandler(files[0])
        triage_log.propagate = False  # triage's records are written once, by the same handler
    elif not root.handlers:
        root.addHandler(logging.NullHandler())  # no writable state dir: drop, rather than draw over the app
    if root.level == logging.NOTSET or root.level < logging.WARNING:
        root.setLevel(logging.WARNING)
    logging.captureWarnings(True)
    return path


def run_app(args: argparse.Namespace) -> int:
    """Run the app with the CLI's options; returns the exit status.

    Raises:
        TriageError: the config file or the pack cannot be read (the CLI prints it).
    """
    from triage.model import download
    from triage.store.config import load_config, retired_notes
    from triage.tui.app import make_app
    from triage.tui.options import UIOptions

    config = load_config()
    notes = tuple(retired_notes())
    log_path = route_logging()
    download.PIP_OUTPUT_TO_TERMINAL = False  # pip's progress bar would draw over the screen
    app = make_app(UIOptions.from_args(args, config, notes))
    logging.getLogger("triage").info("app starting (log %s)", log_path)
    app.run()
    return app.return_code or 0
