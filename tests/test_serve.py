"""``triage serve`` on the real smollm2 model: the server runs on a free port of 127.0.0.1 in this
process (uvicorn in a thread), started and stopped by each test; the CLI it is compared with runs
in a subprocess."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from triage.domain.pack import default_pack
from triage.scoring.options import ScoreOptions

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from triage.serve.app import ServeSettings, log_safe  # noqa: E402
from triage.serve.local import serving  # noqa: E402

TICKETS = [
    "I was charged twice for my subscription this month, please refund the second payment.",
    "Where is my parcel? The tracking page has said 'in transit' for nine days.",
    "The app crashes every time I open the settings page on Android 14.",
    "Please close my account and delete all of my personal data.",
]
N_CTX = 2048


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[Any]:
    from triage.scoring.loader import load_engine

    eng = load_engine(str(smollm2_path), n_ctx=N_CTX)
    yield eng
    eng.close()


def settings(**kw: Any) -> ServeSettings:
    pack = default_pack()
    return ServeSettings(packs={pack.name: pack}, **kw)


def request(
    base: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, raw: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, data, hdrs)
    r = conn.getresponse()
    out = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    conn.close()
    return out


def post(base: str, body: Any, **kw: Any) -> tuple[int, dict[str, Any]]:
    status, _, data = request(base, "POST", "/v1/score", body, **kw)
    return status, json.loads(data)


def events_of(data: bytes) -> list[tuple[str, Any]]:
    out = []
    for block in data.decode().split("\n\n"):
        if not block.strip():
            continue
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def probabilities(result: dict[str, Any]) -> dict[tuple[str, str], float]:
    return {(c["id"], o["id"]): o["probability"] for c in result["criteria"] for o in c["options"]}


@pytest.mark.model
def test_score_equals_the_cli(engine: Any, smollm2_path: Path, triage_home: Path) -> None:
    body = {"id": "T-1", "text": TICKETS[0], "criteria": ["queue", "urgency", "sentiment"]}
    with serving(engine, settings()) as (base, _):
        status, got = post(base, body)
    assert status == 200
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "triage.cli",
            "score",
            "--model",
            str(smollm2_path),
            "--n-ctx",
            str(N_CTX),
            "--id",
            "T-1",
            "--criteria",
            "queue,urgency,sentiment",
            "--format",
            "json",
        ],
        input=TICKETS[0],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TRIAGE_HOME": str(triage_home), "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert cli.returncode == 0, cli.stderr
    want = json.loads(cli.stdout)
    assert got["schema"] == want["schema"] == "triage.result/3"
    assert set(got) == set(want)
    assert [c["id"] for c in got["criteria"]] == ["queue", "urgency", "sentiment"]
    assert got["ticket_sha256"] == want["ticket_sha256"] and got["prompt_format"] == want["prompt_format"]
    assert [c["choice"] for c in got["criteria"]] == [c["choice"] for c in want["criteria"]]
    mine, theirs = probabilities(got), probabilities(want)
    assert mine.keys() == theirs.keys()
    assert max(abs(mine[k] - theirs[k]) for k in mine) < 1e-6


@pytest.mark.model
def test_the_event_stream_gives_each_criterion_then_the_result(engine: Any) -> None:
    pack = default_pack()
    with serving(engine, settings()) as (base, _):
        status, headers, data = request(
            base, "POST", "/v1/score", {"id": "S-1", "text": TICKETS[1]}, headers={"Accept": "text/event-stream"}
        )
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = events_of(data)
    kinds = [k for k, _ in events]
    n = len(pack.criteria)
    assert kinds == ["queued", "prefilled"] + ["criterion"] * n + ["result"]
    result = events[-1][1]
    assert result["schema"] == "triage.result/3" and result["ticket_id"] == "S-1"
    streamed = [d for k, d in events if k == "criterion"]
    assert streamed == result["criteria"]  # each event is the result's entry for that criterion, as decided
    assert events[1][1]["criteria"] == n
    direct = engine.score_ticket(TICKETS[1], pack, ScoreOptions())
    assert probabilities(result) == pytest.approx(probabilities(direct.to_dict()), abs=1e-6)


@pytest.mark.model
def test_twenty_concurrent_requests_each_answered_once_with_the_queue_bounded(engine: Any) -> None:
    pack = default_pack()
    options = ScoreOptions(criteria=("queue", "urgency"))
    want = {t: probabilities(engine.score_ticket(t, pack, options).to_dict()) for t in TICKETS}
    answers: dict[str, list[dict[str, Any]]] = {}
    rejected: list[str] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        text = TICKETS[i % len(TICKETS)]
        while True:
            status, headers, data = request(
                base, "POST", "/v1/score", {"id": f"C-{i}", "text": text, "criteria": ["queue", "urgency"]}
            )
            if status == 503:
                retry = int(headers["retry-after"])
                assert retry >= 1 and json.loads(data)["error"].startswith("the queue is full")
                with lock:
                    rejected.append(f"C-{i}")
                time.sleep(min(retry, 0.5))
                continue
            assert status == 200, data
            with lock:
                answers.setdefault(f"C-{i}", []).append(json.loads(data))
            return

    with serving(engine, settings(), queue_limit=4) as (base, worker):
        threads = [threading.Thread(target=client, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        peak = 0
        while any(t.is_alive() for t in threads):
            peak = max(peak, worker.waiting)
            time.sleep(0.01)
        for t in threads:
            t.join()
        assert worker.stats.served == 20
        assert worker.stats.rejected == len(rejected)
    assert rejected, "20 clients on a queue of 4 must see the 503 path"
    assert peak <= 4
    assert sorted(answers) == sorted(f"C-{i}" for i in range(20))
    for tid, got in answers.items():
        assert len(got) == 1  # answered once
        result = got[0]
        assert result["ticket_id"] == tid
        assert probabilities(result) == pytest.approx(want[TICKETS[int(tid[2:]) % len(TICKETS)]], abs=1e-6)


@pytest.mark.model
def test_a_client_that_disconnects_mid_score_cancels_it_and_the_engine_stays_usable(engine: Any) -> None:
    pack = default_pack()
    fresh = probabilities(engine.score_ticket(TICKETS[2], pack, ScoreOptions()).to_dict())
    with serving(engine, settings()) as (base, worker):
        u = urlsplit(base)
        sock = socket.create_connection((u.hostname, u.port), timeout=60)
        body = json.dumps({"id": "D-1", "text": TICKETS[3] * 8}).encode()
        sock.sendall(
            b"POST /v1/score HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n" % (u.port, len(body)) + body
        )
        seen = b""
        while b"event: queued" not in seen:
            chunk = sock.recv(4096)
            assert chunk, "the stream ended before the ticket was queued"
            seen += chunk
        sock.close()  # mid-score: the long ticket's one fanout decode is stopped inside llama.cpp
        deadline = time.monotonic() + 60
        while worker.stats.cancelled + worker.stats.served < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert worker.stats.cancelled == 1 and worker.stats.served == 0
        status, got = post(base, {"id": "D-2", "text": TICKETS[2]})
        assert status == 200 and got["complete"] is True
        assert probabilities(got) == pytest.approx(fresh, abs=1e-6)
        _, _, health = request(base, "GET", "/v1/health")
        assert json.loads(health)["cancelled"] == 1


@pytest.mark.model
def test_a_waiting_request_whose_client_went_away_is_never_started(engine: Any) -> None:
    with serving(engine, settings()) as (base, worker):
        u = urlsplit(base)
        busy = socket.create_connection((u.hostname, u.port), timeout=60)  # keeps the engine busy, streaming
        body = json.dumps({"id": "W-1", "text": TICKETS[3] * 4}).encode()
        busy.sendall(
            b"POST /v1/score HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n" % (u.port, len(body)) + body
        )
        seen = b""
        while b"event: queued" not in seen:
            seen += busy.recv(4096)
        gone = socket.create_connection((u.hostname, u.port), timeout=60)  # plain JSON, waits behind it
        body = json.dumps({"id": "W-2", "text": TICKETS[0]}).encode()
        gone.sendall(
            b"POST /v1/score HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (u.port, len(body)) + body
        )
        deadline = time.monotonic() + 30
        while worker.waiting < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert worker.waiting == 1
        gone.close()
        while b"event: result" not in seen and time.monotonic() < deadline + 60:
            chunk = busy.recv(65536)
            assert chunk
            seen += chunk
        busy.close()
        while worker.stats.cancelled < 1 and time.monotonic() < deadline + 60:
            time.sleep(0.02)
        assert worker.stats.served == 1 and worker.stats.cancelled == 1 and worker.waiting == 0


@pytest.mark.model
def test_limits_and_bad_requests_get_their_status_and_the_server_stays_up(engine: Any) -> None:
    with serving(engine, settings(max_ticket_bytes=1000)) as (base, worker):
        status, body = post(base, {"id": "L-1", "text": "x" * 1001})
        assert status == 413 and "1,001 bytes" in body["error"]
        status, _, _ = request(base, "POST", "/v1/score", raw=b"{" + b" " * 7_000_000 + b"}")
        assert status == 413
        cases = [
            ({"id": "L-2"}, "text"),
            ({"text": 5}, "text"),
            ({"text": "   "}, "text"),
            ({"text": "hi", "mode": "fast"}, "mode"),
            ({"text": "hi", "readout": 3}, "readout"),
            ({"text": "hi", "criteria": ["queue", "nope"]}, "criteria"),
            ({"text": "hi", "criteria": []}, "criteria"),
            ({"text": "hi", "pack": "other"}, "pack"),
            ({"text": "hi", "prior": "yes"}, "prior"),
            ({"text": "hi", "colour": "red"}, "colour"),
            ({"text": "hi", "id": {"a": 1}}, "id"),
            ({"messages": []}, "messages"),
            ({"messages": "hi"}, "messages"),
            ({"messages": [{"role": "boss", "text": "hi"}]}, "messages"),
            ({"messages": [{"role": "agent"}]}, "messages"),
            ({"text": "hi", "messages": [{"role": "customer", "text": "hi"}]}, "messages"),
            ([1, 2], "body"),
        ]
        for case, field in cases:
            status, body = post(base, case)
            assert (status, body.get("field")) == (422, field), (case, body)
            assert body["error"]
            if field in ("mode", "readout", "prior"):  # removed fields: what replaced them, not "unknown"
                assert body["error"].startswith(f"field '{field}' was removed: "), body
        for raw in (b"{not json", b"\xff\xfe", b"[" * 10_000 + b"]" * 10_000):
            status, _, data = request(base, "POST", "/v1/score", raw=raw)
            assert status == 422 and json.loads(data)["field"] == "body"
        status, _, _ = request(base, "POST", "/v1/score", {"text": "hi"}, headers={"Content-Type": "text/plain"})
        assert status == 422  # a browser sends text/plain cross-origin without a preflight: refused
        status, _, _ = request(base, "GET", "/v1/health", headers={"Host": "attacker.example:80"})
        assert status == 421  # DNS rebinding: a loopback server answers only its own names
        status, _, _ = request(base, "GET", "/nothing-here")
        assert status == 404
        status, _, _ = request(base, "GET", "/static/../../etc/passwd")
        assert status == 404
        status, got = post(base, {"id": "L-3", "text": TICKETS[0], "criteria": "queue"})
        assert status == 200 and [c["id"] for c in got["criteria"]] == ["queue"]
        assert worker.stats.served == 1 and worker.stats.failed == 0


@pytest.mark.model
def test_a_token_is_required_on_every_api_request(engine: Any) -> None:
    token = "s3cret-token-1234"
    with serving(engine, settings(token=token)) as (base, _):
        for method, path in (
            ("GET", "/v1/health"),
            ("GET", "/openapi.json"),
            ("POST", "/v1/score"),
            ("POST", "/v1/label"),
        ):
            status, headers, _ = request(base, method, path, {"text": "hi"})
            assert status == 401 and headers["www-authenticate"].startswith("Bearer")
            status, _, _ = request(base, method, path, {"text": "hi"}, headers={"Authorization": "Bearer wrong"})
            assert status == 401
        status, _, data = request(base, "GET", "/v1/health", headers={"Authorization": f"Bearer {token}"})
        assert status == 200 and json.loads(data)["model"]["sha256"] == engine.sha256
        status, _, page = request(base, "GET", "/")  # the page holds no data: it asks for the token
        assert status == 200 and b"<textarea" in page


@pytest.mark.model
def test_cors_only_for_the_allowed_origin(engine: Any) -> None:
    with serving(engine, settings()) as (base, _):
        _, headers, _ = request(base, "GET", "/v1/health", headers={"Origin": "https://evil.example"})
        assert not any(k.startswith("access-control-") for k in headers)
    origin = "https://helpdesk.example"
    with serving(engine, settings(allow_origin=origin)) as (base, _):
        status, headers, _ = request(
            base,
            "OPTIONS",
            "/v1/score",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert status == 200 and headers["access-control-allow-origin"] == origin
        status, headers, _ = request(
            base,
            "OPTIONS",
            "/v1/score",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert status == 400 and "access-control-allow-origin" not in headers


@pytest.mark.model
def test_label_records_as_triage_label_does(engine: Any, tmp_path: Path) -> None:
    from triage.store import labels as lab
    from triage.store.history import History

    path = tmp_path / "history.sqlite3"
    with serving(engine, settings(history_path=path)) as (base, _):
        status, got = post(base, {"id": "H-1", "text": TICKETS[1], "history": True})
        assert status == 200
        status, _, data = request(base, "POST", "/v1/label", {"id": "H-1", "labels": {"queue": "Shipping"}})
        assert status == 200, data
        stored = json.loads(data)["stored"]
        shown = next(c["choice"] for c in got["criteria"] if c["id"] == "queue")
        assert stored == [
            {
                "criterion": "queue",
                "option": "shipping",
                "kind": "confirmation" if shown == "shipping" else "correction",
                "shown_option": shown,
            }
        ]
        for body, field in (
            ({"id": "nope", "labels": {"queue": "shipping"}}, "id"),
            ({"id": "H-1", "labels": {"queue": "no-such-option"}}, "labels"),
            ({"id": "H-1", "labels": {"colour": "red"}}, "labels"),
            ({"id": "H-1", "labels": {}}, "labels"),
            ({"labels": {"queue": "x"}}, "id"),
        ):
            status, _, data = request(base, "POST", "/v1/label", body)
            assert status == 422 and json.loads(data)["field"] == field, (body, data)
        status, _, _ = request(base, "POST", "/v1/score", {"id": "H-2", "text": TICKETS[2]})
        assert status == 200
        status, _, data = request(base, "POST", "/v1/label", {"id": "H-2", "labels": {"queue": "technical"}})
        assert status == 422  # not kept: the server's --history is off and the request did not ask
    with History.open_writable(path) as history:
        scored = lab.find_ticket(history, "H-1")
        now = lab.current(history, scored.ticket_row)
        assert now["queue"].option == "shipping" and now["queue"].origin == "serve"
        assert lab.count(history) == 1


@pytest.mark.model
def test_health_and_openapi_describe_the_server(engine: Any) -> None:
    from triage.serve.requests import LABEL_FIELDS, SCORE_FIELDS
    from triage.serve.worker import DEFAULT_QUEUE_LIMIT

    with serving(engine, settings()) as (base, _):
        post(base, {"id": "O-1", "text": TICKETS[0]})
        post(base, {"id": "O-2", "text": TICKETS[1]})
        _, _, data = request(base, "GET", "/v1/health")
        health = json.loads(data)
        _, _, data = request(base, "GET", "/openapi.json")
        doc = json.loads(data)
    assert health["model"]["name"] == engine.name and health["packs"][0]["name"] == "support"
    assert health["queue"] == {"waiting": 0, "running": 0, "limit": DEFAULT_QUEUE_LIMIT}
    assert DEFAULT_QUEUE_LIMIT >= 50  # a burst of 50 waits (tests/test_serve_hardening.py sends it)
    assert health["served"] == 2 and health["stable_hit_rate"] == 1.0  # the stable block stays resident
    assert "head" in health and "calibration" in health
    paths = {
        "/v1/score",
        "/v1/prefill",
        "/v1/label",
        "/v1/tickets",
        "/v1/tickets/{ticket_id}",
        "/v1/health",
        "/openapi.json",
    }
    assert set(doc["paths"]) == paths
    assert set(doc["components"]["schemas"]["ScoreRequest"]["properties"]) == set(SCORE_FIELDS)
    assert set(doc["components"]["schemas"]["LabelRequest"]["properties"]) == set(LABEL_FIELDS)


@pytest.mark.parametrize(
    "value, logged",
    [
        ("/v1/\x1b[31mred", "/v1/\\x1b[31mred"),
        ("a\nb\rc", "a\\x0ab\\x0dc"),
        ("\u202eevil", "\\u202eevil"),
        ("x" * 300, "x" * 200 + "..."),
    ],
)
def test_request_strings_are_escaped_in_log_lines(value: str, logged: str) -> None:
    assert log_safe(value) == logged


def _cli(*args: str, home: Path, **kw: Any) -> Any:
    env = {**os.environ, "TRIAGE_HOME": str(home), "PYTHONPATH": str(Path(__file__).parents[1])}
    env.pop("TRIAGE_SERVE_TOKEN", None)
    return subprocess.Popen(
        [sys.executable, "-m", "triage.cli", "serve", *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


@pytest.mark.parametrize(
    "args, said",
    [
        (["--host", "0.0.0.0"], "that needs a token"),
        (["--token", "short"], "at least 8"),
        (["--port", "70000"], "is not a port"),
        (["--allow-origin", "*"], "is not one origin: a wildcard"),
        (["--allow-origin", "https://*.example.com"], "is not one origin: a wildcard"),
        (["--allow-origin", "https://helpdesk.example/app"], "it has a path"),
        (["--allow-origin", "https://helpdesk.example/"], "use https://helpdesk.example"),
        (["--allow-origin", "https://a.example,https://b.example"], "more than one"),
        (["--allow-origin", "https://a.example https://b.example"], "more than one"),
        (["--queue-limit", "0"], "at least 1"),
        (["--max-connections", "0"], "at least 1"),
        (["--header-timeout", "0"], "above 0"),
    ],
)
def test_serve_refuses_unsafe_or_bad_settings_before_loading_a_model(
    args: list[str], said: str, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRIAGE_SERVE_TOKEN", raising=False)
    ran = cli(["serve", "--model", "/nonexistent.gguf", *args])
    assert ran.returncode == 2 and said in ran.stderr and ran.stdout == ""
    assert "serving" not in ran.stderr


def test_serve_refuses_a_bad_setting_in_its_own_process(triage_home: Path) -> None:
    """The same refusal from `triage serve` as a user starts it: exit status 2, one message, nothing served."""
    proc = _cli("--model", "/nonexistent.gguf", "--host", "0.0.0.0", home=triage_home)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "that needs a token" in err and out == ""
    assert "serving" not in err and "Traceback" not in err


@pytest.mark.model
def test_triage_serve_starts_says_so_and_stops_on_sigterm(smollm2_path: Path, triage_home: Path) -> None:
    import signal

    from triage.serve.local import free_port

    port = free_port()
    token = "a-long-enough-token"
    proc = _cli(
        "--model", str(smollm2_path), "--n-ctx", "2048", "--port", str(port), "--token", token, home=triage_home
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                status, _, data = request(base, "GET", "/v1/health", headers={"Authorization": f"Bearer {token}"})
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.2)
        assert status == 200 and json.loads(data)["n_ctx"] == N_CTX
        status, _, data = request(
            base,
            "POST",
            "/v1/score",
            {"id": "CLI-\x1b[2J1", "text": TICKETS[0]},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert status == 200 and json.loads(data)["ticket_id"] == "CLI-\x1b[2J1"
        status, _, _ = request(base, "GET", "/v1/health%1b]0;pwned%07")
        assert status == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143  # SIGTERM, as for every triage command (triage.signals)
    assert f"on http://127.0.0.1:{port}/" in err and "a bearer token is required" in err
    assert "POST /v1/score 200" in err
    assert "\x1b" not in err and "\\x1b]0;pwned\\x07" in err  # the path is in the log, escaped


def test_the_page_assets_ship_as_package_data() -> None:
    import tomllib

    from triage.serve.app import STATIC

    root = Path(__file__).parents[1]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["triage"]
    static = root / "triage" / "serve" / "static"
    files = sorted(p.name for p in static.iterdir())
    assert files == sorted(name for name, _ in STATIC.values())  # the page uses every file, and only these
    for name in files:
        assert any(Path("serve/static", name).match(g) for g in globs), f"{name} matches no package-data glob"


def test_the_queue_limit_comes_from_the_flag_then_the_config_then_the_default() -> None:
    from triage.cli import build_parser
    from triage.commands.serve import settings_of
    from triage.errors import InputError
    from triage.serve.worker import DEFAULT_QUEUE_LIMIT

    parse = build_parser().parse_args
    assert settings_of(parse(["serve"]), {})[1] == DEFAULT_QUEUE_LIMIT
    assert settings_of(parse(["serve"]), {"serve_queue_limit": 3})[1] == 3
    assert settings_of(parse(["serve", "--queue-limit", "5"]), {"serve_queue_limit": 3})[1] == 5
    with pytest.raises(InputError, match="serve_queue_limit = 0 must be a whole number of at least 1"):
        settings_of(parse(["serve"]), {"serve_queue_limit": 0})


def test_serve_keeps_the_history_by_default_and_no_history_turns_it_off(tmp_path: Path) -> None:
    from triage.cli import build_parser
    from triage.commands.serve import settings_of

    parse = build_parser().parse_args
    assert settings_of(parse(["serve"]), {})[0].history is True  # as the app keeps it
    assert settings_of(parse(["serve", "--history"]), {})[0].history is True
    assert settings_of(parse(["serve", "--no-history"]), {})[0].history is False
    kept = settings_of(parse(["serve", "--no-history", "--history-file", str(tmp_path / "h.sqlite3")]), {})[0]
    assert kept.history is False and kept.history_path == tmp_path / "h.sqlite3"  # still read and labelled
    with pytest.raises(SystemExit):
        parse(["serve", "--history", "--no-history"])


@pytest.mark.model
def test_a_thread_sent_again_with_a_reply_evaluates_only_the_reply(engine: Any) -> None:
    first = [{"role": "customer", "text": TICKETS[0]}]
    grown = [*first, {"role": "agent", "text": "Sorry about that; I have asked the team to look at it today."}]
    with serving(engine, settings()) as (base, _):
        status, one = post(base, {"id": "TH-1", "messages": first})
        assert status == 200 and one["thread"]["messages"] == 1
        status, two = post(base, {"id": "TH-1", "messages": grown})
    assert status == 200 and two["thread"]["messages"] == 2 and two["thread"]["previous"] == 1
    reply = len(engine.tokenizer.encode("\n\nAgent reply:\n" + grown[1]["text"]))
    assert two["thread"]["reused"] > 0
    assert two["tokens"]["evaluated"] - two["tokens"]["tails"] <= reply + 4  # the reply, the tails' lead, one trim


@pytest.mark.model
def test_sigterm_stops_a_real_decode_and_answers_the_queue_with_json(
    smollm2_path: Path, triage_home: Path, tmp_path: Path
) -> None:
    import signal
    import sqlite3

    from triage.serve.local import free_port

    port = free_port()
    path = tmp_path / "history.sqlite3"
    proc = _cli(
        "--model",
        str(smollm2_path),
        "--n-ctx",
        "2048",
        "--threads",
        "1",
        "--port",
        str(port),
        "--history",
        "--history-file",
        str(path),
        home=triage_home,
    )
    base = f"http://127.0.0.1:{port}"
    answers: dict[str, tuple[int, dict[str, Any]]] = {}

    def ask(tid: str, text: str) -> None:
        status, _, data = request(base, "POST", "/v1/score", {"id": tid, "text": text})
        answers[tid] = (status, json.loads(data))

    def queue() -> dict[str, int]:
        return json.loads(request(base, "GET", "/v1/health")[2])["queue"]

    threads: list[threading.Thread] = []
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                queue()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.2)
        long = " ".join(TICKETS) * 12  # the context's worth of ticket: a prefill of seconds on one thread
        threads.append(threading.Thread(target=ask, args=("RUN", long)))
        threads[0].start()
        while queue()["running"] != 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        threads += [threading.Thread(target=ask, args=(f"W-{i}", TICKETS[i])) for i in range(2)]
        for t in threads[1:]:
            t.start()
        while queue()["waiting"] != 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        for t in threads:
            t.join(30)
    assert proc.returncode == 143, (proc.returncode, err[-3000:])
    status, body = answers["RUN"]  # stopped inside its decode: an answer of 503, not a result
    assert status == 503 and "stopped while this ticket was being scored" in body["error"], body
    for tid in ("W-0", "W-1"):
        assert answers[tid][0] == 503 and answers[tid][1]["error"].startswith("the server is stopping")
    assert "Traceback" not in err and err.rstrip().endswith("triage: terminated")
    with sqlite3.connect(path) as db:
        assert [s for (s,) in db.execute("SELECT status FROM scores")] == ["cancelled"]
