"""``triage score --server URL``: tickets scored by a running ``triage serve`` (a real subprocess on smollm2-135m,
one thread, a free port of 127.0.0.1) give the records local scoring gives; a server that cannot be used is one
line and a non-zero exit (a refused connection; 401; 422; and, from a scripted stdlib server, 503, 502 and an
answer that is not triage's)."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from triage.cli import main
from triage.serve.local import free_port

ROOT = Path(__file__).parents[1]
TOKEN = "cli-day-test-token"
N_CTX = "2048"
TICKETS = [
    {"id": "S-1", "text": "I was charged twice for my subscription this month, please refund the second payment."},
    {"id": "S-2", "messages": [{"role": "customer", "text": "Where is my parcel? Nine days in transit."}]},
    {"id": "S-3", "text": "The app crashes every time I open the settings page."},
    {
        "id": "S-2",
        "messages": [
            {"role": "customer", "text": "Where is my parcel? Nine days in transit."},
            {"role": "agent", "text": "Sorry! I have asked the carrier today."},
        ],
    },
]


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "TRIAGE_HOME": str(home), "PYTHONPATH": str(ROOT), **extra}
    for key in ("TRIAGE_SERVER", "TRIAGE_SERVE_TOKEN", "TRIAGE_MODEL"):
        if key not in extra:
            env.pop(key, None)
    return env


def _score(home: Path, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "triage.cli", "score", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(home, **env),
    )


@pytest.fixture(scope="module")
def server(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``triage serve`` on smollm2 (one thread, a token, tickets of at most 2,000 bytes), stopped at the end."""
    home = tmp_path_factory.mktemp("serve-home")
    port = free_port()
    args = ["--model", str(smollm2_path), "--n-ctx", N_CTX, "--threads", "1", "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "triage.cli", "serve", *args, "--token", TOKEN, "--max-ticket-bytes", "2000"],
        env=_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    health = urllib.request.Request(f"{url}/v1/health", headers={"Authorization": f"Bearer {TOKEN}"})
    deadline = time.monotonic() + 180
    try:
        while True:
            try:
                with urllib.request.urlopen(health, timeout=5) as r:
                    assert r.status == 200
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"triage serve did not start: {proc.stderr.read() if proc.stderr else ''}")
                time.sleep(0.25)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def _records(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def _probabilities(record: dict[str, Any]) -> dict[tuple[str, str], float]:
    return {(c["id"], o["id"]): o["probability"] for c in record["criteria"] for o in c["options"]}


@pytest.mark.model
def test_jsonl_with_a_thread_and_a_bad_line_gives_the_records_of_local_scoring(
    server: str, smollm2_path: Path, triage_home: Path, tmp_path: Path
) -> None:
    f = tmp_path / "tickets.jsonl"
    lines = [json.dumps(t) for t in TICKETS]
    lines.insert(2, "{not json")
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    remote = _score(triage_home, str(f), "--server", server, "--token", TOKEN)
    local = _score(triage_home, str(f), "--model", str(smollm2_path), "--n-ctx", N_CTX, "--threads", "1")
    assert remote.returncode == local.returncode == 1, remote.stderr  # the bad line: an error record, exit 1
    assert f"triage: scoring on the server at {server} (smollm2-135m" in remote.stderr
    assert "no model loaded here" in remote.stderr
    assert "scoring on the server" not in local.stderr
    got, want = _records(remote.stdout), _records(local.stdout)
    assert [r.get("ticket_id") for r in got] == ["S-1", "S-2", None, "S-3", "S-2"]
    assert got[2] == want[2] == {"ticket_id": None, "line": 3, "error": got[2]["error"]}
    for mine, theirs in zip(got, want, strict=True):
        if "error" in mine:
            continue
        assert mine["schema"] == theirs["schema"] == "triage.result/3" and set(mine) == set(theirs)
        assert [c["choice"] for c in mine["criteria"]] == [c["choice"] for c in theirs["criteria"]]
        p, q = _probabilities(mine), _probabilities(theirs)
        assert p.keys() == q.keys() and max(abs(p[k] - q[k]) for k in p) < 1e-6
    # the thread came back with a reply: the server reused what it kept, as local scoring does
    assert got[4]["thread"]["messages"] == 2 and got[4]["thread"]["previous"] == 1 and got[4]["thread"]["reused"] > 0
    assert want[4]["thread"]["previous"] == 1


@pytest.mark.model
def test_env_vars_a_table_criteria_and_a_pack_checked_against_the_server(server: str, triage_home: Path) -> None:
    env = {"TRIAGE_SERVER": server, "TRIAGE_SERVE_TOKEN": TOKEN}
    one = _score(triage_home, "--criteria", "queue,urgency", "--format", "json", stdin="Refund me now", **env)
    assert one.returncode == 0, one.stderr
    record = json.loads(one.stdout)
    assert [c["id"] for c in record["criteria"]] == ["queue", "urgency"]
    table = _score(triage_home, "--format", "table", "--pack", str(ROOT / "assets" / "support.toml"), stdin="Hi", **env)
    assert table.returncode == 0 and "criterion" in table.stdout and "queue" in table.stdout, table.stderr
    support = (ROOT / "assets" / "support.toml").read_text(encoding="utf-8")
    renamed, edited = triage_home / "renamed.toml", triage_home / "edited.toml"
    renamed.write_text(support.replace('name = "support"', 'name = "team"'), encoding="utf-8")
    edited.write_text(support.replace("Which team should handle", "Which group should handle"), encoding="utf-8")
    for pack, said in ((renamed, "has no pack named 'team' (it has: support)"), (edited, "their hashes differ")):
        bad = _score(triage_home, "--pack", str(pack), stdin="Hi", **env)
        assert bad.returncode == 2 and bad.stdout == "" and said in bad.stderr, bad.stderr


@pytest.mark.model
@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([], "needs a token (401)"),
        (["--token", "not-the-right-one"], "refused the token (a wrong one) (401)"),
        (["--token", TOKEN, "--criteria", "colour"], "refused the request: pack 'support' has no criterion 'colour'"),
    ],
)
def test_a_refusal_for_the_whole_run_is_one_line_and_exit_2(
    server: str, triage_home: Path, args: list[str], said: str
) -> None:
    done = _score(triage_home, "--server", server, *args, stdin="Where is my parcel?")
    assert done.returncode == 2 and done.stdout == ""
    error = [line for line in done.stderr.splitlines() if line.startswith("triage: error:")]
    assert len(error) == 1 and said in error[0], done.stderr


@pytest.mark.model
def test_a_ticket_the_server_refuses_gets_an_error_record_and_the_rest_are_scored(
    server: str, triage_home: Path, tmp_path: Path
) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(
        json.dumps({"id": "big", "text": "word " * 600}) + "\n" + json.dumps({"id": "ok", "text": "Hello"}) + "\n",
        encoding="utf-8",
    )
    done = _score(triage_home, str(f), "--server", server, "--token", TOKEN, "--criteria", "queue")
    assert done.returncode == 1
    big, ok = _records(done.stdout)
    assert big["ticket_id"] == "big" and "at most 2,000" in big["error"] and "HTTP 413" in big["error"]
    assert ok["ticket_id"] == "ok" and ok["schema"] == "triage.result/3"
    # one plain-text ticket the server refuses: exit 2 and nothing on stdout, as locally
    single = _score(triage_home, "--server", server, "--token", TOKEN, stdin="word " * 600)
    assert single.returncode == 2 and single.stdout == "" and "HTTP 413" in single.stderr


def test_a_refused_connection_is_one_line_and_exit_2(triage_home: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    done = _score(triage_home, "--server", url, stdin="Where is my parcel?")
    assert done.returncode == 2 and done.stdout == ""
    assert f"triage: error: cannot reach the server at {url}: connection refused" in done.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--model", "smollm2-135m"], "--model is for scoring here, but --server sends the tickets to a server"),
        (["--threads", "1"], "--threads is for scoring here"),
        (["--ray"], "--ray is for scoring here"),
        (["--no-head"], "--no-head is for scoring here"),
    ],
)
def test_flags_for_a_local_model_are_refused_with_server(args: list[str], said: str, capsys, monkeypatch) -> None:
    monkeypatch.setattr("sys.stdin", open(os.devnull))  # never read: refused first
    assert main(["score", "--server", "http://127.0.0.1:9", *args]) == 2
    assert said in capsys.readouterr().err
    monkeypatch.setenv("TRIAGE_SERVER", "http://127.0.0.1:9")
    assert main(["score", *args]) == 2
    assert "TRIAGE_SERVER (http://127.0.0.1:9)" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["ftp://example", "127.0.0.1:8787", "http://", "http://h:99999"])
def test_a_bad_server_url_is_refused(url: str, capsys) -> None:
    assert main(["score", "--server", url]) == 2
    assert "--server" in capsys.readouterr().err


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers every request with the next of ``script``: (status, headers, body)."""

    script: list[tuple[int, dict[str, str], bytes]] = []
    seen: list[str] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        type(self).seen.append(f"{self.command} {self.path}")
        status, headers, body = type(self).script.pop(0)
        self.send_response(status)
        for k, v in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:  # keep the test's output clean
        pass


HEALTH = (200, {"Content-Type": "application/json"}, json.dumps({"model": {"name": "m"}, "packs": []}).encode())


@pytest.fixture
def scripted() -> Iterator[tuple[str, type[_Scripted]]]:
    handler = type("Handler", (_Scripted,), {"script": [], "seen": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize(
    ("script", "code", "said"),
    [
        (
            [HEALTH] + [(503, {"Retry-After": "0"}, b'{"error": "the queue is full: 16 waiting"}')] * 4,
            1,
            "is busy: its queue was still full after 4 tries (503)",
        ),
        (
            [HEALTH, (502, {"Content-Type": "text/html"}, b"<html>Bad Gateway</html>")],
            1,
            "failed: Bad Gateway (HTTP 502)",
        ),
        ([(200, {}, b'{"status": "ok"}')], 2, "does not answer as `triage serve` does"),
        ([(404, {}, b"not found")], 2, "does not answer as `triage serve` does"),
        ([HEALTH, (200, {}, b'{"schema": "triage.result/9"}')], 2, "answered triage.result/9, not triage.result/3"),
    ],
)
def test_what_a_server_answers_that_stops_the_run(
    scripted: tuple[str, type[_Scripted]], script: list[Any], code: int, said: str, capsys, monkeypatch
) -> None:
    url, handler = scripted
    handler.script.extend(script)
    f = Path(os.environ["TRIAGE_HOME"]) / "t.jsonl"
    f.write_text('{"id": "a", "text": "Hello"}\n{"id": "b", "text": "Again"}\n', encoding="utf-8")
    assert main(["score", str(f), "--server", url]) == code
    out, err = capsys.readouterr()
    assert out == "" and said in err, err
    assert err.count("triage: error:") == 1
    if "busy" in said:
        assert err.count("the server's queue is full (503); waiting 0 s") == 3
        assert handler.seen == ["GET /v1/health"] + ["POST /v1/score"] * 4
