"""Turn a :class:`BenchRun` into the figures: the JSON report (its words: :mod:`triage.bench.summary`).

Definitions (also in bench/README.md):

* per-ticket ms: ``TicketResult.timing.total_ms`` (prompt building, prefill,
  tails, readout); per-criterion ms: ``CriterionResult.tail_ms`` (its tails
  over all orderings; in ``full``, its whole prompts; in ``fanout``, its
  tokens' share of the one batch).
* speed-up of a mode: per ticket, full's ms / the mode's ms (medians over
  repeats); the report gives the median over tickets. The token bound is, per
  ticket, ``full_tokens / reuse_tokens``; ``bound_ratio`` is, per ticket,
  speed-up / bound, median over tickets. ``aggregate`` has the same as ratios
  of sums over the whole set.
* drift: the largest |Δp| over every ticket, criterion and option.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from triage.bench.caches import cache_report
from triage.bench.drift import drift_report
from triage.bench.machine import BUSY_OTHER_SHARE, cores, is_busy, machine_info, other_cpu_share
from triage.bench.samples import by_mode, first, per_ticket_ms
from triage.bench.stats import LinearFit, clean, linear_fit, median, ratio, spread, token_bound
from triage.bench.summary import summary_line, where_time_goes
from triage.bench.workload import (
    LEARNED_MODE,
    LETTER_MODE,
    REUSE_MODES,
    SERIAL_MODES,
    SHARED_MODE,
    SHARED_READ,
    SPLIT,
)
from triage.store.files import write_json_atomic

if TYPE_CHECKING:
    from triage.bench.runner import BenchRun, ProbePoint, Sample

SCHEMA = "triage.bench/1"
SEED_ONNX = {"fixed_ms": 28.4, "per_token_ms": 3.23, "what": "the seed design's ONNX Runtime tails on a CPU"}


def _mode_summary(samples: list[Sample]) -> dict[str, object]:
    if not samples:
        return {}
    res = [s.result for s in samples]
    ticket = [r.timing.total_ms for r in res]
    crit = [c.tail_ms for r in res for c in r.criteria]
    per_tail = [c.tail_ms / c.orderings for r in res for c in r.criteria if c.orderings]
    prefill = [r.timing.prefill_ms for r in res]
    tails = [r.timing.tails_ms for r in res]
    other = [r.timing.total_ms - r.timing.prefill_ms - r.timing.tails_ms for r in res]
    evaluated = [r.tokens.evaluated for r in res]
    return {
        "n": len(res),
        "criteria_scored": max(len(r.criteria) for r in res),
        "ticket_ms_median": clean(median(ticket), 1),
        "ticket_ms": spread(ticket).to_dict(1),
        "criterion_ms_median": clean(median(crit), 2),
        "criterion_ms": spread(crit).to_dict(2),
        "per_tail_ms_median": clean(median(per_tail), 2),
        "tokens_evaluated_median": clean(median(evaluated), 1),
        "tokens_evaluated_total": int(sum(evaluated)),
        "prefill_ms_median": clean(median(prefill), 1),
        "tails_ms_median": clean(median(tails), 1),
        "other_ms_median": clean(median(other), 1),
        "hit_rate_median": clean(median([r.tokens.hit_rate for r in res]), 4),
    }


def _fit_dict(fit: LinearFit | None, **extra: object) -> dict[str, object] | None:
    if fit is None:
        return None
    return {
        "fixed_ms": clean(fit.intercept, 3),
        "per_token_ms": clean(fit.slope, 4),
        "r2": clean(fit.r2, 4),
        "n": fit.n,
        "tokens_min": fit.x_min,
        "tokens_max": fit.x_max,
        **extra,
    }


def _try_fit(xs: list[float], ys: list[float]) -> LinearFit | None:
    try:
        return linear_fit(xs, ys)
    except ValueError:
        return None


def tail_points(samples: list[Sample], mode: str) -> list[tuple[float, float]]:
    """(tokens, ms) of one average tail per (ticket, criterion): tail totals / orderings."""
    return [
        (c.tail_tokens / c.orderings, c.tail_ms / c.orderings)
        for s in by_mode(samples, mode)
        for c in s.result.criteria
        if c.orderings
    ]


def _medians_by_size(points: Iterable[ProbePoint], kind: str) -> dict[int, float]:
    acc: dict[int, list[float]] = defaultdict(list)
    for p in points:
        if p.kind == kind:
            acc[p.tokens].append(p.ms)
    return {k: median(v) for k, v in sorted(acc.items())}


def _nearest(table: dict[int, float], size: float) -> tuple[int, float] | None:
    if not table:
        return None
    k = min(table, key=lambda z: abs(z - size))
    return k, table[k]


def build_report(run: BenchRun, *, wait: dict[str, object] | None = None) -> dict[str, object]:
    """The JSON report (``triage.bench/1``) from the raw measurements."""
    wl = run.workload
    samples = run.samples
    modes = [*wl.modes, SPLIT]
    report: dict[str, object] = {
        "schema": SCHEMA,
        "created_at": run.started_at,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(run.started_at)),
    }
    report["workload"] = workload = wl.describe()
    report["paste"] = run.paste  # cold, after a prefill, the tails alone (triage.bench.paste)
    n_prompts = sum(
        len(c.options) if wl.mode_readout("serial_truncate")[1] == "cyclic" else 1 for c in wl.pack.criteria
    )
    if isinstance(pack_info := workload["pack"], dict):
        pack_info["prompts_per_ticket"] = n_prompts

    # -- machine and noise ------------------------------------------------------------
    machine = machine_info(int(run.engine.get("threads") or 0))
    share = other_cpu_share(run.cpu_start, run.cpu_end) if run.cpu_start and run.cpu_end else None
    warnings: list[str] = []
    notes: list[str] = []
    busy_start = is_busy(run.load_avg_start) if run.load_avg_start else False
    if busy_start and share is not None and share <= BUSY_OTHER_SHARE:
        # the load average lags by minutes; what others used during the run is the direct measure
        notes.append(
            f"load average {run.load_avg_start[0]:.2f} at start (earlier work fading), but other processes "
            f"used {share:.0%} of the CPU during the run"
        )
    elif busy_start:
        warnings.append(
            f"machine busy at start: load average {run.load_avg_start[0]:.2f} on {cores()} cores; timings are noisy"
        )
    if share is not None and share > BUSY_OTHER_SHARE:
        warnings.append(f"other processes used {share:.0%} of the CPU during the run; timings are noisy")
    if wait is not None and not wait.get("quiet", True):
        warnings.append(
            f"the load average never fell below {wait.get('threshold')} "
            f"in {wait.get('waited_s')} s of waiting; ran anyway"
        )
    machine.update(
        {
            "load_avg_start": run.load_avg_start,
            "load_avg_end": run.load_avg_end,
            "load_avg_end_note": "the end figure includes this run's own threads",
            "other_cpu_share": clean(share, 3) if share is not None else None,
            "busy_at_start": busy_start,
            "quiet_wait": wait,
            "warnings": warnings,
            "notes": notes,
        }
    )
    report["machine"] = machine
    report["model"] = {**run.model, **run.engine}
    report["llama_cpp_python"] = machine.get("llama_cpp_python")
    report["pack_hash"] = wl.pack.hash

    # -- per mode ---------------------------------------------------------------------
    report["modes"] = {m: _mode_summary(by_mode(samples, m)) for m in modes if by_mode(samples, m)}

    # -- per ticket, speed-ups and the token bound --------------------------------------
    ms = per_ticket_ms(samples)
    per_ticket: list[TicketRow] = []
    speedups: dict[str, list[float]] = defaultdict(list)
    closeness: dict[str, list[float]] = defaultdict(list)
    closeness_plain: dict[str, list[float]] = defaultdict(list)
    bounds: list[float] = []
    bounds_resident: list[float] = []
    tot_full_tokens = tot_reuse_tokens = tot_resident_tokens = 0
    for t in wl.tickets:
        full = first(samples, "full", t.id)
        if full is None:
            continue
        tok = full.tokens
        bound = token_bound(tok.full_prompts, tok.total_input)
        resident = token_bound(tok.full_prompts, tok.total_input - tok.stable)
        bounds.append(bound)
        bounds_resident.append(resident)
        tot_full_tokens += tok.full_prompts
        tot_reuse_tokens += tok.total_input
        tot_resident_tokens += tok.total_input - tok.stable
        row: TicketRow = {
            "id": t.id,
            "kind": t.kind,
            "ticket_tokens": tok.ticket,
            "stable_tokens": tok.stable,
            "prefix_tokens": tok.prefix,
            "tail_tokens": tok.tails,
            "full_tokens": tok.full_prompts,
            "reuse_tokens": tok.total_input,
            "token_bound": clean(bound, 3),
            "token_bound_resident": clean(resident, 3),
            "prompt_build_ms": clean(run.prompt_build_ms.get(t.id, math.nan), 2),
            "ms": {m: clean(ms[m][t.id], 1) for m in modes if m in ms and t.id in ms[m] and m != SPLIT},
            "speedup": {},
        }
        for m in REUSE_MODES:
            if m in ms and t.id in ms[m]:
                sp = ms["full"][t.id] / ms[m][t.id]
                speedups[m].append(sp)
                closeness[m].append(sp / resident)
                closeness_plain[m].append(sp / bound)
                row["speedup"][m] = clean(sp, 3)
        per_ticket.append(row)
    report["per_ticket"] = per_ticket
    sp_med = {m: median(v) for m, v in speedups.items()}
    best_serial = max((m for m in SERIAL_MODES if m in sp_med), key=lambda m: sp_med[m], default=None)
    speedup: dict[str, object] = {f"{m}_vs_full": clean(v, 3) for m, v in sp_med.items()}
    report["speedup"] = speedup
    speedup["serial_vs_full"] = clean(sp_med[best_serial], 3) if best_serial else None
    speedup["serial_best_strategy"] = best_serial.split("_", 1)[1] if best_serial else None
    speedup["by_kind"] = _by_kind(per_ticket)
    report["token_bound"] = clean(median(bounds), 3)
    report["token_bound_resident"] = clean(median(bounds_resident), 3)
    report["token_bound_note"] = (
        "token_bound = full prompts' tokens / (prefix + tails), the issue's definition: the prefix, stable block "
        "included, evaluated once per ticket. Reuse modes are timed as in a session, with the stable block already "
        "resident, so they evaluate only (prefix - stable) + tails: "
        "token_bound_resident is the bound for what was timed, "
        "and bound_ratio compares with it (bound_ratio_vs_token_bound with the plain bound)."
    )
    report["bound_ratio"] = {m: clean(median(v), 3) for m, v in closeness.items()}
    report["bound_ratio_vs_token_bound"] = {m: clean(median(v), 3) for m, v in closeness_plain.items()}
    tot = {m: sum(ms[m].get(t["id"], 0.0) for t in per_ticket) for m in ms}
    report["aggregate"] = {
        "what": "the whole ticket set as one workload: sums of per-ticket medians and of tokens",
        "token_bound": clean(ratio(tot_full_tokens, tot_reuse_tokens), 3),
        "token_bound_resident": clean(ratio(tot_full_tokens, tot_resident_tokens), 3),
        **{f"{m}_vs_full": clean(ratio(tot.get("full", math.nan), tot[m]), 3) for m in REUSE_MODES if m in tot},
    }

    # -- cost model and the raw reference --------------------------------------------------
    report["cost_fit"], report["raw_throughput"] = _cost_and_raw(run, run.readout_ms)

    # -- the label readout against the letter readout --------------------------------------------
    report["readout"] = _readout_comparison(run, ms)
    report["learned"] = learned = _learned_cost(ms)
    if learned is not None:
        learned["apply_ms_per_criterion"] = clean(run.head_ms, 4) if run.head_ms is not None else None
    report["shared_read"] = _shared_cost(run, ms)

    # -- drift -------------------------------------------------------------------------------
    report["drift"] = drift_report(run)

    # -- cache and stable cache ----------------------------------------------------------------
    report["cache"], report["stable_cache"] = cache_report(run)

    # -- footprint -------------------------------------------------------------------------------
    report["footprint"] = {
        "load_ms": clean(run.load_ms, 1),
        "rss_after_load_mb": clean(run.rss_after_load_mb, 1) if run.rss_after_load_mb else None,
        "peak_rss_mb": clean(run.peak_rss_mb, 1),
        "peak_rss_note": "ru_maxrss of the bench process: one engine at a time, plus Python, NumPy and Rich",
    }
    report["points"] = {
        "what": (
            "what the chart plots: [tokens, ms] per tail-probe decode, per "
            "fresh-sequence decode, and per (ticket, criterion) average engine tail"
        ),
        "probe_tails": [[p.tokens, clean(p.ms, 3)] for p in run.probe if p.kind == "tail"],
        "fresh": [[p.tokens, clean(p.ms, 3)] for p in run.probe if p.kind == "fresh"],
        "fanout_fresh": [[p.tokens, clean(p.ms, 3)] for p in run.probe if p.kind == "fanout_fresh"],
        "engine_tails": {
            m: [[clean(x, 2), clean(y, 3)] for x, y in tail_points(samples, m)]
            for m in (*REUSE_MODES, "serial_long")
            if by_mode(samples, m)
        },
    }
    report["elapsed_s"] = clean(run.elapsed_s, 1)
    report["phase_s"] = {k: clean(v, 1) for k, v in run.phase_s.items()}
    report["time_goes"] = where_time_goes(report)
    report["summary"] = summary_line(report)
    return report


class TicketRow(TypedDict):
    """One ticket of the report's ``per_ticket``: its tokens, the token bound, and each mode's ms and speed-up."""

    id: str
    kind: str
    ticket_tokens: int
    stable_tokens: int
    prefix_tokens: int
    tail_tokens: int
    full_tokens: int
    reuse_tokens: int
    token_bound: float | None
    token_bound_resident: float | None
    prompt_build_ms: float | None
    ms: dict[str, float | None]
    speedup: dict[str, float | None]


def _readout_comparison(run: BenchRun, ms: dict[str, dict[str, float]]) -> dict[str, object]:
    """Each reuse mode against letter_serial (the default before the label readout), ticket by
    ticket, and against llama.cpp's raw prompt processing of the same number of tokens."""
    raw = {(p.ticket_id, p.kind.split(":", 1)[1]): p.ms for p in run.probe if p.kind.startswith("raw:")}
    raw_tokens = {(p.ticket_id, p.kind.split(":", 1)[1]): p.tokens for p in run.probe if p.kind.startswith("raw:")}
    vs_letters: dict[str, float | None] = {}
    vs_raw: dict[str, float | None] = {}
    per_ticket: dict[str, dict[str, dict[str, float | int | None]]] = {}
    out: dict[str, object] = {
        "readout": run.workload.readout,
        "baseline": LETTER_MODE,
        "what": (
            "speedup_vs_letter_serial: per ticket, letter_serial's ms / the mode's ms, median over tickets. "
            "vs_raw: per ticket, the mode's ms / llama.cpp's ms to decode the same number of tokens as one fresh "
            "sequence in an empty cache (the machine's physical limit "
            "for that work), median over tickets; 1.0 = at the limit."
        ),
        "speedup_vs_letter_serial": vs_letters,
        "vs_raw": vs_raw,
        "per_ticket": per_ticket,
    }
    base = ms.get(LETTER_MODE, {})
    for m in REUSE_MODES:
        if m not in ms:
            continue
        sp = [base[t] / ms[m][t] for t in ms[m] if t in base and ms[m][t] > 0]
        vr = [ms[m][t] / raw[(t, m)] for t in ms[m] if (t, m) in raw and raw[(t, m)] > 0]
        if m != LETTER_MODE and sp:
            vs_letters[m] = clean(median(sp), 3)
        if vr:
            vs_raw[m] = clean(median(vr), 3)
        for t in ms[m]:
            row = per_ticket.setdefault(t, {})
            row[m] = {
                "ms": clean(ms[m][t], 1),
                "tokens_evaluated": raw_tokens.get((t, m)),
                "raw_ms": clean(raw.get((t, m), math.nan), 1),
            }
    return out


def _learned_cost(ms: dict[str, dict[str, float]]) -> dict[str, object] | None:
    """fanout with a learned head on every criterion against plain fanout, ticket by ticket."""
    if LEARNED_MODE not in ms or "fanout" not in ms:
        return None
    per = {t: ms[LEARNED_MODE][t] / ms["fanout"][t] for t in ms[LEARNED_MODE] if ms["fanout"].get(t)}
    return {
        "what": (
            "cost_vs_fanout: per ticket, fanout_learned's ms / fanout's ms (the same tickets, interleaved in one run), "
            "median over tickets; 1.10 would be 10% more. The head has "
            "random weights of the real shape: its cost, not its decisions."
        ),
        "cost_vs_fanout": clean(median(list(per.values())), 3) if per else None,
        "per_ticket": {t: clean(v, 3) for t, v in per.items()},
    }


def _shared_cost(run: BenchRun, ms: dict[str, dict[str, float]]) -> dict[str, object] | None:
    """Every criterion learned, read at the shared position against at its own tail, ticket by ticket, by kind."""
    if SHARED_MODE not in ms or LEARNED_MODE not in ms:
        return None
    evaluated: dict[tuple[str, str], list[int]] = {}
    for smp in run.samples:
        if smp.mode in (SHARED_MODE, LEARNED_MODE):
            evaluated.setdefault((smp.mode, smp.ticket.id), []).append(smp.result.tokens.evaluated)
    by_kind: dict[str, object] = {}
    for kind in dict.fromkeys(t.kind for t in run.workload.tickets):
        ids = [t.id for t in run.workload.tickets if t.kind == kind and ms[LEARNED_MODE].get(t.id)]
        ids = [t for t in ids if t in ms[SHARED_MODE]]
        if not ids:
            continue
        block = {t: run.ticket_block_tokens.get(t) for t in ids}
        over = [max(evaluated[(SHARED_MODE, t)]) - b for t in ids if (b := block[t]) is not None]
        by_kind[kind] = {
            "n": len(ids),
            "tail_ms": clean(median([ms[LEARNED_MODE][t] for t in ids]), 1),
            "shared_ms": clean(median([ms[SHARED_MODE][t] for t in ids]), 1),
            "ratio": clean(median([ms[SHARED_MODE][t] / ms[LEARNED_MODE][t] for t in ids]), 3),
            "tail_tokens": clean(median([median(evaluated[(LEARNED_MODE, t)]) for t in ids]), 1),
            "shared_tokens": clean(median([median(evaluated[(SHARED_MODE, t)]) for t in ids]), 1),
            "ticket_block_tokens": clean(median([b for b in block.values() if b is not None]), 1),
            "tokens_over_ticket_block_max": max(over) if over else None,
        }
    return {
        "what": (
            f"ratio: per ticket, {SHARED_MODE}'s ms / {LEARNED_MODE}'s ms (both: a head on every criterion, read at "
            f"one cue, {SHARED_READ}, after the ticket against at each criterion's own tail; interleaved in one run), "
            "median over the tickets of a kind. The shared mode's head is the stored starter head when there is one "
            "(the workload's notes say so), else random weights of the real shape, as the tails'. "
            "tokens_over_ticket_block_max: the most tokens the shared mode evaluated beyond the ticket block's own"
        ),
        "read": SHARED_READ,
        "by_kind": by_kind,
    }


def _by_kind(per_ticket: list[TicketRow]) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for kind in dict.fromkeys(r["kind"] for r in per_ticket):
        rows = [r for r in per_ticket if r["kind"] == kind]
        out[kind] = {
            "n": len(rows),
            "token_bound": clean(median([b for r in rows if (b := r["token_bound"]) is not None]), 3),
            "token_bound_resident": clean(median([b for r in rows if (b := r["token_bound_resident"]) is not None]), 3),
        }
        for m in REUSE_MODES:
            vals = [v for r in rows if (v := r["speedup"].get(m)) is not None]
            if vals:
                out[kind][f"{m}_vs_full"] = clean(median(vals), 3)
    return out


def _cost_and_raw(run: BenchRun, readout_ms: float | None) -> tuple[dict[str, object], dict[str, object]]:
    samples = run.samples
    tails = [p for p in run.probe if p.kind == "tail"]
    probe_fit = _try_fit([p.tokens for p in tails], [p.ms for p in tails])
    fits: dict[str, object] = {}
    for m in (*REUSE_MODES, "serial_long"):
        pts = tail_points(samples, m)
        if pts:
            fit = _try_fit([x for x, _ in pts], [y for _, y in pts])
            fits[m] = _fit_dict(
                fit,
                per_tail_ms_median=clean(median([y for _, y in pts]), 3),
                tail_tokens_median=clean(median([x for x, _ in pts]), 2),
            ) or {"per_tail_ms_median": clean(median([y for _, y in pts]), 3)}
    engine_tail = tail_points(samples, "serial_truncate")
    overhead = None
    if probe_fit is not None and engine_tail:
        x = median([x for x, _ in engine_tail])
        overhead = median([y for _, y in engine_tail]) - probe_fit.predict(x)
    if probe_fit is not None:
        cost = _fit_dict(
            probe_fit,
            source=(
                "tail probe: single tails of varied length decoded after real "
                "ticket prefixes, then truncated (serial/truncate's work per tail)"
            ),
        )
        assert cost is not None  # a fit gives its dict
    else:
        fit = _try_fit([x for x, _ in engine_tail], [y for _, y in engine_tail]) if engine_tail else None
        cost = _fit_dict(fit, source="serial/truncate per-criterion tails (per-tail means)") or {
            "fixed_ms": None,
            "per_token_ms": None,
            "r2": None,
        }
    cost.update(
        {
            "engine_overhead_ms_per_tail": clean(overhead, 3) if overhead is not None else None,
            "engine_overhead_note": (
                "serial/truncate's measured ms per tail minus the probe "
                "fit at the same length: readout, logits copy, Python"
            ),
            "readout_ms": clean(readout_ms, 3) if readout_ms is not None else None,
            "by_mode": fits,
            "seed_onnx": SEED_ONNX,
        }
    )

    fresh = _medians_by_size(run.probe, "fresh")
    tail_ms = _medians_by_size(run.probe, "tail")
    fanout_fresh = [p for p in run.probe if p.kind == "fanout_fresh"]
    raw: dict[str, object] = {
        "what": "prompt processing of fresh sequences in an empty cache (NativeModel.decode), the physical reference",
        "sizes": [
            {
                "tokens": k,
                "fresh_ms": clean(v, 3),
                "fresh_tokens_per_s": clean(1000 * k / v, 1),
                "tail_ms": clean(tail_ms.get(k, math.nan), 3),
                "tail_tokens_per_s": clean(1000 * k / tail_ms[k], 1) if k in tail_ms else None,
                "tail_vs_fresh": clean(ratio(v, tail_ms.get(k, math.nan)), 3),
            }
            for k, v in fresh.items()
        ],
    }
    batch_rate: float | None = None  # fanout's whole batch decoded fresh, tokens/s
    if fanout_fresh:
        n = median([p.tokens for p in fanout_fresh])
        batch_rate = clean(median([1000 * p.tokens / p.ms for p in fanout_fresh]), 1)
        raw["fanout_batch"] = {"tokens": clean(n, 1), "fresh_tokens_per_s": batch_rate}
    ratios: dict[str, object] = {}
    for m in SERIAL_MODES:
        pts = tail_points(samples, m)
        if pts and fresh:
            vals = []
            for x, y in pts:
                near = _nearest(fresh, x)
                if near and y > 0:
                    vals.append((1000 * x / y) / (1000 * near[0] / near[1]))
            ratios[m] = clean(median(vals), 3)
    fo = by_mode(samples, "fanout")
    if fo and fanout_fresh and (ref := batch_rate) is not None:
        vals = [
            (1000 * s.result.tokens.tails / s.result.timing.tails_ms) / ref for s in fo if s.result.timing.tails_ms > 0
        ]
        ratios["fanout"] = clean(median(vals), 3)
    raw["tails_vs_raw"] = ratios
    raw["tails_vs_raw_note"] = (
        "the tails' tokens/s over fresh-sequence tokens/s at the nearest measured size (fanout: "
        "at its whole batch); below 1 = attention over the prefix plus per-tail overhead"
    )
    return cost, raw


def write_json(report: dict[str, object], path: Path) -> None:
    """Write the report, creating the folder, atomically."""
    write_json_atomic(path, report)
