"""The bench summary on a terminal: tables, a bar chart and the plain-language line."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from triage.bench.report import criteria_subset
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


def _label(report: dict[str, Any], m: str) -> str:
    k = criteria_subset(report, m)
    return f"{m} ({k} crit.)" if k else SHORT.get(m, m)


def _f(v: Any, fmt: str = "{:.0f}", none: str = "–") -> str:
    return none if v is None else fmt.format(v)


def modes_table(report: dict[str, Any]) -> Table:
    """Per mode: ticket ms (median, IQR), per-criterion ms, tokens, where time goes, speed-up."""
    t = Table(title="Per mode (median over tickets; ms)", title_justify="left", header_style="bold")
    for col in ("mode", "ticket", "IQR", "criterion", "tokens", "prefill", "tails", "other", "vs full", "of bound"):
        t.add_column(col, justify="left" if col == "mode" else "right", no_wrap=True)
    modes, sp, closeness = report["modes"], report["speedup"], report.get("bound_ratio", {})
    for m in ORDER:
        d = modes.get(m)
        if not d:
            continue
        spread = d["ticket_ms"]
        t.add_row(
            _label(report, m),
            _f(d["ticket_ms_median"]),
            _f(spread.get("iqr_pct"), "±{:.0f}%") if spread.get("n", 0) > 1 else "–",
            _f(d["criterion_ms_median"], "{:.1f}"),
            _f(d["tokens_evaluated_median"]),
            _f(d["prefill_ms_median"]),
            _f(d["tails_ms_median"]),
            _f(d["other_ms_median"]),
            "1.0×" if m == "full" else _f(sp.get(f"{m}_vs_full"), "{:.2f}×"),
            _f(closeness.get(m), "{:.0%}"),
        )
    return t


def figures_table(report: dict[str, Any]) -> Table:
    """The other headline figures, one per line."""
    t = Table(title="Figures", title_justify="left", show_header=False)
    t.add_column("what", style="bold")
    t.add_column("value")
    cf, raw, drift = report["cost_fit"], report["raw_throughput"], report["drift"]
    t.add_row(
        "token bound",
        f"{_f(report.get('token_bound'), '{:.2f}×')} per ticket "
        f"(median), {_f(report.get('token_bound_resident'), '{:.2f}×')} "
        "with the stable block resident (what is timed; 'of bound' above); "
        f"whole set {_f(report['aggregate'].get('token_bound'), '{:.2f}×')}",
    )
    t.add_row(
        "cost of one tail",
        f"{_f(cf.get('fixed_ms'), '{:.1f}')} ms + {_f(cf.get('per_token_ms'), '{:.2f}')} "
        f"ms/token, R² {_f(cf.get('r2'), '{:.3f}')} "
        f"(seed ONNX: {cf['seed_onnx']['fixed_ms']} + {cf['seed_onnx']['per_token_ms']}/token); "
        f"engine overhead {_f(cf.get('engine_overhead_ms_per_tail'), '{:.1f}')} ms/tail",
    )
    sizes = raw.get("sizes", [])
    if sizes:
        t.add_row(
            "raw llama.cpp",
            ", ".join(f"{s['tokens']} tok {_f(s['fresh_tokens_per_s'])}/s" for s in sizes)
            + (
                f"; fanout batch {_f(raw['fanout_batch']['tokens'])} "
                f"tok {_f(raw['fanout_batch']['fresh_tokens_per_s'])}/s"
                if raw.get("fanout_batch")
                else ""
            ),
        )
    rd = report.get("readout") or {}
    if rd.get("speedup_vs_letter_serial"):
        t.add_row(
            f"{rd.get('readout')} vs letters",
            "; ".join(f"{SHORT.get(k, k)} {_f(v, '{:.2f}×')} faster" for k, v in rd["speedup_vs_letter_serial"].items())
            + " than letter/cyclic/serial (per ticket, median)",
        )
    if rd.get("vs_raw"):
        t.add_row(
            "vs raw, same tokens",
            ", ".join(f"{SHORT.get(k, k)} {_f(v, '{:.2f}×')}" for k, v in rd["vs_raw"].items())
            + " llama.cpp's time to decode the tokens the mode evaluated (1.0 = the physical limit)",
        )
    learned = report.get("learned") or {}
    if learned.get("cost_vs_fanout") is not None:
        t.add_row(
            "learned head",
            "fanout with a head on every criterion takes "
            f"{_f(learned['cost_vs_fanout'], '{:.3f}×')} fanout's time (per ticket, median); "
            f"applying it: {_f(learned.get('apply_ms_per_criterion'), '{:.3f}')} ms a criterion",
        )
    shared = (report.get("shared_read") or {}).get("by_kind") or {}
    if shared:
        t.add_row(
            "shared read",
            "every criterion learned, read at one cue after the ticket: "
            + "; ".join(
                f"{k} {_f(v.get('ratio'), '{:.2f}×')} the tails' time, {_f(v.get('shared_tokens'), '{:.0f}')} tokens"
                f" (ticket block {_f(v.get('ticket_block_tokens'), '{:.0f}')}"
                f" + at most {v.get('tokens_over_ticket_block_max')})"
                for k, v in shared.items()
            ),
        )
    ratios = raw.get("tails_vs_raw", {})
    if ratios:
        t.add_row("tails vs raw tok/s", ", ".join(f"{SHORT.get(k, k)} {_f(v, '{:.2f}')}" for k, v in ratios.items()))
    t.add_row(
        "drift vs full",
        f"max |Δp| {_f(drift.get('max_abs_prob_vs_full'), '{:.4f}')} (serial), "
        f"{_f(drift.get('max_abs_prob_fanout_vs_full'), '{:.4f}')} (fanout); "
        f"{drift.get('choice_flips_vs_full', 0)} choice flips",
    )
    same = drift.get("max_abs_prob_same_split")
    t.add_row(
        "drift vs same split",
        Text(
            f"max |Δp| {_f(same, '{:g}')} over {drift.get('compared_same_split', 0)} comparisons (must be 0)",
            style="green" if same == 0 else "bold red",
        ),
    )
    cache = report["cache"]
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
                f"{k} pack {cache['stable_tokens'].get(k, '?')} tokens, prefilled once in {_f(v)} ms"
                for k, v in cache["stable_prefill_ms"].items()
            ),
        )
    for label, d in report.get("stable_cache", {}).items():
        if label == "long_vs_short":
            t.add_row(
                "long vs short stable",
                f"{_f(d['long_ms_median'])} vs {_f(d['short_ms_median'])} ms per ticket ({_f(d['ratio'], '{:.2f}×')}); "
                f"stable {d['long_stable_tokens']} vs {d['short_stable_tokens']} tokens",
            )
        elif "cold_first_ticket_ms" in d:
            t.add_row(
                f"first ticket, {label} pack",
                f"cold {_f(d['cold_first_ticket_ms'])} ms (stable prefill {_f(d.get('cold_stable_prefill_ms'))} ms), "
                f"warm {_f(d.get('warm_first_ticket_ms'))} ms from the "
                f"cache file; {d.get('stable_tokens')} stable tokens",
            )
    fp = report["footprint"]
    t.add_row("footprint", f"load {_f(fp['load_ms'])} ms, peak RSS {_f(fp['peak_rss_mb'])} MiB")
    m = report["machine"]
    other = m.get("other_cpu_share")
    t.add_row(
        "machine",
        f"{m.get('cpu_model')}, {m.get('threads')} threads / {m.get('cores')} "
        f"cores; load {m['load_avg_start'][0]} → {m['load_avg_end'][0]}"
        + (f"; others used {other:.0%} of the CPU" if other is not None else ""),
    )
    t.add_row("run", f"{report.get('elapsed_s')} s" + (" (quick)" if report["workload"]["quick"] else ""))
    return t


def bar_chart(report: dict[str, Any], width: int = 36) -> Table:
    """Median ticket ms per mode as bars."""
    t = Table(show_header=False, box=None, padding=(0, 1), title="Median ticket", title_justify="left")
    t.add_column("mode")
    t.add_column("bar")
    t.add_column("ms", justify="right")
    modes = report["modes"]
    vmax = max((d["ticket_ms_median"] or 0) for d in modes.values() if d) or 1
    for m in ORDER:
        d = modes.get(m)
        if not d:
            continue
        n = max(1, round(width * (d["ticket_ms_median"] or 0) / vmax))
        t.add_row(
            _label(report, m), Text("█" * n, style="cyan" if m != "full" else "magenta"), _f(d["ticket_ms_median"])
        )
    return t


def print_summary(report: dict[str, Any], console: Console) -> None:
    """Everything a person reads at the end of a run."""
    console.print(modes_table(report))
    console.print(bar_chart(report))
    console.print(figures_table(report))
    for n in report["machine"].get("notes", []):
        console.print(f"[dim]note: {n}[/]")
    for w in report["machine"].get("warnings", []):
        console.print(f"[bold yellow]warning:[/] {w}")
    console.print(Text(report["summary"], style="bold"))
