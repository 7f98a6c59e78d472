"""Every input of the hardening issue (issue 15), run as a user would: a `triage` subprocess.

Each case must end with a message and an exit status, never with a Python traceback or a
signal (llama.cpp's GGML_ASSERT aborts the process with 134 and writes a gdb backtrace to
stdout). Cases that need the model use the small test model, smollm2-135m, with one thread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import MINI_PACK, TRACEBACK, assert_clean, run_triage


@dataclass
class Case:
    """One hostile input: the command, what to prepare, and what the user must see."""

    name: str
    args: list[str]
    stdin: str | bytes | None = "Where is my parcel? It is late."
    code: int | None = None  # expected exit status
    stderr_has: list[str] = field(default_factory=list)
    stdout_empty: bool = False
    prepare: Callable[[Path, Path, Path], Any] | None = (
        None  # (home, tmp, model) -> None, or something to close() after the run
    )
    check: Callable[[subprocess.CompletedProcess[str], Path], None] | None = None
    one_thread: bool = True  # add --threads 1 (cases about --threads leave it out)
    model_path: bool = True  # add --model <the test model's path> (unless the case names a model)


def config(text: str) -> Callable[[Path, Path], None]:
    def write(home: Path, _tmp: Path, _model: Path) -> None:
        (home / "config").mkdir(parents=True, exist_ok=True)
        (home / "config" / "config.toml").write_text(text, encoding="utf-8")

    return write


def readout_cache(home: Path) -> Path:
    folder = home / "cache" / "eval"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "readouts.sqlite3"


def damaged_cache(home: Path, _tmp: Path, _model: Path) -> None:
    readout_cache(home).write_bytes(b"SQLite format 3\x00" + b"\xde\xad" * 3000)


def locked_cache(home: Path, _tmp: Path, _model: Path) -> Any:
    import sqlite3

    path = readout_cache(home)
    sqlite3.connect(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # held until the run ends
    return holder


HOSTILE_ID = "a\x1b[31mRED\x1b]0;pwned\x07[bold]x\x9b2J\rfake"


def escapes_jsonl(_home: Path, tmp: Path, _model: Path) -> None:
    rows = [
        {"id": HOSTILE_ID, "text": "Where is my parcel?"},
        {"id": "b\x1b[2J", "text": "   "},
        {"id": "c\x1b[2J", "text": 5},
    ]
    (tmp / "esc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def no_terminal_escapes(proc: subprocess.CompletedProcess[str], _tmp: Path) -> None:
    for stream in (proc.stdout, proc.stderr):
        assert not any(ch in stream for ch in "\x1b\x07\x9b\r"), repr(stream[-800:])
    assert "[bold]x" in proc.stdout  # markup in an id is shown as typed, not applied


def one_line(text: str) -> Callable[[Path, Path], None]:
    def write(_home: Path, tmp: Path, _model: Path) -> None:
        (tmp / "one.jsonl").write_text(text + "\n", encoding="utf-8")

    return write


def one_error_record(proc: subprocess.CompletedProcess[str], _tmp: Path) -> None:
    (line,) = proc.stdout.splitlines()
    record = json.loads(line)
    assert record["line"] == 1 and record["error"] in proc.stderr


def changed_in_place(home: Path, _tmp: Path, model: Path) -> None:
    """smollm2-135m installed and verified as a pull leaves it, then one byte changed (same size)."""
    import hashlib

    folder = home / "data" / "models"
    folder.mkdir(parents=True, exist_ok=True)
    data = bytearray(model.read_bytes())
    target = folder / "smollm2-135m.gguf"
    target.write_bytes(bytes(data))
    st = target.stat()
    record = {
        "name": "smollm2-135m",
        "file": target.name,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "sha256": hashlib.sha256(data).hexdigest(),
        "sha256_verified": True,
        "verified_against": "catalog",
    }
    (folder / "smollm2-135m.json").write_text(json.dumps(record), encoding="utf-8")
    data[-1000] ^= 0xFF  # in the tensor data: the header still reads
    target.write_bytes(bytes(data))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


def listed_as_changed(proc: subprocess.CompletedProcess[str], _tmp: Path) -> None:
    row = next(r for r in json.loads(proc.stdout) if r["name"] == "smollm2-135m")
    assert row["state"] == "changed" and row["verified"] is False and row["installed_sha256"] is None


def pack_without_question(_home: Path, tmp: Path, _model: Path) -> None:
    (tmp / "noq.toml").write_text(
        '[[criterion]]\nid = "mood"\noptions = [ { id = "a", label = "A" }, { id = "b", label = "B" } ]\n',
        encoding="utf-8",
    )


def damaged_stable_cache(home: Path, _tmp: Path, _model: Path) -> None:
    folder = home / "cache" / "stable"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "last.json").write_text("{not json", encoding="utf-8")
    (folder / "junk.kvstate").write_bytes(b"TRIAGEKV" + b"\x00" * 50)


SMALLEST = "the smallest is 256"
THREADS = "must be between 1 and"

CASES = [
    # 1. Context sizes llama.cpp aborts on (GGML_ASSERT, exit 134), or silently changes.
    *[
        Case(f"n-ctx-{n}", ["score", "--n-ctx", str(n)], code=2, stderr_has=[SMALLEST], stdout_empty=True)
        for n in (1, 16, 32, 64, 0, -5)
    ],
    Case(
        "n-ctx-in-config",
        ["score"],
        code=2,
        stderr_has=[SMALLEST, "n_ctx = 16"],
        stdout_empty=True,
        prepare=config("n_ctx = 16\n"),
    ),
    Case("n-ctx-eval", ["eval", "{tmp}/labels.jsonl", "--n-ctx", "32"], stdin=None, code=2, stderr_has=[SMALLEST]),
    Case(
        "n-ctx-above-training",
        ["score", "--n-ctx", "100000"],
        code=2,
        stderr_has=["trained for (8192)"],
        stdout_empty=True,
    ),
    Case(
        "n-ctx-rounded-up",
        ["score", "--n-ctx", "300", "--format", "json"],
        code=0,
        stderr_has=["300 asked for", "512 tokens are used"],
    ),
    # 2. A damaged or locked eval readout cache.
    Case(
        "eval-damaged-cache",
        ["eval", "{tmp}/labels.jsonl", "--no-baseline"],
        stdin=None,
        code=0,
        stderr_has=["moved aside"],
        prepare=damaged_cache,
    ),
    Case(
        "calibrate-damaged-cache",
        [
            "calibrate",
            "{tmp}/labels.jsonl",
            "--no-store",
            "-o",
            "{tmp}/cal.json",
            "--holdout",
            "0",
            "--min-per-option",
            "1",
        ],
        stdin=None,
        stderr_has=["moved aside"],
        prepare=damaged_cache,
    ),
    Case(
        "eval-locked-cache",
        ["eval", "{tmp}/labels.jsonl", "--no-baseline"],
        stdin=None,
        code=1,
        stderr_has=["is locked by another process"],
        prepare=locked_cache,
    ),
    # 3. Escape sequences in ticket ids reach the terminal in the table and in error lines.
    Case(
        "escapes-in-jsonl-ids",
        ["score", "{tmp}/esc.jsonl", "--format", "table"],
        stdin=None,
        code=1,
        stderr_has=["line 2: ticket b is empty", "line 3 (id c)"],
        prepare=escapes_jsonl,
        check=no_terminal_escapes,
    ),
    Case(
        "escapes-in-id-option",
        ["score", "--id", HOSTILE_ID, "--format", "table"],
        code=0,
        check=no_terminal_escapes,
    ),
    # 7. A one-line JSONL whose only line is bad: an error record and exit 1, as for many lines.
    Case(
        "jsonl-only-line-empty",
        ["score", "{tmp}/one.jsonl", "--format", "jsonl"],
        stdin=None,
        code=1,
        stderr_has=["is empty"],
        prepare=one_line('{"id": "x", "text": "   "}'),
        check=one_error_record,
    ),
    Case(
        "jsonl-only-line-no-text",
        ["score", "{tmp}/one.jsonl", "--format", "jsonl"],
        stdin=None,
        code=1,
        stderr_has=["field 'text'"],
        prepare=one_line('{"id": "x", "body": "hello"}'),
        check=one_error_record,
    ),
    Case(
        "jsonl-only-line-not-object",
        ["score", "{tmp}/one.jsonl", "--format", "jsonl"],
        stdin=None,
        code=1,
        stderr_has=["expected a JSON object"],
        prepare=one_line("[1, 2]"),
        check=one_error_record,
    ),
    # 5. A model whose bytes changed in place (same size).
    Case(
        "model-changed-list",
        ["model", "list", "--json"],
        stdin=None,
        code=0,
        prepare=changed_in_place,
        check=listed_as_changed,
        model_path=False,
    ),
    Case(
        "model-changed-verify",
        ["model", "verify", "smollm2-135m"],
        stdin=None,
        code=1,
        prepare=changed_in_place,
        model_path=False,
        check=lambda proc, _tmp: (
            None
            if "MISMATCH" in proc.stdout and "triage model pull smollm2-135m" in proc.stdout
            else pytest.fail(proc.stdout)
        ),
    ),
    Case(
        "model-changed-score",
        ["score", "--model", "smollm2-135m"],
        code=1,
        stderr_has=["sha256", "triage model pull smollm2-135m"],
        stdout_empty=True,
        prepare=changed_in_place,
    ),
    # 8. Small things: a doubled "at"; the progress bar counting the prior as a row; a missing question.
    Case(
        "jsonl-unterminated-string",
        ["score", "{tmp}/one.jsonl", "--format", "jsonl"],
        stdin=None,
        code=1,
        stderr_has=["not valid JSON (Unterminated string starting at column 21)"],
        prepare=one_line('{"id": "x", "text": "unterminated}'),
        check=lambda proc, _tmp: None if "at at" not in proc.stderr + proc.stdout else pytest.fail(proc.stderr),
    ),
    Case(
        "eval-progress-counts-rows",
        ["eval", "{tmp}/labels.jsonl", "--no-baseline"],
        stdin=None,
        code=0,
        stderr_has=["3/3"],
        check=lambda proc, _tmp: None if "4/4" not in proc.stderr else pytest.fail(proc.stderr),
    ),
    Case(
        "pack-missing-question",
        ["score", "--pack", "{tmp}/noq.toml"],
        code=2,
        stderr_has=["'question'"],
        stdout_empty=True,
        prepare=pack_without_question,
    ),
    # Cases the issue found handled well: they must stay so.
    Case("bad-config-toml", ["score"], code=1, stderr_has=["is not valid TOML"], prepare=config("n_ctx = [\n")),
    Case("invalid-utf8", ["score"], stdin=b"caf\xe9 au lait", code=2, stderr_has=["not valid UTF-8"]),
    Case("empty-stdin", ["score"], stdin="", code=2, stderr_has=["empty"]),
    Case("missing-ticket-file", ["score", "{tmp}/none.txt"], stdin=None, code=2, stderr_has=["does not exist"]),
    Case("unknown-model", ["score", "--model", "no-such-model"], code=2, stderr_has=["unknown model"]),
    Case("not-a-gguf", ["score", "--model", "{tmp}/labels.jsonl"], code=2, stderr_has=["not a GGUF"]),
    Case(
        "damaged-stable-cache",
        ["score", "--format", "json"],
        code=0,
        prepare=damaged_stable_cache,
    ),
    # 4. Threads.
    *[
        Case(
            f"threads-{t}",
            ["score", "--threads", str(t)],
            code=2,
            stderr_has=[THREADS],
            stdout_empty=True,
            one_thread=False,
        )
        for t in (0, -3, 999)
    ],
    Case(
        "threads-in-config",
        ["score"],
        code=2,
        stderr_has=[THREADS, "threads = 0"],
        prepare=config("threads = 0\n"),
        one_thread=False,
    ),
]


@pytest.fixture(scope="module")
def labels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("labels")
    rows = [
        {"id": "r1", "text": "I am furious, refund me now", "labels": {"mood": "angry"}},
        {"id": "r2", "text": "Thanks, all good", "labels": {"mood": "calm"}},
        {"id": "r3", "text": "This is the third time I write!", "labels": {"mood": "angry"}},
    ]
    (folder / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (folder / "mini.toml").write_text(MINI_PACK, encoding="utf-8")
    return folder


@pytest.mark.model
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_hostile_input(case: Case, smollm2_path: Path, triage_home: Path, tmp_path: Path, labels: Path) -> None:
    for f in labels.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    held = case.prepare(triage_home, tmp_path, smollm2_path) if case.prepare else None
    args = [a.replace("{tmp}", str(tmp_path)) for a in case.args]
    if case.model_path and "--model" not in args:
        args += ["--model", str(smollm2_path)]
    if case.one_thread and args[0] != "model":
        args += ["--threads", "1"]
    if args[0] in ("score", "eval", "calibrate") and "--pack" not in args:
        args += ["--pack", str(tmp_path / "mini.toml")]
    try:
        proc = run_triage(args, triage_home, stdin=case.stdin)
    finally:
        if held is not None:
            held.close()
    assert_clean(proc)
    if case.code is not None:
        assert proc.returncode == case.code, proc.stderr[-2000:]
    for text in case.stderr_has:
        assert text in proc.stderr, proc.stderr[-2000:]
    if case.stdout_empty:
        assert proc.stdout == ""
    if case.check:
        case.check(proc, tmp_path)


@pytest.mark.model
def test_the_app_shows_a_bad_context_size_instead_of_dying(smollm2_path: Path, triage_home: Path) -> None:
    """`triage --n-ctx 16`: the app used to abort in llama.cpp while loading, leaving the terminal raw."""
    script = f"""
import asyncio, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from fake_engine import ui_options
from triage.tui.app import make_app

async def main():
    app = make_app(ui_options(model={str(smollm2_path)!r}, n_ctx=16, threads=1))
    async with app.run_test() as pilot:
        for _ in range(600):
            if app.main.model_state != "loading":
                break
            await pilot.pause(0.05)
        print("STATE", app.main.model_state)
        print("NOTICE", app.main.notices.text)

asyncio.run(main())
"""
    env = {**os.environ, "TRIAGE_HOME": str(triage_home)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert_clean(proc)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "STATE failed" in proc.stdout
    assert SMALLEST in proc.stdout


def many_tickets(folder: Path, n: int = 12) -> Path:
    path = folder / "many.jsonl"
    texts = [
        "Where is my parcel?",
        "I was charged twice, refund me now!",
        "Thanks for the quick help.",
        "The app crashes on login.",
    ]
    path.write_text(
        "".join(json.dumps({"id": f"t{i}", "text": f"{texts[i % 4]} (case {i})"}) + "\n" for i in range(n)),
        encoding="utf-8",
    )
    return path


@pytest.mark.model
@pytest.mark.parametrize("fmt", [None, "json"])
def test_interrupt_keeps_every_record_already_written(
    fmt: str | None, smollm2_path: Path, triage_home: Path, tmp_path: Path
) -> None:
    """Ctrl-C after the first record: what was written is whole and parses (issue 15, defect 6)."""
    import signal

    (tmp_path / "mini.toml").write_text(MINI_PACK, encoding="utf-8")
    args = [
        sys.executable,
        "-m",
        "triage.cli",
        "score",
        str(many_tickets(tmp_path)),
        "--model",
        str(smollm2_path),
        "--threads",
        "1",
        "--pack",
        str(tmp_path / "mini.toml"),
    ] + (["--format", fmt] if fmt else [])
    proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TRIAGE_HOME": str(triage_home)},
        # A test run started in the background by a non-interactive shell ignores SIGINT, and a child
        # inherits that (triage then rightly leaves it ignored): give the child Ctrl-C as a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None
    seen = b""
    first_done = b"\n}" if fmt is None else b"\n  }"  # the end of the first record
    try:
        while (b"}\n" if fmt is None else first_done) not in seen:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            seen += chunk
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    out, stderr = (seen + rest).decode("utf-8"), err.decode("utf-8")
    assert TRACEBACK not in stderr
    assert proc.returncode == 130, stderr
    if fmt is None:  # the default for JSON Lines input: one record per line
        records = [json.loads(line) for line in out.splitlines()]
    else:
        records = json.loads(out)  # the array was closed
    assert 1 <= len(records) < 12, out
    assert [r["ticket_id"] for r in records] == [f"t{i}" for i in range(len(records))]
    assert all(r["schema"] == "triage.result/3" and r["complete"] for r in records)
    assert f"interrupted after {len(records)} of 12" in stderr


def test_a_missing_question_is_called_missing(triage_home: Path, tmp_path: Path) -> None:
    pack_without_question(triage_home, tmp_path, tmp_path)
    proc = run_triage(
        ["score", "--pack", str(tmp_path / "noq.toml"), "--model", "/nonexistent.gguf"], triage_home, stdin="hello"
    )
    assert_clean(proc)
    assert "field 'question' is missing" in proc.stderr and "NoneType" not in proc.stderr
