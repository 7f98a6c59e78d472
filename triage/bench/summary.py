"""The bench report in words: the plain summary a run opens with, and the wording of ratios.

Every figure here is read from the report itself (:func:`triage.bench.report.build_report`); nothing is
hard-coded. A speed ratio below 1 is said as "N× slower", never "0.8× faster". The terms the detail
prints are defined in bench/README.md, "Glossary".
"""

from __future__ import annotations

from typing import Any

from triage.bench.workload import SPLIT
from triage.scoring.options import DEFAULT_MODE  # the mode score and the app use

MODE_WORDS = {
    "fanout": "every question in one batch, triage's default",
    "serial_truncate": "one question after another",
    "serial_restore": "one question after another, restoring a saved state",
    "fanout_learned": "one batch, with a learned head",
    "shared_learned": "a learned head read at one point after the ticket",
    "letter_serial": "the old lettered options, every rotation",
}


def number(v: float) -> str:
    """A ratio as a person reads it: two decimals below 2 (1.25), one from there (8.1)."""
    return f"{v:.2f}" if v < 2 else f"{v:.1f}"


def times(speed: float | None, than: str = "") -> str:
    """``speed`` (how many times as fast; above 1 is faster) in words: "8.1× faster", "1.25× slower",
    "as fast", each followed by `` than THAN`` when ``than`` is given; "?" when unknown."""
    if speed is None or speed != speed or speed <= 0:  # None, NaN, or no time at all
        return "?"
    tail = f" than {than}" if than else ""
    if round(speed, 2) == 1.0:
        return "as fast" + (f" as {than}" if than else "")
    if speed > 1:
        return f"{number(speed)}× faster{tail}"
    return f"{number(1 / speed)}× slower{tail}"


def slower_or_faster_time(time_ratio: float | None, than: str = "") -> str:
    """A ratio of times (this one's ms / the other's; above 1 is slower) in the words of :func:`times`."""
    return times(None if not time_ratio else 1 / time_ratio, than)


def extra(cost: float | None) -> str:
    """A ratio of times near 1 (1.021) as what it adds, to be followed by "than ...": "2.1% more time",
    "no more time" (within 0.5%), or "no more time (measured 3.0% less: noise)"."""
    if cost is None:
        return "?"
    delta = 100 * (cost - 1)
    if abs(delta) < 0.5:
        return "no more time"
    if delta > 0:
        return f"{delta:.1f}% more time"
    return f"no more time (measured {-delta:.1f}% less: noise)"


def _ms(v: float | None) -> str:
    return "?" if v is None else f"{v:,.0f} ms"


def headline_mode(report: dict[str, Any]) -> str | None:
    """The mode the summary leads with: triage's default when the run has it, else the fastest one timed."""
    modes = {m: d for m, d in (report.get("modes") or {}).items() if d and d.get("ticket_ms_median")}
    if DEFAULT_MODE in modes:
        return DEFAULT_MODE
    reuse = [m for m in modes if m not in ("full", SPLIT)]
    return min(reuse, key=lambda m: modes[m]["ticket_ms_median"], default=None)


def plain_summary(report: dict[str, Any]) -> list[str]:
    """What a run found, in sentences a support engineer reads without the glossary, from the report's figures."""
    out: list[str] = []
    modes = report.get("modes") or {}
    mode = headline_mode(report)
    n = len((report.get("workload") or {}).get("tickets") or [])
    if mode is not None:
        d = modes[mode]
        out.append(
            f"A warm ticket (the criteria already loaded, as in a running session) takes "
            f"{_ms(d.get('ticket_ms_median'))} to score with {MODE_WORDS.get(mode, mode)}"
            + (f": the median of {n} tickets." if n > 1 else ".")
        )
        speed = (report.get("speedup") or {}).get(f"{mode}_vs_full")
        full = (modes.get("full") or {}).get("ticket_ms_median")
        if speed is not None:
            out.append(
                f"That is {times(speed, 'scoring each question whole')} ({_ms(full)}: every question re-reads "
                "the ticket)."
            )
        vs_raw = ((report.get("readout") or {}).get("vs_raw") or {}).get(mode)
        if vs_raw:
            out.append(
                f"It is {slower_or_faster_time(vs_raw, 'llama.cpp alone reading the same tokens')} "
                "(llama.cpp's raw speed is about the most this machine can do)."
            )
    cost = (report.get("learned") or {}).get("cost_vs_fanout")
    if cost is not None:
        out.append(f"A learned head on every question costs {extra(cost)} than without one.")
    shared = (report.get("shared_read") or {}).get("by_kind") or {}
    said = [f"{times(1 / v['ratio'])} on {k} tickets" for k, v in shared.items() if v.get("ratio")]
    if said:
        out.append(
            "Reading every learned question at one point after the ticket, instead of after each question: "
            + ", ".join(said)
            + "."
        )
    drift = report.get("drift") or {}
    if drift.get("compared_vs_full"):
        flips = drift.get("choice_flips_vs_full", 0)
        worst = drift.get("max_abs_prob_vs_full")
        out.append(
            f"Reusing work changed {flips} answer{'' if flips == 1 else 's'} against scoring whole"
            + (f" (probabilities moved by at most {worst:.3f})." if worst is not None else ".")
        )
    same = drift.get("max_abs_prob_same_split")
    if same:  # must be 0: reuse is exact against the same token split
        out.append(f"WARNING: reuse was not exact (probabilities differ by {same:g} from the same split; must be 0).")
    default = (report.get("stable_cache") or {}).get("default") or {}
    if default.get("warm_first_ticket_ms") is not None and default.get("cold_first_ticket_ms") is not None:
        out.append(
            f"After a restart, the first ticket takes {_ms(default['warm_first_ticket_ms'])} instead of "
            f"{_ms(default['cold_first_ticket_ms'])}: the criteria's saved state is read from disk."
        )
    if (report.get("machine") or {}).get("warnings"):
        out.append("The machine was busy during the run: these timings are noisy (warnings below).")
    return out


def summary_line(report: dict[str, object]) -> str:
    """The plain summary as one paragraph (the report's ``summary``)."""
    return " ".join(plain_summary(report))


def where_time_goes(report: dict[str, Any]) -> dict[str, str]:
    """A sentence per mode on where its median ticket spends time."""
    out: dict[str, str] = {}
    for m, d in report["modes"].items():
        if not d:
            continue
        total = d["ticket_ms_median"] or 0.0
        if m in ("full", SPLIT):
            out[m] = (
                f"{d['tails_ms_median']:.0f} of {total:.0f} ms evaluating {d['tokens_evaluated_median']:.0f} tokens "
                "of whole prompts (every prompt re-reads the stable block and the "
                f"ticket); {d['other_ms_median']:.0f} ms building prompts and reading out"
            )
        else:
            out[m] = (
                f"{d['prefill_ms_median']:.0f} ms prefilling the ticket once, {d['tails_ms_median']:.0f} ms on tails, "
                f"{d['other_ms_median']:.0f} ms other (prompt building, "
                f"readout{', saving the prefix state' if m == 'serial_restore' else ''}) "
                f"of {total:.0f} ms"
            )
    return out


def criteria_subset(report: dict[str, Any], mode: str) -> int | None:
    """How many criteria ``mode`` scored when it scored fewer than the pack has (split may), else None."""
    k = (report.get("modes", {}).get(mode) or {}).get("criteria_scored")
    n = report.get("workload", {}).get("pack", {}).get("criteria")
    return k if k and n and k < n else None
