"""``POST /v1/prefill`` (triage/serve/prefill.py) on the real server on 127.0.0.1, with the scripted engine: the
ticket read ahead, then its score costing only the tails; the same auth, limits and pack choice as ``/v1/score``;
a newer prefill cancelling an older one; the stable block's change said once."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from fake_engine import FakeEngine

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

import test_serve  # noqa: E402
from test_serve import post, request, settings  # noqa: E402

from triage.serve.local import serving  # noqa: E402

engine = test_serve.engine  # the real smollm2 engine, for the last test (a module's own)
TEXT = "Where is my parcel? The tracking page has said 'in transit' for nine days."


def prefill(base: str, body: Any, **kw: Any) -> tuple[int, dict[str, Any]]:
    status, _, data = request(base, "POST", "/v1/prefill", body, **kw)
    return status, json.loads(data)


def test_a_prefilled_ticket_is_then_scored_with_only_its_tails_left() -> None:
    engine = FakeEngine()
    with serving(engine, settings()) as (base, _):
        status, done = prefill(base, {"id": "P-1", "text": TEXT})
        assert status == 200, done
        assert done["ticket_id"] == "P-1" and done["complete"] is True
        assert done["cached"] == 0 and done["evaluated"] == done["tokens"] > 0 and done["ms"] >= 0
        assert engine.prefills[0][0] == TEXT and engine.scored == []  # read ahead, not scored, not kept
        status, result = post(base, {"id": "P-1", "text": TEXT})
        tok = result["tokens"]
        assert status == 200 and tok["prefix_cached"] == tok["prefix"] == done["tokens"]
        assert tok["evaluated"] == tok["tails"]
        _, _, health = request(base, "GET", "/v1/health")  # the session's hit rate counts the prefilled tokens
        assert json.loads(health)["prefix_hit_rate"] == round(tok["prefix"] / (tok["prefix"] + tok["tails"]), 6)


def test_prefill_has_the_scores_auth_limits_and_pack_choice() -> None:
    token = "s3cret-token-1234"
    with serving(FakeEngine(), settings(token=token, max_ticket_bytes=1000)) as (base, _):
        status, headers, _ = request(base, "POST", "/v1/prefill", {"text": TEXT})
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
        auth = {"Authorization": f"Bearer {token}"}
        status, body = prefill(base, {"text": "x" * 1001}, headers=auth)
        assert status == 413
        status, body = prefill(base, {"text": TEXT, "pack": "other"}, headers=auth)
        assert (status, body["field"]) == (422, "pack")
        status, body = prefill(base, {"text": "  "}, headers=auth)
        assert (status, body["field"]) == (422, "text")
        status, body = prefill(base, {"text": TEXT, "pack": "support"}, headers=auth)
        assert status == 200 and body["complete"]
    origin = "https://helpdesk.example"
    with serving(FakeEngine(), settings(allow_origin=origin)) as (base, _):
        status, _, _ = request(base, "POST", "/v1/prefill", {"text": TEXT}, headers={"Host": "attacker.example:80"})
        assert status == 421  # DNS rebinding, as for /v1/score
        for who, allowed in ((origin, True), ("https://evil.example", False)):
            status, headers, _ = request(
                base,
                "OPTIONS",
                "/v1/prefill",
                headers={"Origin": who, "Access-Control-Request-Method": "POST"},
            )
            assert (status == 200 and headers["access-control-allow-origin"] == origin) is allowed


def test_a_newer_prefill_cancels_the_running_one() -> None:
    engine = FakeEngine(prefill_delay=3.0)
    with serving(engine, settings()) as (base, _):
        got: list[tuple[int, dict[str, Any]]] = []
        first = threading.Thread(target=lambda: got.append(prefill(base, {"text": TEXT})))
        first.start()
        assert engine.prefilling.wait(10)
        status, newer = prefill(base, {"text": TEXT + " Order 1234."})
        first.join(10)
        [(old_status, old)] = got
        assert old_status == 200 and old["complete"] is False and old["evaluated"] < old["tokens"]
        assert status == 200 and newer["complete"] is True
        assert newer["cached"] == old["cached"] + old["evaluated"]  # it went on from where the first stopped


def test_a_changed_stable_block_is_said_once_in_the_results() -> None:
    engine = FakeEngine()
    engine.stable_note = "stable prefix changed, so its prefill is paid again once (pack: a → b)"
    with serving(engine, settings()) as (base, _):
        assert prefill(base, {"text": TEXT})[0] == 200  # it paid the stable block
        warned = [post(base, {"text": t})[1]["warnings"] for t in (TEXT, TEXT + " Again.")]
        assert [sum("stable prefix changed" in w for w in ws) for ws in warned] == [1, 0]


@pytest.mark.model
def test_on_the_real_engine_the_score_after_a_prefill_evaluates_only_the_tails(engine: Any) -> None:
    engine.clear()
    with serving(engine, settings()) as (base, _):
        status, done = prefill(base, {"id": "R-1", "text": TEXT})
        assert status == 200 and done["complete"] and done["evaluated"] == done["tokens"] - done["cached"]
        status, result = post(base, {"id": "R-1", "text": TEXT})
        tok = result["tokens"]
        assert status == 200 and tok["prefix_cached"] == tok["prefix"] == done["tokens"]
        assert tok["evaluated"] == tok["tails"]
