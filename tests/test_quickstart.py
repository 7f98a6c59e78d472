"""The README's Quick start, run as written: every command of its code block, in order, in a fresh clone's layout.

The block is read from README.md (so a README that drifts from what runs fails here). Each command runs in bash
in a temporary folder holding a copy of ``examples/`` and a ``.venv`` link to the environment running the tests,
after the block's own ``source .venv/bin/activate``, with smollm2-135m as the model (``TRIAGE_MODEL``) and a
config of one thread and a 2,048-token context in a private ``TRIAGE_HOME``. Each must exit 0 and print what it
should (:data:`CHECKS`, one per command; a command without a check, or a check without a command, fails).

Two commands do not end by themselves: the app (``triage``) is started in a pseudo-terminal, must draw its screen
and quit on ctrl+q; ``triage serve`` is started on a free port of 127.0.0.1 (``--port N`` added, and the block's
``127.0.0.1:8787`` read as that port), must answer ``/v1/health``, serves the commands after it, and is stopped
with SIGTERM at the end.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[1]
ACTIVATE = "source .venv/bin/activate"
DOC_URL = "127.0.0.1:8787"


def quickstart_commands(readme: str) -> list[str]:
    """The commands of the first ``sh`` block under ``## Quick start``, continuation lines joined."""
    section = readme.split("\n## Quick start", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert match, "README.md's Quick start has no ```sh block"
    commands: list[str] = []
    pending = ""
    for line in match.group(1).splitlines():
        if not line.strip():
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1].rstrip() + " "
            continue
        commands.append(pending + line.strip())
        pending = ""
    assert not pending, "a continuation line ends the block"
    return commands


def _words(command: str) -> str:
    """The command without its comment (a ``#`` outside quotes starts one, as in bash)."""
    import shlex

    lexer = shlex.shlex(command, posix=True, punctuation_chars=False)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return " ".join(list(lexer))


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])", "", text)


class Run:
    """What one command left: its exit status, stdout, stderr, and the folder it ran in."""

    def __init__(self, code: int, out: str, err: str, cwd: Path, home: Path) -> None:
        self.code, self.out, self.err, self.cwd, self.home = code, out, err, cwd, home


def _check_table(r: Run) -> None:
    assert "criterion" in r.out and "decided by" in r.out
    assert all(c in r.out for c in ("queue", "urgency", "sentiment", "needs_approval", "type"))


def _check_one(r: Run) -> None:
    result = json.loads(r.out)
    assert result["schema"] == "triage.result/3" and len(result["criteria"]) == 5


def _check_criteria(r: Run) -> None:
    assert [c["id"] for c in json.loads(r.out)["criteria"]] == ["queue", "urgency"]  # pack order


def _check_decisions(r: Run) -> None:
    rows = _lines(r.cwd / "decisions.jsonl")
    assert [x["ticket_id"] for x in rows] == [f"T-{n}" for n in range(1001, 1011)]
    assert all(x["schema"] == "triage.result/3" for x in rows)


def _check_threads(r: Run) -> None:
    rows = _lines(r.cwd / "threads-scored.jsonl")
    assert [x["ticket_id"] for x in rows] == ["TH-2001", "TH-2002", "TH-2001", "TH-2002"]
    again = rows[2]["thread"]
    assert again["messages"] == 3 and again["previous"] == 1 and again["reused"] > 0  # only the replies were read


def _check_pack_init(r: Run) -> None:
    from triage.domain.pack import load_pack

    pack = load_pack(r.cwd / "my-team.toml")
    assert [c.id for c in pack.criteria] == ["queue", "priority"]
    assert "40 row(s)" in r.out + r.err


def _check_learn(r: Run) -> None:
    heads = list((r.home / "data" / "heads").glob("*.npz"))
    assert len(heads) == 1, f"no head stored under {r.home}: {r.err}"
    said = r.out + r.err
    assert "queue: learned from n=40 (billing 10, delivery 10, app 10, accounts 10)" in said
    assert "40 scored" in said


def _check_team(r: Run) -> None:
    rows = _lines(r.cwd / "team-decisions.jsonl")
    assert len(rows) == 10 and all([c["id"] for c in x["criteria"]] == ["queue", "priority"] for x in rows)
    assert {c["source"] for x in rows for c in x["criteria"]} == {"learned"}  # the head just learned decides
    assert "kept 10 scored ticket(s) in the history" in r.err


def _check_history(r: Run) -> None:
    assert "the newest 5 shown" in r.err
    assert sum(f"T-{n}" in r.out for n in range(1001, 1011)) == 5


def _check_label(r: Run) -> None:
    assert "stored 2 label(s) on 1 ticket(s)" in r.err


def _check_label_file(r: Run) -> None:
    assert "stored 12 label(s) on 6 ticket(s)" in r.err


def _check_labelled(r: Run) -> None:
    shown = {f"T-{n}" for n in range(1001, 1011) if f"T-{n}" in r.out}
    assert shown == {"T-1001", "T-1002", "T-1003", "T-1004", "T-1005", "T-1007", "T-1009"}


def _check_stats(r: Run) -> None:
    assert "agreement with 14 answer(s)" in r.out and "queue" in r.out and "priority" in r.out


def _check_relearn(r: Run) -> None:
    said = r.out + r.err
    assert "queue: learned from n=47" in said  # the export's 40 and the history's 7 labelled tickets
    assert "40 hit(s), 0 scored, 7 kept in the history" in said  # every row from the cache or the history
    assert "nothing to score, so the model was not loaded" in said


def _check_served(r: Run) -> None:
    rows = _lines(r.cwd / "served.jsonl")
    assert [x["ticket_id"] for x in rows] == [f"T-{n}" for n in range(1001, 1011)]
    assert "scoring on the server at http://127.0.0.1:" in r.err and "no model loaded here" in r.err


def _check_models(r: Run) -> None:
    assert "smollm2-135m" in r.out


# (a piece of the command that picks it, its check); each must pick exactly one command of the block
CHECKS: list[tuple[str, Callable[[Run], None]]] = [
    ("| triage score --format table", _check_table),
    ("triage score examples/ticket.txt", _check_one),
    ("triage score --criteria urgency,queue examples/ticket.txt", _check_criteria),
    ("> decisions.jsonl", _check_decisions),
    ("> threads-scored.jsonl", _check_threads),
    ("triage pack init", _check_pack_init),
    ("triage learn examples/helpdesk.csv --pack", _check_learn),
    ("> team-decisions.jsonl", _check_team),
    ("triage history --limit 5", _check_history),
    ("triage label T-1005", _check_label),
    ("triage label --file", _check_label_file),
    ("triage history --labelled", _check_labelled),
    ("triage stats", _check_stats),
    ("triage learn examples/helpdesk.csv --history", _check_relearn),
    ("--server", _check_served),
    ("triage model list", _check_models),
]


def test_the_quickstart_block_is_read_as_commands() -> None:
    commands = quickstart_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert commands[0] == ACTIVATE
    assert all(c.startswith(("triage", "echo ")) for c in commands[1:]), commands
    for piece, _ in CHECKS:
        picked = [c for c in commands if piece in c]
        assert len(picked) == 1, f"{piece!r} picks {len(picked)} Quick start command(s)"
    long = [c for c in commands if "pack init" in c][0]
    assert _words(long).endswith("-o my-team.toml")  # the continuation was joined; the comment is not a word
    for name in ("tickets.jsonl", "ticket.txt", "threads.jsonl", "helpdesk.csv", "team.toml", "labels.jsonl"):
        assert (ROOT / "examples" / name).is_file(), name  # every file the block names is shipped


def _bash(command: str, cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"set -eo pipefail\n{ACTIVATE}\n{command}"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _run_app(command: str, cwd: Path, env: dict[str, str]) -> None:
    """The app in a pseudo-terminal of 100x30: it must draw its screen, and quit with status 0 on ctrl+q."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen(
        ["bash", "-c", f"{ACTIVATE}\n{command}"],
        cwd=cwd,
        env={**env, "TERM": "xterm-256color"},
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    seen = b""

    def read_for(seconds: float, until: Callable[[str], bool]) -> bool:
        nonlocal seen
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the app is gone
                    return until(_strip_ansi(seen.decode("utf-8", "replace")))
                seen += chunk
            if until(_strip_ansi(seen.decode("utf-8", "replace"))):
                return True
        return False

    try:
        drawn = read_for(120, lambda screen: "Quit" in screen and "Score" in screen)
        assert drawn, f"the app did not draw its screen: {_strip_ansi(seen.decode('utf-8', 'replace'))[-2000:]}"
        os.write(master, b"\x11")  # ctrl+q
        read_for(30, lambda _: proc.poll() is not None)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        os.close(master)


def _start_serve(command: str, cwd: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    from triage.serve.local import free_port

    port = free_port()
    proc = subprocess.Popen(
        ["bash", "-c", f"{ACTIVATE}\nexec {command.replace('triage serve', f'triage serve --port {port}', 1)}"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=5) as answer:
                assert answer.status == 200
                return proc, port
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"triage serve did not start: {proc.communicate(timeout=30)[1][-2000:]}")
            time.sleep(0.25)


@pytest.mark.model
@pytest.mark.slow
def test_every_quickstart_command_runs_as_written(smollm2_path: Path, triage_home: Path, tmp_path: Path) -> None:
    activate = Path(sys.prefix) / "bin" / "activate"
    if sys.prefix == sys.base_prefix or not activate.is_file():
        pytest.skip(f"the tests do not run in a virtualenv ({sys.prefix}), so .venv/bin/activate cannot be linked")
    if shutil.which("bash") is None:
        pytest.skip("no bash: the Quick start is a bash session")
    commands = quickstart_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert commands[0] == ACTIVATE
    clone = tmp_path / "clone"
    clone.mkdir()
    shutil.copytree(ROOT / "examples", clone / "examples")
    shutil.copy(ROOT / "README.md", clone / "README.md")
    (clone / ".venv").symlink_to(sys.prefix)
    config = triage_home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("threads = 1\nn_ctx = 2048\n", encoding="utf-8")  # the commands stay as written
    env = {
        **os.environ,
        "TRIAGE_HOME": str(triage_home),
        "TRIAGE_MODEL": str(smollm2_path),
        "PYTHONPATH": str(ROOT),  # this tree's triage, whichever tree the environment was installed from
        "COLUMNS": "100",
    }
    for key in ("TRIAGE_SERVER", "TRIAGE_SERVE_TOKEN"):
        env.pop(key, None)
    checks = dict(CHECKS)
    server: subprocess.Popen[str] | None = None
    port = 0
    ran: list[str] = []
    try:
        for command in commands[1:]:
            words = _words(command)
            if words == "triage":
                _run_app(command, clone, env)
                ran.append(command)
                continue
            if words.startswith("triage serve"):
                server, port = _start_serve(command, clone, env)
                ran.append(command)
                continue
            if DOC_URL in command:
                assert server is not None, f"{command!r} needs the server, started earlier in the block"
                command = command.replace(DOC_URL, f"127.0.0.1:{port}")
            done = _bash(command, clone, env)
            print(f"$ {command}\n{done.stdout[-1200:]}{done.stderr[-1200:]}")  # shown when a later check fails
            assert done.returncode == 0, f"{command}\nexit {done.returncode}\n{done.stderr[-3000:]}"
            picked = [check for piece, check in checks.items() if piece in command]
            assert len(picked) == 1, f"no check for {command!r}"
            picked[0](Run(done.returncode, done.stdout, done.stderr, clone, triage_home))
            ran.append(command)
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            _, err = server.communicate(timeout=60)
            assert server.returncode == 143, err[-2000:]  # stopped by SIGTERM, as every triage command is
    assert len(ran) == len(commands) - 1
