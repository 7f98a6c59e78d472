"""One real bench run on smollm2-135m with a tiny workload: the JSON has its keys, reuse is exact."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from triage.bench.chart import chart_from_report
from triage.bench.report import build_report, write_json
from triage.bench.runner import BenchRunner, EngineSpec
from triage.bench.workload import BenchTicket, Workload
from triage.domain.pack import load_pack

pytestmark = pytest.mark.model

CRITERIA = """
[[criterion]]
id = "mood"
question = "Is the customer happy or angry?"
options = [ { id = "happy", label = "Happy" }, { id = "angry", label = "Angry" } ]
[[criterion]]
id = "topic"
question = "What is the ticket about?"
options = [ { id = "money", label = "Money" }, { id = "delivery", label = "Delivery" },
            { id = "other", label = "Other" } ]
"""
LONG = """
[pack]
name = "tiny-long"
context = "We sell fruit baskets by mail. Refunds over 20 dollars need a manager. Deliveries take two days. Our support team answers within a day."
[[example]]
text = "My basket came late and the pears were crushed."
labels = { mood = "angry", topic = "delivery" }
"""  # noqa: E501 (a TOML basic string, the pack's context, cannot be split)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    folder = tmp_path_factory.mktemp("packs")
    (folder / "tiny.toml").write_text('[pack]\nname = "tiny"\n' + CRITERIA, encoding="utf-8")
    (folder / "long.toml").write_text(LONG + CRITERIA, encoding="utf-8")
    tickets = (
        BenchTicket("t1", "Where is my refund? I asked three times.", "short"),
        BenchTicket("t2", "The basket arrived broken, please send another one.", "short"),
    )
    return Workload(
        tickets=tickets,
        pack=load_pack(folder / "tiny.toml"),
        long_pack=load_pack(folder / "long.toml"),
        orderings="cyclic",
        repeats=1,
        quick=True,
        split_ids=frozenset({"t1", "t2"}),
        split_criteria=1,
        probe_ids=("t1",),
        probe_sizes=(4, 16),
        session_ids=("t1", "t2"),
        tickets_source="test",
        paste=tickets[:1],
        paste_repeats=1,
    )


def test_bench_run_writes_the_keys_and_reuse_is_exact(smollm2_path: Path, tiny: Workload, tmp_path: Path) -> None:
    spec = EngineSpec(smollm2_path, "smollm2-135m", n_ctx=1024)
    runner = BenchRunner(spec, tiny, probe_reps=1)
    labels: list[str] = []
    data = runner.run(on_step=labels.append)
    assert len(labels) == len(runner.plan())

    report = build_report(data)
    out = tmp_path / "b.json"
    write_json(report, out)
    back = json.loads(out.read_text(encoding="utf-8"))

    assert back["schema"] == "triage.bench/1"
    for mode in (
        "full",
        "serial_truncate",
        "serial_restore",
        "fanout",
        "fanout_learned",
        "shared_learned",
        "letter_serial",
        "serial_long",
        "split",
    ):
        assert back["modes"][mode]["ticket_ms_median"] > 0
    # a learned head on every criterion, timed beside plain fanout
    learned = back["learned"]
    assert set(learned["per_ticket"]) == {s.ticket.id for s in data.samples if s.mode == "fanout"}
    assert learned["cost_vs_fanout"] > 0 and learned["apply_ms_per_criterion"] > 0
    heads = [s.result for s in data.samples if s.mode == "fanout_learned"]
    assert heads and all({c.source for c in r.criteria} == {"learned"} for r in heads)
    # the same, read at the shared position: one cue after the ticket instead of every tail
    shared = [s.result for s in data.samples if s.mode == "shared_learned"]
    assert shared and all({(c.source, c.readout) for c in r.criteria} == {("learned", "shared")} for r in shared)
    by_kind = back["shared_read"]["by_kind"]
    assert by_kind and back["shared_read"]["read"] == "shared:answer"
    for row in by_kind.values():
        assert row["ratio"] > 0 and row["shared_tokens"] < row["tail_tokens"]
        assert 0 <= row["tokens_over_ticket_block_max"] <= 8
    # the label readout (every mode but letter_serial) against letters in every rotation, in the same run
    rd = back["readout"]
    assert rd["readout"] == "label" and rd["baseline"] == "letter_serial"
    assert set(rd["speedup_vs_letter_serial"]) == {
        "serial_truncate",
        "serial_restore",
        "fanout",
        "fanout_learned",
        "shared_learned",
    }
    assert all(v > 0 for v in rd["speedup_vs_letter_serial"].values())
    assert set(rd["vs_raw"]) == {
        "serial_truncate",
        "serial_restore",
        "fanout",
        "fanout_learned",
        "shared_learned",
        "letter_serial",
    } and all(v > 0 for v in rd["vs_raw"].values())
    letter = [s.result for s in data.samples if s.mode == "letter_serial"]
    label = [s.result for s in data.samples if s.mode == "fanout"]
    assert all(r.readout == "letter" and r.orderings == "cyclic" for r in letter)
    assert all(r.readout == "label" for r in label)
    assert (
        rd["per_ticket"]["t1"]["fanout"]["tokens_evaluated"]
        == next(r for r in label if r.ticket_id == "t1").tokens.evaluated
    )
    for key in ("serial_truncate_vs_full", "serial_restore_vs_full", "fanout_vs_full", "serial_vs_full"):
        assert back["speedup"][key] > 0
    assert back["token_bound"] > 1
    for key in ("fixed_ms", "per_token_ms", "r2"):
        assert back["cost_fit"][key] is not None
    assert 0 <= back["cache"]["hit_rate"] < 1 and back["cache"]["hit_rate_over"] == "cold_session"
    assert back["cache"]["stable_prefill_ms"]["default"] > 0 and back["cache"]["stable_prefill_ms"]["long"] > 0
    assert back["model"]["sha256"] and back["llama_cpp_python"] and back["pack_hash"] == tiny.pack.hash
    assert back["machine"]["threads"] >= 1 and back["machine"]["load_avg_start"]
    assert back["footprint"]["load_ms"] > 0 and back["footprint"]["peak_rss_mb"] > 0

    # reuse is exact against the same token split, for both serial strategies
    assert back["drift"]["max_abs_prob_same_split"] == 0
    assert back["drift"]["compared_same_split"] == 4
    assert back["modes"]["split"]["criteria_scored"] == 1 and back["modes"]["full"]["criteria_scored"] == 2
    assert back["workload"]["split_criteria"] == [tiny.pack.criteria[0].id]
    assert back["drift"]["max_abs_prob_restore_vs_truncate"] == 0
    assert back["drift"]["max_abs_prob_vs_full"] is not None

    # issue 7: cold start pays the stable block, the warm restart reads it from the file
    sc = back["stable_cache"]
    for label in ("default", "long"):
        assert sc[label]["warm_stable_cached"] == sc[label]["stable_tokens"] > 0
        assert sc[label]["warm_cache_stats"]["disk_hits"] == 1
        assert sc[label]["cold_stable_prefill_ms"] > 0
        first, second = sc[label]["session"]["per_ticket"]
        assert (first["id"], second["id"]) == ("t1", "t2")  # results carry the bench ids
        assert first["prefix_cached"] == 0 and second["prefix_cached"] == sc[label]["stable_tokens"]
    assert sc["long_vs_short"]["long_stable_tokens"] > sc["long_vs_short"]["short_stable_tokens"]

    # every reuse mode started from the stable block alone: it was cached, the ticket was not
    for s in data.samples:
        if s.mode in ("serial_truncate", "serial_restore", "fanout", "letter_serial", "serial_long"):
            assert s.result.tokens.prefix_cached == s.result.tokens.stable

    # the paste figures: cold, after a prefill (only the tails evaluated), the tails alone
    (paste,) = back["paste"]
    assert paste["ticket"] == "t1" and paste["cold_ms"] > 0 and paste["tails_alone_ms"] > 0
    assert paste["after_evaluated"] <= paste["tails"] + 1 < paste["cold_evaluated"]
    assert paste["after_cached"] > paste["prefill_evaluated"] > 0  # the prefilled tokens, and the stable block
    assert paste["max_abs_prob_vs_cold"] < 0.05

    assert back["points"]["probe_tails"] and back["points"]["engine_tails"]["serial_truncate"]
    ET.fromstring(chart_from_report(back).encode("utf-8"))
