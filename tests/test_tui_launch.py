"""While the app runs, logs (llama.cpp's too) go to state/triage.log and never to the terminal."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

LOGGING = """
import logging, sys, warnings
from triage.tui.launch import route_logging
print(route_logging())
logging.getLogger("triage.llama").warning("from llama.cpp")
logging.getLogger("triage.store.history").info("from triage")
logging.getLogger("somelib").error("from a library")
warnings.warn("a python warning")
"""


def test_logs_go_to_the_file_not_the_terminal(tmp_path: Path) -> None:
    env = {**os.environ, "TRIAGE_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", LOGGING], capture_output=True, text=True, check=True, env=env)
    log = tmp_path / "state" / "triage.log"
    assert proc.stderr == "" and proc.stdout.strip() == str(log)
    text = log.read_text(encoding="utf-8")
    assert "triage.llama: from llama.cpp" in text
    assert text.count("triage.store.history: from triage") == 1  # once, not once per handler
    assert "somelib: from a library" in text
    assert "a python warning" in text


@pytest.mark.model
def test_llama_cpp_writes_nothing_to_stderr(smollm2_path: Path, tmp_path: Path) -> None:
    """Load and run the real model after routing logs: fd 2 must stay empty."""
    code = textwrap.dedent(
        """
        import sys
        from triage.tui.launch import route_logging
        route_logging()
        from triage.scoring.engine import Engine
        from triage.domain.pack import default_pack
        with Engine(sys.argv[1], name="smollm2-135m", stand_in=True, n_ctx=2048) as engine:
            engine.score_ticket("My card was charged twice, refund me.", default_pack())
        """
    )
    env = {**os.environ, "TRIAGE_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(smollm2_path)], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", f"llama.cpp wrote to stderr: {proc.stderr[:500]}"
    assert (tmp_path / "state" / "triage.log").exists()
