"""A TRIAGE_HOME on a full or small disk: the log file degrades with one line, never a traceback."""

from __future__ import annotations

import errno
import logging
import logging.handlers
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from triage import logs


@pytest.fixture()
def fresh_logging() -> Iterator[None]:
    """setup_file_logging() runs again for this test, and its handler is removed after."""
    triage_log = logging.getLogger("triage")
    saved, installed = list(triage_log.handlers), logs._installed
    for h in saved:  # an earlier test's log file (another TRIAGE_HOME) is not this test's
        triage_log.removeHandler(h)
    logs._installed = None
    yield
    for h in list(triage_log.handlers):
        triage_log.removeHandler(h)
        h.close()
    for h in saved:
        triage_log.addHandler(h)
    logs._installed = installed


class FullDisk:
    """A stream whose every write fails as a full disk does."""

    def __init__(self) -> None:
        self.writes = 0

    def write(self, _text: str) -> int:
        self.writes += 1
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def tell(self) -> int:
        return 0

    def seek(self, *_args: int) -> int:
        return 0

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def close(self) -> None:
        self.flush()


def test_a_log_file_on_a_full_disk_says_one_line_and_stops(
    fresh_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    path = logs.setup_file_logging()
    assert path is not None
    [handler] = [h for h in logging.getLogger("triage").handlers if isinstance(h, logging.handlers.RotatingFileHandler)]
    assert handler.baseFilename == str(path)
    handler.stream.close()
    full = FullDisk()
    handler.stream = full  # type: ignore[assignment]
    log = logging.getLogger("triage.test")
    for i in range(5):
        log.warning("record %d", i)
    handler.flush()  # what logging.shutdown() does at exit, for this handler
    handler.close()
    err = capsys.readouterr().err
    assert "Logging error" not in err and "Traceback" not in err
    assert err.splitlines() == [
        f"triage: note: the log file {path} cannot be written (No space left on device); "
        "nothing more is logged to it this run"
    ]
    assert full.writes == 1  # nothing tried after the first failure


SMALL_DISK = """
import logging, resource, sys
resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))  # the log may not grow past 600 bytes
from triage.logs import setup_file_logging
setup_file_logging()
for i in range(50):
    logging.getLogger("triage.test").warning("a record of some length, number %d", i)
print("done")
"""


def test_a_file_size_limit_under_triage_home_prints_no_logging_error(tmp_path: Path) -> None:
    env = {**os.environ, "TRIAGE_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", SMALL_DISK], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "done"
    assert "Logging error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "triage.log cannot be written (File too large)" in lines[0], proc.stderr
    assert 0 < (tmp_path / "state" / "triage.log").stat().st_size <= 600
