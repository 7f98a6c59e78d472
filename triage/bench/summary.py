"""The bench report in words: the plain summary a run opens with, and the wording of ratios.

Every figure here is read from the report itself (:func:`triage.bench.report.build_report`); nothing is
hard-coded. A speed ratio below 1 is said as "N× slower", never "0.8× faster". The terms the detail
prints are defined in bench/README.md, "Glossary".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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


Report = Mapping[str, object]
"""A bench report (``triage.bench/1``, :func:`triage.bench.report.build_report`), read through :func:`part` and
:func:`num`: a part or a figure a run did not measure reads as empty or None."""


def part(d: Mapping[str, object], key: str) -> Mapping[str, object]:
    """``d[key]`` when it is an object, else an empty one (a part the run did not measure)."""
    v = d.get(key)
    return v if isinstance(v, Mapping) else {}


def parts(d: Mapping[str, object], key: str) -> dict[str, Mapping[str, object]]:
    """``d[key]``'s entries that are objects (``modes``, ``by_kind``), by name."""
    return {k: v for k, v in part(d, key).items() if isinstance(v, Mapping)}


def num(d: Mapping[str, object], key: str) -> float | None:
    """``d[key]`` when it is a number (not a bool), else None."""
    v = d.get(key)
    return v if isinstance(v, int | float) and not isinstance(v, bool) else None


def seq(d: Mapping[str, object], key: str) -> Sequence[object]:
    """``d[key]`` when it is a list (or, in a report not yet written, a tuple), else an empty one."""
    v = d.get(key)
    return v if isinstance(v, list | tuple) else ()


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


def headline_mode(report: Report) -> str | None:
    """The mode the summary leads with: triage's default when the run has it, else the fastest one timed."""
    timed = {m: ms for m, d in parts(report, "modes").items() if (ms := num(d, "ticket_ms_median"))}
    if DEFAULT_MODE in timed:
        return DEFAULT_MODE
    reuse = [m for m in timed if m not in ("full", SPLIT)]
    return min(reuse, key=lambda m: timed[m], default=None)


def plain_summary(report: Report) -> list[str]:
    """What a run found, in sentences a support engineer reads without the glossary, from the report's figures."""
    out: list[str] = []
    modes = parts(report, "modes")
    mode = headline_mode(report)
    n = len(seq(part(report, "workload"), "tickets"))
    if mode is not None:
        d = modes[mode]
        out.append(
            f"A warm ticket (the criteria already loaded, as in a running session) takes "
            f"{_ms(num(d, 'ticket_ms_median'))} to score with {MODE_WORDS.get(mode, mode)}"
            + (f": the median of {n} tickets." if n > 1 else ".")
        )
        speed = num(part(report, "speedup"), f"{mode}_vs_full")
        full = num(part(modes, "full"), "ticket_ms_median")
        if speed is not None:
            out.append(
                f"That is {times(speed, 'scoring each question whole')} ({_ms(full)}: every question re-reads "
                "the ticket)."
            )
        vs_raw = num(part(part(report, "readout"), "vs_raw"), mode)
        if vs_raw:
            out.append(
                f"It is {slower_or_faster_time(vs_raw, 'llama.cpp alone reading the same tokens')} "
                "(llama.cpp's raw speed is about the most this machine can do)."
            )
    cost = num(part(report, "learned"), "cost_vs_fanout")
    if cost is not None:
        out.append(f"A learned head on every question costs {extra(cost)} than without one.")
    shared = parts(part(report, "shared_read"), "by_kind")
    said = [f"{times(1 / ratio)} on {k} tickets" for k, v in shared.items() if (ratio := num(v, "ratio"))]
    if said:
        out.append(
            "Reading every learned question at one point after the ticket, instead of after each question: "
            + ", ".join(said)
            + "."
        )
    drift = part(report, "drift")
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
    default = part(part(report, "stable_cache"), "default")
    warm, cold = num(default, "warm_first_ticket_ms"), num(default, "cold_first_ticket_ms")
    if warm is not None and cold is not None:
        out.append(
            f"After a restart, the first ticket takes {_ms(warm)} instead of "
            f"{_ms(cold)}: the criteria's saved state is read from disk."
        )
    if part(report, "machine").get("warnings"):
        out.append("The machine was busy during the run: these timings are noisy (warnings below).")
    return out


def summary_line(report: Report) -> str:
    """The plain summary as one paragraph (the report's ``summary``)."""
    return " ".join(plain_summary(report))


def where_time_goes(report: Report) -> dict[str, str]:
    """A sentence per mode on where its median ticket spends time."""
    out: dict[str, str] = {}
    for m, d in parts(report, "modes").items():
        if not d:
            continue
        total = num(d, "ticket_ms_median") or 0.0
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


def criteria_subset(report: Report, mode: str) -> int | None:
    """How many criteria ``mode`` scored when it scored fewer than the pack has (split may), else None."""
    k = part(part(report, "modes"), mode).get("criteria_scored")
    n = num(part(part(report, "workload"), "pack"), "criteria")
    return k if isinstance(k, int) and k and n and k < n else None
