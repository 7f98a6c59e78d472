"""Day one, as a new user meets it (issue 41): the README's set-up, no labels, and the tickets a desk sees first
routed right by the starter head that ships for the stand-in, each decision saying ``starter``.

tests/data/day-one-tickets.jsonl: a late parcel, a forgotten password, an app crash, a double charge, a formal
return of a faulty device, a German parcel, a Polish crash report and a Spanish double charge (written for this
test, not taken from any data set).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TICKETS = Path(__file__).parent / "data" / "day-one-tickets.jsonl"
QUEUE = {
    "late-parcel": "shipping",
    "password": "account",
    "app-crash": "technical",
    "double-charge": "billing",
    "formal-return": "shipping",
    "de-parcel": "shipping",
    "pl-crash": "technical",
    "es-double": "billing",
}


@pytest.mark.model
def test_a_new_users_first_tickets_are_routed_by_the_shipped_starter_head(
    cli, tmp_path: Path, qwen25_path: Path
) -> None:
    ran = cli(["score", str(TICKETS), "--model", str(qwen25_path), "--threads", "1"], env={"TRIAGE_STARTER": "1"})
    assert ran.returncode == 0, ran.stderr
    assert "fitting" not in ran.stderr and "background" not in ran.stderr, "the stand-in's head ships"
    records = {r["ticket_id"]: r for r in map(json.loads, ran.stdout.splitlines())}
    assert set(records) == set(QUEUE)
    for tid, want in QUEUE.items():
        by_id = {c["id"]: c for c in records[tid]["criteria"]}
        assert {c["source"] for c in by_id.values()} == {"starter"}, tid
        assert by_id["queue"]["choice"] == want, (tid, by_id["queue"]["probabilities"])
    polish = {c["id"]: c["choice"] for c in records["pl-crash"]["criteria"]}
    assert polish["type"] == "problem" and polish["urgency"] != "low"
    spanish = {c["id"]: c["choice"] for c in records["es-double"]["criteria"]}
    assert spanish["sentiment"] != "angry"
