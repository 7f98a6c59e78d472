"""`triage bench`'s words: the plain summary is computed from the run's own figures, a slowdown is said as
"N× slower" (never "0.8× faster"), and the terminal summary and the chart fit their widths. No model: the
reports are built by hand or read from the committed run (bench/results/)."""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from triage.bench import terminal
from triage.bench.chart import chart_from_report, text_width
from triage.bench.summary import extra, plain_summary, slower_or_faster_time, summary_line, times

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "bench" / "results" / "qwen2.5-coder-0.5b.json"
SVG_NS = "{http://www.w3.org/2000/svg}"


def _report(fanout_ms: float, full_ms: float, **more: Any) -> dict[str, Any]:
    """The parts of a bench report the summary reads, for one mode against full."""
    report: dict[str, Any] = {
        "modes": {
            "full": {"ticket_ms_median": full_ms},
            "fanout": {"ticket_ms_median": fanout_ms},
        },
        "speedup": {"fanout_vs_full": full_ms / fanout_ms},
        "workload": {"tickets": [{"id": "a"}, {"id": "b"}, {"id": "c"}], "pack": {"criteria": 5}},
        "machine": {"warnings": []},
    }
    report.update(more)
    return report


@pytest.mark.parametrize(
    ("speed", "said"),
    [
        (0.8, "1.25× slower"),
        (1.25, "1.25× faster"),
        (8.07, "8.1× faster"),
        (0.1, "10.0× slower"),
        (1.004, "as fast"),
        (0.996, "as fast"),
        (None, "?"),
    ],
)
def test_a_ratio_is_said_faster_or_slower_never_a_fraction_faster(speed: float | None, said: str) -> None:
    assert times(speed) == said


def test_times_names_what_it_compares_with() -> None:
    assert times(0.8, "full") == "1.25× slower than full"
    assert times(2.5, "full") == "2.5× faster than full"
    assert times(1.0, "full") == "as fast as full"
    # a ratio of times (ms over ms): above 1 is the slower one
    assert slower_or_faster_time(1.09, "llama.cpp") == "1.09× slower than llama.cpp"
    assert slower_or_faster_time(0.5) == "2.0× faster"
    assert extra(1.021) == "2.1% more time"
    assert extra(1.002) == "no more time"
    assert extra(0.97) == "no more time (measured 3.0% less: noise)"


def test_the_summary_opens_with_a_warm_ticket_and_the_ratio_to_scoring_whole() -> None:
    lines = plain_summary(_report(300.0, 990.0))
    assert lines[0].startswith("A warm ticket (the criteria already loaded")
    assert "takes 300 ms" in lines[0] and "median of 3 tickets" in lines[0]
    assert lines[1].startswith("That is 3.3× faster than scoring each question whole (990 ms")


def test_the_figures_are_the_runs_own() -> None:
    """Other figures, other sentences: nothing in the summary is a constant."""
    a, b = plain_summary(_report(300.0, 990.0)), plain_summary(_report(450.0, 900.0))
    assert "450 ms" in b[0] and "2.0× faster" in b[1] and "900 ms" in b[1]
    assert a != b


def test_a_slowdown_is_said_slower() -> None:
    """A run where reuse lost (a busy machine): fanout 0.8 of full's speed reads 1.25× slower."""
    report = _report(1000.0, 800.0, learned={"cost_vs_fanout": 1.25}, readout={"vs_raw": {"fanout": 1.6}})
    lines = plain_summary(report)
    assert "1.25× slower than scoring each question whole" in lines[1]
    assert "1.60× slower than llama.cpp alone" in lines[2]
    assert lines[3] == "A learned head on every question costs 25.0% more time than without one."
    said = summary_line(report)
    assert not re.search(r"\b0\.\d+× faster", said)
    assert "faster" not in said


def test_the_summary_says_drift_restart_shared_read_and_a_busy_machine() -> None:
    report = _report(
        600.0,
        6000.0,
        drift={"compared_vs_full": 6, "choice_flips_vs_full": 1, "max_abs_prob_vs_full": 0.0287},
        stable_cache={"default": {"cold_first_ticket_ms": 1721.0, "warm_first_ticket_ms": 599.0}},
        shared_read={"by_kind": {"short": {"ratio": 0.5}, "long": {"ratio": 1.25}}},
        machine={"warnings": ["busy"]},
    )
    text = "\n".join(plain_summary(report))
    assert "changed 1 answer against scoring whole (probabilities moved by at most 0.029)" in text
    assert "599 ms instead of 1,721 ms" in text
    assert "2.0× faster on short tickets, 1.25× slower on long tickets" in text
    assert "busy" in text


def test_reuse_that_is_not_exact_is_a_warning_in_the_summary() -> None:
    report = _report(600.0, 6000.0, drift={"max_abs_prob_same_split": 0.01})
    assert any(line.startswith("WARNING: reuse was not exact") for line in plain_summary(report))


def test_without_fanout_the_summary_leads_with_the_fastest_mode_timed() -> None:
    report = _report(300.0, 900.0)
    report["modes"]["serial_truncate"] = report["modes"].pop("fanout")
    report["speedup"] = {"serial_truncate_vs_full": 3.0}
    lines = plain_summary(report)
    assert "one question after another" in lines[0] and "3.0× faster" in lines[1]


def _committed() -> dict[str, Any]:
    return json.loads(COMMITTED.read_text(encoding="utf-8"))


def _printed(report: dict[str, Any], width: int) -> str:
    console = Console(width=width, force_terminal=False, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    terminal.print_summary(report, console)
    console.file.close()
    return console.export_text()


def test_the_terminal_summary_fits_80_columns_with_long_labels(monkeypatch: pytest.MonkeyPatch) -> None:
    report = _committed()
    report["speedup"]["letter_serial_vs_full"] = 0.8  # a slowdown in the table
    long = "letter · cyclic · serial, every rotation"
    monkeypatch.setitem(terminal.SHORT, "letter_serial", long)
    text = _printed(report, 80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in text  # nothing cut short to fit
    assert lines[0] == "Summary" and lines[1].startswith("• A warm ticket")
    chart = lines[lines.index(next(line for line in lines if line.startswith("Median ticket"))) :]
    assert any(long in line for line in chart)  # the long label whole in the bar chart
    assert "1.25× slower" in text and not re.search(r"\b0\.\d+× faster", text)


def test_the_terminal_summary_fits_a_wide_terminal_too() -> None:
    text = _printed(_committed(), 200)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 200


def test_every_label_of_the_chart_is_inside_it() -> None:
    report = copy.deepcopy(_committed())
    report["modes"]["split"]["criteria_scored"] = 2  # "split (2 criteria)"
    report["speedup"]["letter_serial_vs_full"] = 0.8
    svg = chart_from_report(report)
    root = ET.fromstring(svg.encode("utf-8"))
    width = float(root.get("width") or 0)
    texts = list(root.iter(f"{SVG_NS}text"))
    assert texts
    for t in texts:
        s, x = "".join(t.itertext()), float(t.get("x") or 0)
        w = text_width(s, float(t.get("font-size") or 12))
        lo, hi = {"start": (x, x + w), "end": (x - w, x), "middle": (x - w / 2, x + w / 2)}[
            t.get("text-anchor") or "start"
        ]
        assert lo >= 0 and hi <= width, s
    assert "1.25× slower" in svg and not re.search(r"\b0\.\d+× faster", svg)
    assert "split (2 criteria)" in svg
