"""Issue 42: a label on a thread's id lands on the newest entry of that thread, after its first message was edited.

Sent again with its first message edited (``POST /v1/score`` with the thread's messages), a thread is a new row
under the same id; ``/v1/label``, ``triage label ID`` and ``label --file`` on that id answered 422 "2 tickets
in the history have the id". They now label the newest row; plain tickets of different texts under one id
are still refused (they are different tickets), with what to do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
from fake_engine import FakeEngine  # noqa: E402
from test_serve import post, request, settings  # noqa: E402

from triage.serve.local import serving  # noqa: E402
from triage.store import labels as lab  # noqa: E402
from triage.store.history import History  # noqa: E402

FIRST = {"role": "customer", "text": "I was charged twice for my March invoice."}
EDITED = {"role": "customer", "text": "I was charged twice for my March invoice, order 5521."}
REPLY = {"role": "agent", "text": "Sorry about that; we are looking into it."}


def rows_of(path: Path, ticket_id: str) -> list[int]:
    with History.open_readonly(path) as h:
        return [
            int(r)
            for (r,) in h.conn.execute(
                "SELECT id FROM tickets WHERE ticket_id = ? ORDER BY updated_at DESC, id DESC", (ticket_id,)
            )
        ]


def test_a_label_on_an_edited_threads_id_lands_on_its_newest_entry(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "history.sqlite3"
    with serving(FakeEngine(), settings(history=True, history_path=path)) as (base, _):
        assert post(base, {"id": "TH-1", "messages": [FIRST]})[0] == 200
        assert post(base, {"id": "TH-1", "messages": [EDITED, REPLY]})[0] == 200
        newest, older = rows_of(path, "TH-1")  # the edited thread is a row of its own
        status, _, data = request(base, "POST", "/v1/label", {"id": "TH-1", "labels": {"queue": "billing"}})
        assert status == 200, data
        assert json.loads(data)["stored"][0]["criterion"] == "queue"
    proc = cli(["label", "TH-1", "urgency=high", "--history-file", str(path)])
    assert proc.returncode == 0, proc.stderr
    rows = tmp_path / "labels.jsonl"
    rows.write_text(json.dumps({"id": "TH-1", "labels": {"sentiment": "upset"}}) + "\n", encoding="utf-8")
    proc = cli(["label", "--file", str(rows), "--history-file", str(path)])
    assert proc.returncode == 0, proc.stderr
    with History.open_readonly(path) as h:
        assert set(lab.current(h, newest)) == {"queue", "urgency", "sentiment"}
        assert lab.current(h, older) == {}
        scored = lab.find_ticket(h, "TH-1")
        assert scored.ticket_row == newest and scored.text.startswith(EDITED["text"])


def test_plain_tickets_of_different_texts_under_one_id_are_still_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    with serving(FakeEngine(), settings(history=True, history_path=path)) as (base, _):
        assert post(base, {"id": "P-1", "text": "Where is my parcel?"})[0] == 200
        assert post(base, {"id": "P-1", "text": "How do I change my e-mail address?"})[0] == 200
        status, _, data = request(base, "POST", "/v1/label", {"id": "P-1", "labels": {"queue": "shipping"}})
    body = json.loads(data)
    assert status == 422 and body["field"] == "id", body
    assert "2 tickets in the history have the id 'P-1'" in body["error"]
    assert "in the app" in body["hint"] and "distinct ids" in body["hint"]
