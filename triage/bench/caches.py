"""The readout side of a bench run's caches: prefix hit rates, and the stable block cold and warm."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from triage.bench.samples import by_mode, per_ticket_ms
from triage.bench.stats import clean, median, ratio

if TYPE_CHECKING:
    from triage.bench.runner import BenchRun
    from triage.domain.result import TicketResult


def session_report(results: list[TicketResult]) -> dict[str, object]:
    cached = sum(r.tokens.prefix_cached for r in results)
    total = sum(r.tokens.total_input for r in results)
    return {
        "hit_rate": clean(ratio(cached, total), 4),
        "cached_tokens": cached,
        "input_tokens": total,
        "per_ticket": [
            {
                "id": r.ticket_id,
                "ms": clean(r.timing.total_ms, 1),
                "stable_ms": clean(r.timing.stable_ms, 1),
                "prefix_cached": r.tokens.prefix_cached,
                "input_tokens": r.tokens.total_input,
                "hit_rate": clean(r.tokens.hit_rate, 4),
            }
            for r in results
        ],
    }


def cache_report(run: BenchRun) -> tuple[dict[str, object], dict[str, object]]:
    stable: dict[str, Any] = {}
    for label in dict.fromkeys(s.pack_label for s in run.stable):
        cold = next((s for s in run.stable if s.pack_label == label and s.phase == "cold"), None)
        warm = next((s for s in run.stable if s.pack_label == label and s.phase == "warm"), None)
        entry: dict[str, Any] = {"stable_tokens": run.stable_tokens.get(label)}
        if cold and cold.results:
            first = cold.results[0]
            entry.update(
                {
                    "cold_first_ticket_ms": clean(first.timing.total_ms, 1),
                    "cold_stable_prefill_ms": clean(first.timing.stable_ms, 1),
                    "cold_load_ms": clean(cold.load_ms, 1),
                    "state_file_bytes": cold.file_bytes,
                    "session": session_report(cold.results),
                }
            )
        if warm and warm.results:
            first = warm.results[0]
            entry.update(
                {
                    "warm_first_ticket_ms": clean(first.timing.total_ms, 1),
                    "warm_stable_cached": first.tokens.stable_cached,
                    "warm_load_ms": clean(warm.load_ms, 1),
                    "warm_cache_stats": warm.cache_stats,
                }
            )
        if "cold_first_ticket_ms" in entry and "warm_first_ticket_ms" in entry:
            entry["warm_saves_ms"] = clean(entry["cold_first_ticket_ms"] - entry["warm_first_ticket_ms"], 1)
            entry["warm_vs_cold"] = clean(ratio(entry["warm_first_ticket_ms"], entry["cold_first_ticket_ms"]), 3)
        entry["ticket"] = cold.results[0].ticket_id if cold and cold.results else None
        stable[label] = entry
    short = by_mode(run.samples, "serial_truncate")
    long_ = by_mode(run.samples, "serial_long")
    if short and long_:
        s_ms = median([s.result.timing.total_ms for s in short])
        l_ms = median([s.result.timing.total_ms for s in long_])
        ms = per_ticket_ms(run.samples)
        paired = [
            ms["serial_long"][t] / ms["serial_truncate"][t]
            for t in ms["serial_long"]
            if t in ms.get("serial_truncate", {})
        ]
        stable["long_vs_short"] = {
            "short_ms_median": clean(s_ms, 1),
            "long_ms_median": clean(l_ms, 1),
            "ratio": clean(ratio(l_ms, s_ms), 3),
            "paired_ratio_median": clean(median(paired), 3),
            "short_stable_tokens": run.stable_tokens.get("default"),
            "long_stable_tokens": run.stable_tokens.get("long"),
            "what": (
                "serial/truncate per-ticket ms with the stable block "
                "resident: default pack vs assets/long-stable-pack.toml"
            ),
        }
    steady = [s.result.tokens.hit_rate for s in short]
    default_session = stable.get("default", {}).get("session")
    cache = {
        "hit_rate": default_session["hit_rate"] if default_session else clean(median(steady), 4),
        "hit_rate_what": (
            "cached input tokens / input tokens over the cold-start session (default "
            "pack): the first ticket pays the stable block, later ones find it resident"
            if default_session
            else "cached input tokens / input tokens per ticket with the stable block "
            "resident (serial/truncate, median): no cold-start session was run (--quick)"
        ),
        "hit_rate_over": "cold_session" if default_session else "steady",
        "hit_rate_steady_median": clean(median(steady), 4),
        "hit_rate_steady_long_median": clean(median([s.result.tokens.hit_rate for s in long_]), 4) if long_ else None,
        "per_ticket": default_session["per_ticket"] if default_session else [],
        "stable_prefill_ms": {k: clean(v, 1) for k, v in run.stable_prefill_ms.items()},
        "stable_tokens": dict(run.stable_tokens),
        "stable_what": (
            "the warm-up's prefill of each pack's stable block on a "
            "fresh engine: paid once per pack, model and prompt format"
        ),
    }
    return cache, stable
