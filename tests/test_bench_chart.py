"""The bench SVG: valid XML, one group per expected series, numbers where they belong."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from triage.bench.chart import Bar, Line, Scatter, chart_from_report, render_svg

SVG_NS = "{http://www.w3.org/2000/svg}"


def series(svg: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg.encode("utf-8"))
    assert root.tag == f"{SVG_NS}svg"
    return {g.get("data-series"): g for g in root.iter(f"{SVG_NS}g") if g.get("class") == "series"}


def test_render_svg_is_valid_xml_with_every_series() -> None:
    svg = render_svg(
        [Bar("full", 0, 900, 50), Bar("serial_truncate", 120, 300, 20, speedup=2.0)],
        [
            Scatter("probe", "probe <tails> & more", [(8, 20.0), (32, 40.0), (128, 120.0)]),
            Scatter("fresh", "fresh", [(8, 15.0), (128, 90.0)], hollow=True),
        ],
        [Line("fit", "fit", 12.0, 0.85), Line("seed", "seed", 28.4, 3.23, dashed=True)],
        title="bench & chart",
        subtitle="a < b",
    )
    found = series(svg)
    assert {"bar-full", "bar-serial_truncate", "probe", "fresh", "fit", "seed"} <= set(found)
    assert len(found["probe"].findall(f"{SVG_NS}circle")) == 3
    assert len(found["bar-full"].findall(f"{SVG_NS}rect")) == 2  # tails and other; no zero-width prefill
    assert "2.0× faster" in svg
    assert "bench &amp; chart" in svg


def test_chart_from_report_draws_modes_fit_and_tails() -> None:
    modes = {
        "full": {"ticket_ms_median": 1000.0, "prefill_ms_median": 0.0, "tails_ms_median": 950.0},
        "serial_truncate": {"ticket_ms_median": 400.0, "prefill_ms_median": 100.0, "tails_ms_median": 280.0},
        "fanout": {"ticket_ms_median": 300.0, "prefill_ms_median": 100.0, "tails_ms_median": 180.0},
    }
    report = {
        "modes": modes,
        "speedup": {"serial_truncate_vs_full": 2.5, "fanout_vs_full": 3.3},
        "cost_fit": {
            "fixed_ms": 5.0,
            "per_token_ms": 1.5,
            "r2": 0.99,
            "seed_onnx": {"fixed_ms": 28.4, "per_token_ms": 3.23},
        },
        "workload": {"pack": {"criteria": 5}, "orderings": "cyclic", "tickets": [1, 2]},
        "model": {"name": "m"},
        "machine": {"threads": 2, "cores": 2, "load_avg_start": [0.1], "warnings": []},
        "summary": "prefix reuse makes a typical ticket 2.5× faster",
    }
    report["points"] = {
        "probe_tails": [[t, 5 + 1.5 * t] for t in (8, 32, 128)],
        "fresh": [[t, 1.2 * t] for t in (8, 32, 128)],
        "engine_tails": {"serial_truncate": [[30.0, 50.0], [34.0, 56.0]], "fanout": [[30.0, 20.0]]},
    }
    found = series(chart_from_report(report))
    assert {
        "bar-full",
        "bar-serial_truncate",
        "bar-fanout",
        "fit",
        "seed",
        "probe",
        "fresh",
        "serial_truncate",
        "fanout",
    } <= set(found)
    assert "serial_restore" not in found  # no data, no empty series


def test_bars_show_the_median_ticket_and_name_a_partial_split() -> None:
    # the parts are medians each and need not add up to the median ticket: the bar shows the ticket
    modes = {
        "full": {
            "ticket_ms_median": 9000.0,
            "prefill_ms_median": 0.0,
            "tails_ms_median": 8990.0,
            "other_ms_median": 10.0,
        },
        "serial_restore": {
            "ticket_ms_median": 1000.0,
            "prefill_ms_median": 200.0,
            "tails_ms_median": 900.0,
            "other_ms_median": 20.0,
        },
        "split": {
            "ticket_ms_median": 3000.0,
            "prefill_ms_median": 0.0,
            "tails_ms_median": 2990.0,
            "other_ms_median": 10.0,
            "criteria_scored": 2,
        },
    }
    report = {
        "modes": modes,
        "speedup": {"serial_restore_vs_full": 9.0},
        "cost_fit": {},
        "points": {},
        "workload": {"pack": {"criteria": 5}, "tickets": [1]},
        "model": {},
        "machine": {},
        "summary": "",
    }
    svg = chart_from_report(report)
    bar = series(svg)["bar-serial_restore"]
    widths = [float(r.get("width")) for r in bar.findall(f"{SVG_NS}rect")]
    full_width = sum(float(r.get("width")) for r in series(svg)["bar-full"].findall(f"{SVG_NS}rect"))
    assert abs(sum(widths) / full_width - 1000 / 9000) < 1e-3
    assert "1.0 s · 9.0× faster" in svg
    assert "split (2 criteria)" in svg
