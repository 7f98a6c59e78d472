"""``triage serve``'s first start without a starter head: it answers at once, zero-shot, and fits the head in the
background, between requests (triage/serve/starter_fit.py, the engine thread's chore in triage/serve/worker.py).

Fast: a scripted chore on the fake engine is interleaved with requests and stops with the server. With the real
smollm2-135m: `triage serve` in a home without a starter head answers ``/v1/health`` and a score while the fit
runs, says how far it is, decides ``starter`` once the head is in, and stops with the server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fake_engine import FakeEngine

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from triage.domain.pack import default_pack  # noqa: E402
from triage.learning.starter import starter_rows  # noqa: E402
from triage.serve.app import ServeSettings  # noqa: E402
from triage.serve.local import free_port, serving  # noqa: E402
from triage.serve.worker import ChoreStopped  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _post(base: str, body: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    req = urllib.request.Request(
        base + "/v1/score", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def _get(base: str, path: str, timeout: float = 5.0) -> dict[str, Any]:
    with urllib.request.urlopen(base + path, timeout=timeout) as r:
        return json.loads(r.read())


class Chore:
    """A background task of many short steps (a fit's rows), pausing for requests after each."""

    def __init__(self) -> None:
        self.steps = 0
        self.release = threading.Event()
        self.ended: str | None = None

    def __call__(self, between: Any) -> None:
        try:
            while not self.release.is_set() and self.steps < 100_000:
                time.sleep(0.005)  # one row's decode
                self.steps += 1
                between()
            self.ended = "finished"
        except ChoreStopped:
            self.ended = "stopped"
            raise


def test_requests_are_served_between_the_steps_of_a_background_task_which_stops_with_the_server() -> None:
    pack = default_pack()
    chore = Chore()
    with serving(FakeEngine(), ServeSettings(packs={pack.name: pack}), chore=chore) as (base, worker):
        for i in range(3):
            before = chore.steps
            result = _post(base, {"id": f"T-{i}", "text": "I was charged twice."})
            assert len(result["criteria"]) == len(pack.criteria)
            assert chore.ended is None and chore.steps > before  # answered while the task runs on
        assert worker.stats.served == 3
    assert chore.ended == "stopped"  # the server's stop ended it at its next pause
    chore2 = Chore()
    with serving(FakeEngine(), ServeSettings(packs={pack.name: pack}), chore=chore2) as (base, worker):
        chore2.release.set()
        deadline = time.monotonic() + 10
        while chore2.ended is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert chore2.ended == "finished"
        assert _post(base, {"id": "T-after", "text": "Where is my parcel?"})["ticket_id"] == "T-after"


@pytest.mark.model
def test_serve_without_a_starter_head_answers_at_once_and_fits_it_in_the_background(
    other_model: Path, triage_home: Path
) -> None:
    """A model triage ships no starter head for: serve answers within seconds, zero-shot, while the fit scores
    the starter set between requests (the fit's end, in the same chore, is the fast test above)."""
    n = len(starter_rows(default_pack()))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "TRIAGE_HOME": str(triage_home), "TRIAGE_STARTER": "1", "PYTHONPATH": str(ROOT)}
    env.pop("TRIAGE_SERVE_TOKEN", None)
    err_path = triage_home / "serve.err"
    with err_path.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "triage.cli", "serve", "--model", str(other_model), "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,  # a file, not a terminal: the fit's progress comes as plain lines
        )
    try:
        deadline = time.monotonic() + 120
        while "triage: serving" not in err_path.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, err_path.read_text()
            time.sleep(0.05)
        serving_at = time.monotonic()
        health = None
        while health is None and time.monotonic() < serving_at + 5:
            try:
                health = _get(base, "/v1/health", timeout=1)
            except OSError:
                time.sleep(0.05)
        assert health is not None, err_path.read_text()
        fit = health["starter"]
        assert fit["rows"] == n and fit["state"] in ("fitting", "fitting head"), fit  # answered before the head
        first = _post(base, {"id": "T-1", "text": "I was charged twice this month, refund me."})
        assert time.monotonic() - serving_at < 5, "the first score waited for the fit"
        said = err_path.read_text()
        assert "fitting the starter head for" in said and "in the background" in said
        assert f"starter head: scoring {n} row(s)" in said
        assert {c["source"] for c in first["criteria"]} <= {"zero-shot", "calibrated"}
        later = _get(base, "/v1/health")["starter"]
        assert later["rows_done"] >= fit["rows_done"] and later["state"] in ("fitting", "fitting head", "done")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(60)  # a fit still scoring its rows stops at the next one
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code in (0, 143, -signal.SIGTERM), err_path.read_text()


def test_the_head_s_fit_after_the_rows_says_each_criterion_with_the_time_left_at_the_pace_so_far() -> None:
    from triage.learning.starter import CriterionClock

    said: list[str] = []
    now = [0.0]
    clock = CriterionClock(4, said.append, clock=lambda: now[0])
    assert clock.left() is None
    for cid, at in (("queue", 0.0), ("urgency", 12.0), ("sentiment", 20.0), ("type", 36.0)):
        now[0] = at
        clock(cid, 475)
    assert said == [
        "starter head: fitting queue (1 of 4) on 475 rows",  # nothing measured yet: no time said
        "starter head: fitting urgency (2 of 4) on 475 rows; about 36 s left",  # 12 s a criterion, 3 to go
        "starter head: fitting sentiment (3 of 4) on 475 rows; about 20 s left",
        "starter head: fitting type (4 of 4) on 475 rows; about 12 s left",
    ]
