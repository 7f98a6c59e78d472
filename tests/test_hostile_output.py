"""Signals, full disks and closed pipes (issue: hardening round 2, class 2): only whole records, always said.

Each case runs the real CLI in a subprocess on the real smollm2-135m.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.model


def _tickets(path: Path, n: int) -> Path:
    path.write_text(
        "".join(
            json.dumps({"id": f"t{i}", "text": f"Ticket {i}: my parcel is late, where is it?"}) + "\n" for i in range(n)
        ),
        encoding="utf-8",
    )
    return path


def _cmd(smollm2_path: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "triage.cli", "score", *args, "--model", str(smollm2_path), "--n-ctx", "512"]


def test_sigterm_during_json_output_closes_the_array(smollm2_path: Path, tmp_path: Path) -> None:
    data = _tickets(tmp_path / "t.jsonl", 200)
    out = tmp_path / "out.json"
    with out.open("w", encoding="utf-8") as fh:
        proc = subprocess.Popen(
            _cmd(smollm2_path, str(data), "--format", "json"), stdout=fh, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 300
        while out.stat().st_size < 200 and time.monotonic() < deadline:  # the first record is out
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    records = json.loads(out.read_text(encoding="utf-8"))  # a whole, closed array
    assert 1 <= len(records) < 200 and all(r["ticket_id"].startswith("t") for r in records)
    assert "terminated after" in err and "Traceback" not in err


def test_a_full_output_leaves_whole_records_and_says_how_many(smollm2_path: Path, tmp_path: Path) -> None:
    data = _tickets(tmp_path / "t.jsonl", 6)
    out = tmp_path / "out.jsonl"

    def small_files() -> None:  # a file may not grow past 5 KB: as a disk that fills up
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (5000, 5000))

    with out.open("w", encoding="utf-8") as fh:
        proc = subprocess.run(
            _cmd(smollm2_path, str(data), "--format", "jsonl"),
            stdout=fh,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=small_files,
            timeout=600,
        )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "could not be written" in proc.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines and all(json.loads(line)["ticket_id"] for line in lines)  # every line a whole record
    assert f"after {len(lines)} whole record(s); the output holds exactly those" in proc.stderr


def test_dev_full_is_a_message_not_a_traceback(smollm2_path: Path, tmp_path: Path) -> None:
    data = _tickets(tmp_path / "t.jsonl", 2)
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            _cmd(smollm2_path, str(data), "--format", "jsonl"),
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
        )
    assert proc.returncode == 1 and "No space left on device" in proc.stderr and "Traceback" not in proc.stderr
    assert "Exception ignored" not in proc.stderr


def test_a_closed_stdout_is_said_before_any_work(smollm2_path: Path, tmp_path: Path) -> None:
    data = _tickets(tmp_path / "t.jsonl", 2)
    proc = subprocess.run(
        _cmd(smollm2_path, str(data)),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.close(1),
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "standard output is closed" in proc.stderr and "Traceback" not in proc.stderr
