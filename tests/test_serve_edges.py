"""Issue 42, part 4: secrets and inputs at ``triage serve``'s edges, on the scripted engine (tests/fake_engine.py).

The token comes from ``TRIAGE_SERVE_TOKEN`` or ``--token-file`` (a bounded read of a regular file), so
``ps`` never shows it; ``--token`` works and says that ``ps`` shows it. A token that is not printable ASCII
is refused at start, by ``serve`` and ``score --server`` alike. Query integers are ASCII digits with a
bound (422 naming the field otherwise). ``GET /v1/tickets`` is bounded (long threads summarised, long
texts cut), and ``GET /v1/tickets/{id}`` gives one whole. An internationalised ``--allow-origin`` is
matched in punycode. Servers bind 127.0.0.1 only and stop by themselves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from fake_engine import FakeEngine  # noqa: E402
from test_serve import request, settings  # noqa: E402
from test_serve_hardening import Served  # noqa: E402

from triage.cli import build_parser  # noqa: E402
from triage.commands.serve import check_origin, settings_of  # noqa: E402
from triage.domain.ticket import make_ticket  # noqa: E402
from triage.errors import InputError  # noqa: E402
from triage.serve import listing  # noqa: E402
from triage.serve.local import serving  # noqa: E402

TOKEN = "file-token-0123456789"


def _serve_args(*extra: str):
    return build_parser().parse_args(["serve", *extra])


# -- the token: from a file or the environment, never only from argv ------------------------------------


def test_the_token_comes_from_a_file_or_the_environment_and_argv_is_warned_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TRIAGE_SERVE_TOKEN", raising=False)
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n", encoding="utf-8")  # one trailing newline, as `echo` and `openssl rand` write
    got, _ = settings_of(_serve_args("--token-file", str(f)), {})
    assert got.token == TOKEN
    f.write_text(TOKEN + "\r\n", encoding="utf-8")
    assert settings_of(_serve_args("--token-file", str(f)), {})[0].token == TOKEN
    assert capsys.readouterr().err == ""  # nothing said: the file is the way
    monkeypatch.setenv("TRIAGE_SERVE_TOKEN", "env-token-0123456789")
    assert settings_of(_serve_args(), {})[0].token == "env-token-0123456789"
    assert settings_of(_serve_args("--token-file", str(f)), {})[0].token == TOKEN  # the flag beats the env
    assert capsys.readouterr().err == ""
    assert settings_of(_serve_args("--token", "argv-token-0123"), {})[0].token == "argv-token-0123"
    err = capsys.readouterr().err
    assert err.count("`ps` shows it to every user of this machine") == 1 and "--token-file" in err
    monkeypatch.setenv("TRIAGE_SERVE_TOKEN", "  ")  # blank: unset, so another host needs one
    with pytest.raises(InputError, match="that needs a token"):
        settings_of(_serve_args("--host", "0.0.0.0"), {})


def test_a_token_file_that_is_no_regular_small_text_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a FIFO of this test's own: opening it would block; it is never opened
    big = tmp_path / "big"
    big.write_bytes(b"a" * 5000)
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe" + b"t\x00" * 8)
    spaced = tmp_path / "spaced"
    spaced.write_text("two words here\n", encoding="utf-8")
    two = tmp_path / "two-newlines"
    two.write_text(TOKEN + "\n\n", encoding="utf-8")  # only one newline is stripped: the other is no token's
    for path, said in (
        (fifo, "is not a regular file"),
        (tmp_path, "is not a regular file"),
        (tmp_path / "missing", "No such file or directory"),
        (big, "is larger than 4096 bytes"),
        (binary, "is not text (not UTF-8)"),
        (spaced, "not printable ASCII or are spaces (the first at position 4)"),
        (two, "not printable ASCII or are spaces"),
    ):
        with pytest.raises(InputError) as caught:
            settings_of(_serve_args("--token-file", str(path)), {})
        assert said in caught.value.message, (path, caught.value.message)
        assert "two words" not in caught.value.message  # the secret is never shown
    with pytest.raises(InputError, match="--token and --token-file both give the token"):
        settings_of(_serve_args("--token-file", str(spaced), "--token", TOKEN), {})


@pytest.mark.parametrize(
    "token", ["tökentoken", "token\u00a0token", "tokentoken\u200b", "token\ttoken", "日本語のトークン"]
)
def test_a_token_that_is_not_printable_ascii_is_refused_at_start_by_serve_and_score(
    token: str, tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRIAGE_SERVE_TOKEN", raising=False)
    with pytest.raises(InputError, match="not printable ASCII or are spaces"):
        settings_of(_serve_args("--token", token), {})
    f = tmp_path / "t"
    f.write_text(token, encoding="utf-8")
    with pytest.raises(InputError, match="not printable ASCII"):
        settings_of(_serve_args("--token-file", str(f)), {})
    for args, env in (
        (["--token-file", str(f)], {}),
        (["--token", token], {}),
        ([], {"TRIAGE_SERVE_TOKEN": token}),
    ):
        ran = cli(["score", "--server", "http://127.0.0.1:9", *args], stdin="I was charged twice", env=env)
        assert ran.returncode == 2, ran.stderr
        assert "not printable ASCII or are spaces" in ran.stderr and "UnicodeEncodeError" not in ran.stderr
        assert token not in ran.stderr


def test_served_with_a_token_file_argv_holds_no_token_and_requests_need_it(tmp_path: Path) -> None:
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n", encoding="utf-8")
    f.chmod(0o600)
    served = Served(tmp_path / "home", "--token-file", str(f))
    try:
        served.wait_serving()
        cmdline = Path(f"/proc/{served.proc.pid}/cmdline").read_bytes()
        assert TOKEN.encode() not in cmdline and b"--token-file" in cmdline  # what `ps` shows
        assert request(served.base, "GET", "/v1/health")[0] == 401
        status, _, _ = request(served.base, "GET", "/v1/health", headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 200
    finally:
        assert served.stop() in (0, 143), served.stderr  # SIGTERM: 143, as a user's kill
    assert "`ps` shows it" not in served.stderr and TOKEN not in served.stderr


def test_serve_help_readme_and_docs_show_the_env_var_and_the_file_not_the_token_flag() -> None:
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-m", "triage.cli", "serve", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root), "COLUMNS": "200"},
        timeout=120,
    )
    assert proc.returncode == 0
    assert "--token-file" in proc.stdout and "TRIAGE_SERVE_TOKEN" in proc.stdout
    assert '--token "$(openssl' not in proc.stdout  # no example puts the token in argv
    for doc in ("README.md", "docs/serve.md"):
        text = (root / doc).read_text(encoding="utf-8")
        assert '--token "$(' not in text and "--token TOKEN" not in text, doc
        assert "--token-file" in text and "TRIAGE_SERVE_TOKEN" in text, doc


# -- query integers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "²",
        "¹",
        "①",
        "9" * 5000,
        "٣",
        "５０",
        "𝟓",
        "1_0",
        "+5",
        "-1",
        " 5",
        "5 ",
        "0x10",
        "1e2",
        "",
        "0",
        "201",
        "00050x",
    ],
)
def test_query_integers_are_ascii_digits_with_a_bound_else_422_naming_the_field(raw: str, tmp_path: Path) -> None:
    with serving(FakeEngine(), settings(history=True, history_path=tmp_path / "h.sqlite3")) as (base, worker):
        status, headers, data = request(base, "GET", f"/v1/tickets?limit={quote(raw)}")
        assert status == 422, (raw, status, data[:200])
        body = json.loads(data)
        assert body["field"] == "limit" and "in ASCII digits" in body["error"]
        assert len(data) < 400  # 5,000 nines are not echoed back
        assert request(base, "GET", "/v1/tickets?limit=050")[0] == 200  # leading zeros are still digits
        assert worker.stats.failed == 0


# -- the listing's size bound, and one ticket whole --------------------------------------------------------


def _fill(path: Path, threads: int, messages: int, text_chars: int) -> None:
    from triage.store.history import History

    history = History.open_writable(path)
    with history:
        for t in range(threads):
            msgs = [
                {"role": "customer" if i % 2 == 0 else "agent", "text": f"T{t} message {i}: " + "x" * text_chars}
                for i in range(messages)
            ]
            history.save_ticket(make_ticket(None, f"TH/{t}", msgs))
        history.save_ticket(make_ticket("a plain ticket, " + "long " * 600, "P-1"))


def test_a_listing_of_long_threads_is_bounded_and_each_ticket_is_there_whole(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    threads, messages, chars = 200, 60, 200
    _fill(path, threads, messages, chars)
    per_ticket = (listing.FIRST + listing.LAST + 1) * listing.TEXT_CHARS * 4 + 2048  # texts in UTF-8, and the rest
    with serving(FakeEngine(), settings(history=True, history_path=path)) as (base, _):
        status, _, data = request(base, "GET", "/v1/tickets?limit=200")
        assert status == 200
        listed = json.loads(data)["tickets"]
        assert len(listed) == 200
        assert len(data) <= 200 * per_ticket, len(data)  # the bound
        whole_size = 0
        for t in listed[:3]:
            if t["messages"] is None:
                assert t["text_cut"] and len(t["text"]) == listing.TEXT_CHARS and t["summarised"]
            else:
                assert t["message_count"] == messages and t["messages_left_out"] == messages - 4 and t["summarised"]
                assert [m["text"].split(":")[0].split()[-1] for m in t["messages"]] == ["0", "57", "58", "59"]
            status, _, one = request(base, "GET", "/v1/tickets/" + quote(t["id"], safe=""))
            assert status == 200, one[:300]
            ticket = json.loads(one)["ticket"]
            whole_size += len(one)
            assert ticket["id"] == t["id"] and "summarised" not in ticket
            if ticket["messages"] is not None:
                assert len(ticket["messages"]) == messages
                assert all(len(m["text"]) > chars for m in ticket["messages"])  # uncut
            else:
                assert len(ticket["text"]) > listing.TEXT_CHARS
        assert whole_size / 3 > 2 * len(data) / 200  # a whole thread is far more than its place in the listing
        status, _, data = request(base, "GET", "/v1/tickets/NO-SUCH")
        body = json.loads(data)
        assert status == 404 and body["field"] == "id" and "no ticket of that id" in body["error"]
        status, _, data = request(base, "GET", "/v1/tickets/P-1?full=1")
        assert status == 422 and json.loads(data)["field"] == "full"
        status, _, data = request(base, "GET", "/openapi.json")
        doc = json.loads(data)
        assert "/v1/tickets/{ticket_id}" in doc["paths"]
        assert "summarised" in doc["components"]["schemas"]["TicketList"]["properties"]["tickets"]["items"]["required"]


def test_a_short_ticket_is_listed_as_it_is() -> None:
    plain = {"id": "A", "text": "short", "messages": None, "status": "done", "result": None, "labels": {}}
    assert listing.summarise(plain) == {**plain, "summarised": False}
    thread = {**plain, "messages": [{"role": "customer", "text": "hi"}, {"role": "agent", "text": "hello"}]}
    out = listing.summarise(thread)
    assert out["messages"] == thread["messages"] and out["message_count"] == 2 and out["messages_left_out"] == 0
    assert out["summarised"] is False


# -- an internationalised origin ---------------------------------------------------------------------------


def test_an_internationalised_allow_origin_is_matched_in_punycode(tmp_path: Path) -> None:
    assert check_origin("https://bücher.example") == "https://xn--bcher-kva.example"
    assert check_origin("https://BÜCHER.example:443") == "https://xn--bcher-kva.example"
    assert check_origin("http://例え.テスト:8080") == "http://xn--r8jz45g.xn--zckzah:8080"
    assert check_origin("https://xn--bcher-kva.example") == "https://xn--bcher-kva.example"
    with pytest.raises(InputError, match="cannot be written in punycode"):
        check_origin("https://" + "ä" * 70 + ".example")  # a label longer than 63 once encoded
    allowed = check_origin("https://bücher.example")
    with serving(FakeEngine(), settings(allow_origin=allowed)) as (base, _):
        preflight = {"Origin": "https://xn--bcher-kva.example", "Access-Control-Request-Method": "POST"}
        status, headers, _ = request(base, "OPTIONS", "/v1/score", headers=preflight)
        assert status == 200 and headers["access-control-allow-origin"] == "https://xn--bcher-kva.example"


def test_a_lone_surrogate_in_a_request_text_is_422_naming_the_field() -> None:
    with serving(FakeEngine(), settings()) as (base, worker):
        for raw, field in (
            (b'{"id": "S-1", "text": "refund \\ud800 now"}', "text"),
            (b'{"id": "S-2", "messages": [{"role": "customer", "text": "hi \\udfff"}]}', "messages"),
        ):
            status, _, data = request(base, "POST", "/v1/score", raw=raw)
            body = json.loads(data)
            assert status == 422 and body["field"] == field and "lone surrogate" in body["error"], body
        status, _, data = request(base, "POST", "/v1/score", raw=b'{"id": "S-3", "text": "refund me now"}')
        assert status == 200, data[:200]
        assert worker.stats.failed == 0
