"""The bench summary on a terminal: tables, a bar chart and the plain-language line."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Console
from rich.table import Table
from rich.text import Text

from triage.bench.paste import summary_lines as paste_lines
from triage.bench.summary import (
    Report,
    criteria_subset,
    extra,
    num,
    part,
    parts,
    plain_summary,
    seq,
    slower_or_faster_time,
    times,
)
from triage.bench.workload import SHOWN_MODES as ORDER

SHORT = {
    "full": "full",
    "serial_truncate": "serial/trunc",
    "serial_restore": "serial/restore",
    "fanout": "fanout",
    "fanout_learned": "fanout+head",
    "shared_learned": "shared+head",
    "serial_long": "serial/long",
    "split": "split (ref)",
    "letter_serial": "letter/cyclic/serial",
}


def _label(report: Report, m: str) -> str:
    k = criteria_subset(report, m)
    return f"{m} ({k} crit.)" if k else SHORT.get(m, m)


def _f(v: object, fmt: str = "{:.0f}", none: str = "–") -> str:
    return none if v is None else fmt.format(v)


def modes_table(report: Report) -> Table:
    """Per mode: the median ticket's ms, its spread, and how much faster than full (and than the ideal)."""
    t = Table(title="Time per ticket (median over tickets)", title_justify="left", header_style="bold")
    for col in ("mode", "ms", "spread", "vs full", "of ideal"):
        t.add_column(col, justify="left" if col == "mode" else "right", no_wrap=col != "mode")
    modes, sp, closeness = parts(report, "modes"), part(report, "speedup"), part(report, "bound_ratio")
    for m in ORDER:
        d = modes.get(m)
        if not d:
            continue
        spread = part(d, "ticket_ms")
        speed = num(sp, f"{m}_vs_full")
        t.add_row(
            _label(report, m),
            _f(d["ticket_ms_median"]),
            _f(spread.get("iqr_pct"), "±{:.0f}%") if (num(spread, "n") or 0) > 1 else "–",
            "–" if m == "full" or speed is None else times(speed),
            _f(closeness.get(m), "{:.0%}"),
        )
    return t


def time_goes_table(report: Report) -> Table:
    """Per mode: where the median ticket's ms go, and the tokens it evaluated."""
    t = Table(title="Where a ticket's time goes (median, ms)", title_justify="left", header_style="bold")
    for col in ("mode", "tokens", "prefill", "tails", "other", "per crit."):
        t.add_column(col, justify="left" if col == "mode" else "right", no_wrap=col != "mode")
    for m in ORDER:
        d = parts(report, "modes").get(m)
        if not d:
            continue
        t.add_row(
            _label(report, m),
            _f(d["tokens_evaluated_median"]),
            _f(d["prefill_ms_median"]),
            _f(d["tails_ms_median"]),
            _f(d["other_ms_median"]),
            _f(d["criterion_ms_median"], "{:.1f}"),
        )
    return t


def figures_table(report: Report) -> Table:
    """The other headline figures, one per line."""
    t = Table(title="Figures", title_justify="left", show_header=False)
    t.add_column("what", style="bold")
    t.add_column("value")
    cf, raw, drift = part(report, "cost_fit"), part(report, "raw_throughput"), part(report, "drift")
    seed = part(cf, "seed_onnx")
    t.add_row(
        "ideal speed-up",
        f"{_f(report.get('token_bound'), '{:.2f}×')} per ticket "
        f"(median) if time followed tokens, {_f(report.get('token_bound_resident'), '{:.2f}×')} "
        "with the stable block resident (what is timed; 'of ideal' above); "
        f"whole set {_f(part(report, 'aggregate').get('token_bound'), '{:.2f}×')}",
    )
    t.add_row(
        "cost of one tail",
        f"{_f(cf.get('fixed_ms'), '{:.1f}')} ms + {_f(cf.get('per_token_ms'), '{:.2f}')} "
        f"ms/token, R² {_f(cf.get('r2'), '{:.3f}')} "
        f"(seed ONNX: {seed['fixed_ms']} + {seed['per_token_ms']}/token); "
        f"triage's own time beyond llama.cpp {_f(cf.get('engine_overhead_ms_per_tail'), '{:.1f}')} ms a tail"
        " (near 0 or below: noise)",
    )
    sizes = [s for s in seq(raw, "sizes") if isinstance(s, Mapping)]
    if sizes:
        batch = part(raw, "fanout_batch")
        t.add_row(
            "raw llama.cpp",
            "fresh text, tokens/s: "
            + ", ".join(f"{s['tokens']} tokens {_f(s['fresh_tokens_per_s'])}/s" for s in sizes)
            + (f"; fanout's batch ({_f(batch['tokens'])} tokens) {_f(batch['fresh_tokens_per_s'])}/s" if batch else ""),
        )
    rd = part(report, "readout")
    vs_letters = _numbers(part(rd, "speedup_vs_letter_serial"))
    if vs_letters:
        t.add_row(
            f"{rd.get('readout')} vs letters",
            "; ".join(f"{SHORT.get(k, k)} {times(v)}" for k, v in vs_letters.items())
            + " than letter/cyclic/serial (per ticket, median)",
        )
    vs_raw = _numbers(part(rd, "vs_raw"))
    if vs_raw:
        t.add_row(
            "vs raw, same tokens",
            ", ".join(f"{SHORT.get(k, k)} {slower_or_faster_time(v)}" for k, v in vs_raw.items())
            + " than llama.cpp alone decoding the tokens the mode evaluated (its raw speed: the machine's limit)",
        )
    learned = part(report, "learned")
    cost = num(learned, "cost_vs_fanout")
    if cost is not None:
        t.add_row(
            "learned head",
            "fanout with a head on every criterion costs "
            f"{extra(cost)} than fanout (per ticket, median); "
            f"applying it: {_f(learned.get('apply_ms_per_criterion'), '{:.3f}')} ms a criterion",
        )
    shared = parts(part(report, "shared_read"), "by_kind")
    if shared:
        t.add_row(
            "shared read",
            "every criterion learned, read at one cue after the ticket: "
            + "; ".join(
                f"{k} {slower_or_faster_time(num(v, 'ratio'))} than at the tails,"
                f" {_f(v.get('shared_tokens'), '{:.0f}')} tokens"
                f" (ticket block {_f(v.get('ticket_block_tokens'), '{:.0f}')}"
                f" + at most {v.get('tokens_over_ticket_block_max')})"
                for k, v in shared.items()
            ),
        )
    ratios = _numbers(part(raw, "tails_vs_raw"))
    if ratios:
        t.add_row(
            "tails vs raw",
            ", ".join(f"{SHORT.get(k, k)} {times(v)}" for k, v in ratios.items())
            + " than llama.cpp alone on fresh text of the same size",
        )
    t.add_row(
        "drift vs full",
        f"largest probability change {_f(drift.get('max_abs_prob_vs_full'), '{:.4f}')} (serial), "
        f"{_f(drift.get('max_abs_prob_fanout_vs_full'), '{:.4f}')} (fanout); "
        f"{drift.get('choice_flips_vs_full', 0)} answers changed",
    )
    same = drift.get("max_abs_prob_same_split")
    t.add_row(
        "drift vs same split",
        Text(
            f"largest probability change {_f(same, '{:g}')} over {drift.get('compared_same_split', 0)} comparisons"
            " (must be 0)",
            style="green" if same == 0 else "bold red",
        ),
    )
    cache = part(report, "cache")
    over = (
        "over the cold session; steady"
        if cache.get("hit_rate_over") == "cold_session"
        else "steady (no cold session in --quick):"
    )
    t.add_row(
        "cache hit rate",
        f"{_f(cache.get('hit_rate'), '{:.1%}')} {over} {_f(cache.get('hit_rate_steady_median'), '{:.1%}')} per ticket"
        + (
            f", {_f(cache.get('hit_rate_steady_long_median'), '{:.1%}')} with the long pack"
            if cache.get("hit_rate_steady_long_median") is not None
            else ""
        ),
    )
    if cache.get("stable_prefill_ms"):
        t.add_row(
            "stable block",
            "; ".join(
                f"{k} pack {part(cache, 'stable_tokens').get(k, '?')} tokens, prefilled once in {_f(v)} ms"
                for k, v in part(cache, "stable_prefill_ms").items()
            ),
        )
    for label, d in parts(report, "stable_cache").items():
        if label == "long_vs_short":
            t.add_row(
                "long vs short stable",
                f"{_f(d['long_ms_median'])} vs {_f(d['short_ms_median'])} ms per ticket"
                f" ({slower_or_faster_time(num(d, 'ratio'))} with the long one); "
                f"stable {d['long_stable_tokens']} vs {d['short_stable_tokens']} tokens",
            )
        elif "cold_first_ticket_ms" in d:
            t.add_row(
                f"first ticket, {label} pack",
                f"cold {_f(d['cold_first_ticket_ms'])} ms (stable prefill {_f(d.get('cold_stable_prefill_ms'))} ms), "
                f"warm {_f(d.get('warm_first_ticket_ms'))} ms from the "
                f"cache file; {d.get('stable_tokens')} stable tokens",
            )
    fp = part(report, "footprint")
    t.add_row("footprint", f"load {_f(fp['load_ms'])} ms, peak RSS {_f(fp['peak_rss_mb'])} MiB")
    m = part(report, "machine")
    other = m.get("other_cpu_share")
    t.add_row(
        "machine",
        f"{m.get('cpu_model')}, {m.get('threads')} threads / {m.get('cores')} "
        f"cores; load {seq(m, 'load_avg_start')[0]} → {seq(m, 'load_avg_end')[0]}"
        + (f"; others used {other:.0%} of the CPU" if other is not None else ""),
    )
    t.add_row("run", f"{report.get('elapsed_s')} s" + (" (quick)" if part(report, "workload")["quick"] else ""))
    return t


def _numbers(d: Mapping[str, object]) -> dict[str, float | None]:
    """The entries of ``d`` (ratios by mode) as numbers, None where one is not."""
    return {k: num(d, k) for k in d}


def bar_chart(report: Report, width: int = 80) -> Table:
    """Median ticket ms per mode as bars, the whole chart within ``width`` columns."""
    t = Table(show_header=False, box=None, padding=(0, 1), title="Median ticket (ms)", title_justify="left")
    t.add_column("mode", no_wrap=True)
    t.add_column("bar", no_wrap=True)
    t.add_column("ms", justify="right", no_wrap=True)
    modes = parts(report, "modes")
    shown = [m for m in ORDER if modes.get(m)]
    labels = {m: _label(report, m) for m in shown}
    values = {m: _f(modes[m]["ticket_ms_median"]) for m in shown}
    ms = {m: num(modes[m], "ticket_ms_median") or 0 for m in shown}
    # what the label and ms columns take, with their padding (one column each side of each)
    taken = max((len(v) for v in labels.values()), default=0) + max((len(v) for v in values.values()), default=0) + 6
    bar_w = max(4, min(36, width - taken))
    vmax = max(ms.values()) if shown else 0
    for m in shown:
        n = max(1, round(bar_w * ms[m] / (vmax or 1)))
        t.add_row(labels[m], Text("█" * n, style="cyan" if m != "full" else "magenta"), values[m])
    return t


def print_summary(report: Report, console: Console) -> None:
    """Everything a person reads at the end of a run: the plain summary first, then the detail."""
    console.print(Text("Summary", style="bold underline"))
    pasted = [r for r in seq(report, "paste") if isinstance(r, dict)]
    for line in plain_summary(report) + paste_lines(pasted):
        console.print(Text(f"• {line}"))
    console.print()
    console.print(Text('Detail (bench/README.md, "Glossary", says what each term means)', style="bold underline"))
    console.print(modes_table(report))
    console.print(time_goes_table(report))
    console.print(bar_chart(report, console.width))
    console.print(figures_table(report))
    for n in seq(part(report, "machine"), "notes"):
        console.print(f"[dim]note: {n}[/]")
    for w in seq(part(report, "machine"), "warnings"):
        console.print(f"[bold yellow]warning:[/] {w}")
