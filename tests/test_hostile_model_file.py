"""The model file changed while it is mapped (class 7: SIGBUS, exit status 135, before).

A running engine maps the model file. Replaced by a rename, it keeps reading the old
file, and scoring goes on. Truncated or rewritten in place, the next decode would read
pages that are gone: now a clear error before the decode, never a native crash. Each case
runs in a subprocess, so a crash is an exit status here, not the end of the test run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

DRIVER = r"""
import os, sys
from triage.errors import TriageError
from triage.scoring.engine import Engine
from triage.domain.pack import default_pack

path, how = sys.argv[1], sys.argv[2]
pack = default_pack()
with Engine(path, name="copy", n_ctx=512, threads=1) as engine:
    engine.score_ticket("I was charged twice this month.", pack)
    print("first ticket scored", flush=True)
    if how == "truncate":
        os.truncate(path, os.path.getsize(path) // 2)
    elif how == "rewrite":  # same size, new bytes: what cp over the file ends with
        with open(path, "r+b") as fh:
            fh.seek(os.path.getsize(path) // 2)
            fh.write(b"\0" * 4096)
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    elif how == "rename":
        os.replace(sys.argv[3], path)
    try:
        engine.score_ticket("The parcel never arrived, where is it?", pack)
        print("second ticket scored", flush=True)
    except TriageError as exc:
        print(f"error: {exc.message} | {exc.hint}", flush=True)
"""


def _run(smollm2_path: Path, tmp_path: Path, how: str) -> subprocess.CompletedProcess[str]:
    copy = tmp_path / "model.gguf"
    shutil.copy(smollm2_path, copy)
    other = tmp_path / "other.gguf"
    if how == "rename":
        shutil.copy(smollm2_path, other)
    env = {**os.environ, "TRIAGE_HOME": str(tmp_path / "home")}
    return subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", DRIVER, str(copy), how, str(other)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.parametrize("how", ["truncate", "rewrite"])
def test_a_model_file_changed_in_place_is_a_clear_error_not_sigbus(
    smollm2_path: Path, tmp_path: Path, how: str
) -> None:
    proc = _run(smollm2_path, tmp_path, how)
    assert proc.returncode == 0, f"status {proc.returncode}: {proc.stderr[-2000:]}"
    lines = proc.stdout.splitlines()
    assert lines[0] == "first ticket scored"
    assert lines[1].startswith(f"error: the model file {tmp_path / 'model.gguf'} was changed in place"), lines
    assert ("and is now" in lines[1]) == (how == "truncate")
    assert "load the model again" in lines[1] and "rename it over the old one" in lines[1]


def test_a_model_file_replaced_by_a_rename_keeps_scoring(smollm2_path: Path, tmp_path: Path) -> None:
    proc = _run(smollm2_path, tmp_path, "rename")
    assert proc.returncode == 0, f"status {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.splitlines() == ["first ticket scored", "second ticket scored"]
