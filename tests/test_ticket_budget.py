"""The ticket budget: one cut, the same part of a long ticket read by the app, score, serve, eval and learn.

The builder tests use a character tokenizer (fast, exact); the paths are driven for real with
smollm2-135m: `triage score` (the CLI, 4,096-token context), the engine the app and `serve` run,
and eval's scorer (what `triage learn` scores through too) on eval's 1,024-token context.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_engine import CharTokenizer
from test_cancel import long_ticket

from triage.domain.pack import default_pack
from triage.domain.ticket import make_ticket
from triage.scoring import prompt
from triage.scoring.prompt import CUT_MARK, TICKET_TOKENS, PromptBuilder, PromptFormat

ORDERS = [[tuple(range(len(c.options)))] for c in default_pack().criteria]


def builder() -> PromptBuilder:
    return PromptBuilder(default_pack(), PromptFormat("plain"), CharTokenizer())


def test_a_long_ticket_is_cut_to_the_budget_whatever_the_context() -> None:
    b = builder()
    text = "start of the log. " + "x" * 20_000 + " end of the log."
    cuts = {n_ctx: b.cut(text, n_ctx) for n_ctx in (2048, 4096, 32_768)}
    assert len({c.text for c in cuts.values()}) == 1  # the same part of the ticket in every context
    got = cuts[4096]
    assert got.tokens <= TICKET_TOKENS and got.text.startswith("start of the log.") and got.text.endswith("log.")
    assert CUT_MARK.format(chars=got.chars) in got.text
    assert got.warnings == (
        f"ticket shortened to the {TICKET_TOKENS}-token ticket budget: cut {got.chars} of {len(text)} characters "
        "from the middle, kept its start and end",
    )
    assert b.build(text, ORDERS, n_ctx=4096).ticket_text == got.text  # what the prompts read
    short = "x" * TICKET_TOKENS
    assert b.cut(short, 4096).text == short and b.cut(short + "y", 4096).chars > 0


def test_a_context_smaller_than_the_budget_cuts_more_and_says_so() -> None:
    b = builder()
    overhead = 100_000 - b._context_room(100_000)  # the pack's prompt beside the ticket, in characters
    n_ctx = overhead + TICKET_TOKENS // 2
    room = b.ticket_room(n_ctx)
    assert room == TICKET_TOKENS // 2  # the context leaves less than the budget
    got = b.cut("y" * 5000, n_ctx)
    assert got.tokens <= room
    assert f"fit the {n_ctx}-token context ({room} tokens, below the {TICKET_TOKENS}-token" in got.warnings[0]
    assert "raise --n-ctx" in got.warnings[0]


def test_the_budget_is_read_when_a_ticket_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    b = builder()
    monkeypatch.setattr(prompt, "TICKET_TOKENS", 100)
    assert b.ticket_room(4096) == 100 and b.cut("z" * 500, 4096).tokens <= 100


def test_a_thread_is_compacted_to_the_budget_before_its_text_is_cut() -> None:
    b = builder()
    messages = [{"role": "customer", "text": "My order 1234 never came. " * 4}]
    messages += [
        {"role": "agent" if i % 2 else "customer", "text": f"Message {i}: " + "more about the order. " * 3}
        for i in range(2, 12)
    ]
    ticket = make_ticket(None, "T", messages)
    assert len(ticket.text) > TICKET_TOKENS
    got = b.cut(ticket.text, 4096, ticket.messages)
    assert got.dropped > 0 and got.tokens <= TICKET_TOKENS
    assert got.warnings[0].startswith(f"thread compacted to the {TICKET_TOKENS}-token ticket budget: left out")
    assert got.text.startswith(messages[0]["text"].strip()) and got.text.endswith(messages[-1]["text"].strip())


def test_a_thread_s_long_first_message_is_cut_once_so_each_turn_appends_to_the_last() -> None:
    """A first message longer than the budget is cut on its own, the same way every turn: each turn's text
    starts with the last turn's (the thread's kept state is reused), and when compaction has to move the
    cut, it moves far enough for the turns that follow."""
    b = builder()
    first = "Subject: export fails\n" + "The nightly export stops halfway with error 17. " * 40 + "Thanks, Ann"
    replies = [{"role": "agent" if i % 2 else "customer", "text": f"Message {i}: ok."} for i in range(2, 30)]
    messages = [{"role": "customer", "text": first}, *replies]
    cuts = []
    for m in range(1, len(messages) + 1):
        ticket = make_ticket(None, "T", messages[:m])
        cuts.append(b.cut(ticket.text, 4096, ticket.messages))
    assert all(c.tokens <= TICKET_TOKENS for c in cuts)
    assert cuts[0].chars and cuts[0].text.startswith("Subject: export fails")  # one message: the whole budget
    head = cuts[1].text[: cuts[1].text.index("\n\nCustomer reply:")]
    assert len(head) <= TICKET_TOKENS // 2 and head.startswith("Subject:") and head.endswith("Ann")
    assert cuts[1].warnings[0].startswith("first message shortened to half of the 384-token ticket budget")
    assert f"of {len(first)} characters from its middle" in cuts[1].warnings[0]
    assert all(c.text.startswith(head + "\n\n") for c in cuts[1:])  # the same first message every turn
    pairs = enumerate(zip(cuts[1:], cuts[2:], strict=False), 3)
    moved = [m for m, (last, nxt) in pairs if not nxt.text.startswith(last.text)]
    # compaction moves the cut when a turn does not fit, far enough to free half the room after the first
    # message: here three ~33-token replies, so it moves every fourth turn, not every turn
    assert moved and all(b - a >= 4 for a, b in zip(moved, moved[1:], strict=False)), moved
    assert all(cuts[m - 1].dropped > cuts[m - 2].dropped for m in moved)
    assert all(c.text.endswith(messages[m]["text"]) for m, c in enumerate(cuts[1:], 1))


@pytest.mark.model
def test_score_serve_eval_and_learn_read_the_same_part_of_a_long_ticket(
    smollm2_path: Path, triage_home: Path, tmp_path: Path
) -> None:
    from triage.learning.cache import ReadoutCache
    from triage.learning.scorer import Scorer
    from triage.scoring.engine import Engine
    from triage.scoring.loader import load_engine

    pack = default_pack()
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=4096, threads=1) as engine:  # the app's, serve's engine
        text = "Subject: the export fails\n" + long_ticket(engine, 1500) + "\nThanks, Ann"
        app = engine.score_ticket(make_ticket(text, "T-1"), pack)
        cut = engine.builder(pack).cut(text, engine.n_ctx)
        try:
            from triage.serve.app import ServeSettings
            from triage.serve.local import serving
        except ImportError:  # the serve extra is not installed: its path is the same engine.score
            served = None
        else:
            import http.client
            from urllib.parse import urlsplit

            with serving(engine, ServeSettings(packs={pack.name: pack})) as (base, _):
                u = urlsplit(base)
                conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
                body = json.dumps({"id": "T-1", "text": text}).encode()
                conn.request("POST", "/v1/score", body, {"Content-Type": "application/json"})
                response = conn.getresponse()
                served = json.loads(response.read())
                conn.close()
                assert response.status == 200, served
    assert cut.chars > 0 and app.tokens.ticket == cut.tokens <= TICKET_TOKENS
    shortened = [w for w in app.warnings if w.startswith("ticket shortened")]
    assert shortened == [w for w in cut.warnings if w.startswith("ticket shortened")]
    if served is not None:
        assert served["tokens"]["ticket"] == cut.tokens
        assert [w for w in served["warnings"] if w.startswith("ticket shortened")] == shortened
    cli = subprocess.run(
        [sys.executable, "-m", "triage.cli", "score", "--model", str(smollm2_path), "--threads", "1"]
        + ["--id", "T-1", "--format", "json"],
        input=text,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "TRIAGE_HOME": str(triage_home), "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert cli.returncode == 0, cli.stderr
    scored = json.loads(cli.stdout)
    assert scored["tokens"]["ticket"] == cut.tokens
    assert [w for w in scored["warnings"] if w.startswith("ticket shortened")] == shortened
    # eval's (and learn's) scorer, on eval's own 1,024-token context: the same cut, named so in its cache
    with load_engine(str(smollm2_path), n_ctx=1024, threads=1, lazy=True) as lazy:
        with ReadoutCache(tmp_path / "readouts.sqlite3") as cache:
            scorer = Scorer(lazy, pack, cache, "label")
            key = scorer.text_key(make_ticket(text, "T-1"))
            assert not lazy.loaded  # naming the cut needs the vocabulary only
            assert key == hashlib.sha256(cut.text.encode()).hexdigest() != make_ticket(text).sha256
            outcome, hit = scorer.outcome(make_ticket(text, "T-1"))
    assert not hit and [w for w in outcome.warnings if w.startswith("ticket shortened")] == shortened
