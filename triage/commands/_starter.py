"""Fitting the built-in pack's starter head from the command line.

- In the foreground (``model pull``, ``model starter``, ``score --wait-starter``): the same progress as learn's
  (:func:`triage.evaluation.progress.scoring_progress`: a bar on a terminal, plain lines otherwise), around
  :func:`triage.learning.starter.ensure`.
- In the background (``score``'s first use of a model triage ships no head for): a detached, low-priority
  ``triage model starter`` process fits and stores it while this run decides zero-shot; the next run applies it.

One fit at a time per head, across processes: each fit holds the head's lock (:meth:`Session.starter_lock`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:  # the command line imports this module for --help: nothing heavy at import
    from triage.domain.pack import Pack
    from triage.scoring.protocol import ScoringEngine
    from triage.session import Session
    from triage.store.fit_lock import FitLock

LOG_NAME = "starter-fit.log"


def _say(line: str) -> None:
    Console(stderr=True).print(f"triage: {line}", markup=False, highlight=False, soft_wrap=True)


def fit_starter(session: Session, pack: Pack, *, wait: bool = True) -> bool:
    """Fit the starter head when the session says it is due (:meth:`Session.starter_due`); True when this call
    fitted it.

    ``wait``: fit it here, telling the user how it goes on stderr (another process fitting it already is said,
    and this one fits nothing). Else start :func:`start_background_fit` and return at once (False).
    """
    from triage.evaluation.progress import scoring_progress

    if not session.starter_due(pack):
        return False
    if not wait:
        start_background_fit(session.scorer, session.starter_lock(pack))
        return False
    err = Console(stderr=True)
    with scoring_progress(err) as bar:
        task = None  # made at the first call, which gives the total
        last = 0

        def progress(done: int, total: int) -> None:
            nonlocal task, last
            if task is None:
                task = bar.add_task("starter head", total=total, hits=0)
            bar.update(task, advance=done - last)
            last = done

        return session.ensure_starter(pack, say=_say, progress=progress)


def start_background_fit(engine: ScoringEngine, lock: FitLock) -> int | None:
    """Start ``triage model starter MODEL --background`` detached (its output in the state folder's
    ``starter-fit.log``), unless another process holds ``lock``; say which, once. Returns the new process's id."""
    from triage.store.paths import user_dirs

    if not lock.acquire():
        pid = lock.holder()
        _say(
            f"the starter head for {engine.name} is being fitted in the background{f' (pid {pid})' if pid else ''}; "
            "this run decides zero-shot"
        )
        return None
    lock.release()  # the child takes it; two children racing: the second finds it taken and ends
    log = user_dirs().state / LOG_NAME
    cmd = [sys.executable, "-m", "triage.cli", "model", "starter", str(engine.model_path), "--background"]
    try:
        out = _log_fd(log)
        try:
            child = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, close_fds=True
            )
        finally:
            os.close(out)
    except OSError as exc:
        _say(
            f"the starter head for {engine.name} cannot be fitted in the background ({exc.strerror or exc}); this "
            f"run decides zero-shot: `triage model starter {engine.model_path}` fits it in the foreground"
        )
        return None
    _say(
        f"no starter head for {engine.name} yet: fitting it in the background (pid {child.pid}, at low priority; "
        f"its log: {log}); this run decides zero-shot, runs after it ends apply it. `--wait-starter` waits for "
        "it instead; `triage model starter MODEL` fits it in the foreground; TRIAGE_STARTER=0 turns it off"
    )
    return child.pid


def _log_fd(log: Path) -> int:
    """The background fit's log, opened to append: a regular file of triage's own, never a FIFO or device.

    Raises:
        OSError: it cannot be opened, or it is not a regular file (left as it is).
    """
    import stat

    log.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(0, f"{log} is not a regular file")
    return fd


def background_child() -> None:
    """In ``model starter --background``: lower this process's priority, so the run that started it keeps
    the cores first."""
    try:
        os.nice(10)
    except OSError:
        pass


def log_path() -> Path:
    """Where background fits write their output."""
    from triage.store.paths import user_dirs

    return user_dirs().state / LOG_NAME
