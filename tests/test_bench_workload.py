"""The bench's fixed inputs: the ticket set, the long-stable pack, and what --quick picks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from triage.assets_path import asset
from triage.bench.workload import LONG_PACK_ASSET, TICKETS_ASSET, kind_of, make_workload, read_tickets
from triage.domain.pack import default_pack, load_pack
from triage.errors import InputError


def test_ticket_set_is_real_varied_and_licensed() -> None:
    tickets = read_tickets(asset(TICKETS_ASSET))
    assert len(tickets) == 12
    assert {t.kind for t in tickets} == {"short", "medium", "long"}
    assert all(t.kind == kind_of(t.text) for t in tickets)
    assert [t.id for t in tickets if t.quick] == ["air-2a4d07b8aa4d", "cfpb-29143da0db44"]
    note = (Path(str(asset("LICENSES"))) / "bench-tickets.md").read_text(encoding="utf-8")
    for t in tickets:
        assert t.id in note  # every row's origin and licence is recorded


def test_ticket_set_matches_the_shared_datasets(shared_dir: Path) -> None:
    originals = {}
    for f in (shared_dir / "datasets").glob("*/tickets.jsonl"):
        for line in f.read_text(encoding="utf-8").split("\n"):
            if not line.strip():
                continue
            row = json.loads(line)
            originals[row["id"]] = (f.parent.name, row["text"])
    for t in read_tickets(asset(TICKETS_ASSET)):
        assert originals[t.id] == (t.source, t.text)  # copied verbatim


def test_long_pack_has_the_default_criteria_and_a_longer_stable_block() -> None:
    long_pack, default = load_pack(asset(LONG_PACK_ASSET)), default_pack()
    assert long_pack.criteria == default.criteria  # keep in step with assets/support.toml
    assert len(long_pack.examples) >= 3 and len(long_pack.context) > 800


def test_quick_workload() -> None:
    wl = make_workload(pack=default_pack(), long_pack=None, quick=True)
    assert [t.id for t in wl.tickets] == ["air-2a4d07b8aa4d"]
    assert wl.split_ids == {"air-2a4d07b8aa4d"}
    assert wl.describe()["split_criteria"] == ["queue", "urgency"]
    assert wl.session_ids == ()  # no cold/warm restart in --quick
    assert wl.orderings == "none"
    assert make_workload(pack=default_pack(), long_pack=None, quick=True, orderings="cyclic").orderings == "cyclic"
    assert "serial_long" not in wl.modes
    assert wl.describe()["notes"]


def test_default_workload_and_tickets_file(tmp_path: Path) -> None:
    wl = make_workload(pack=default_pack(), long_pack=load_pack(asset(LONG_PACK_ASSET)))
    assert [t.kind for t in wl.tickets] == ["short", "medium", "long"]
    assert wl.split_ids == {"air-2a4d07b8aa4d", "cfpb-29143da0db44"}
    assert wl.probe_ids == ("air-2a4d07b8aa4d", "cfpb-739973513c1f")
    with pytest.raises(InputError, match="--limit"):
        make_workload(pack=default_pack(), long_pack=None, limit=0)
    assert len(wl.session_ids) == 3
    assert len(make_workload(pack=default_pack(), long_pack=None, limit=12).tickets) == 12
    assert wl.modes[-1] == "serial_long" and wl.orderings == "cyclic"
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "a", "text": "hello there"}\n\n{"text": "' + "x" * 1200 + '"}\n', encoding="utf-8")
    wl = make_workload(pack=default_pack(), long_pack=None, tickets_path=path, limit=5)
    assert [(t.id, t.kind) for t in wl.tickets] == [("a", "short"), ("line-3", "long")]
    path.write_text('{"id": "a"}\n', encoding="utf-8")
    with pytest.raises(InputError):
        read_tickets(path)
