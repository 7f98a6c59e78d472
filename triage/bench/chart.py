"""The bench chart as a hand-written SVG (no plotting library).

Two panels side by side:

* left, **where a ticket's time goes**: one stacked bar per mode (ticket
  prefill, tails or whole prompts, other), median ticket, with the speed-up
  over ``full``;
* right, **what one tail costs**: tail ms against tail tokens. The tail probe's
  points and fitted line, the engine's own tails per mode (average tail per
  criterion), fresh sequences in an empty cache (llama.cpp's raw throughput),
  and the seed design's ONNX Runtime cost line for comparison.

Every series is a ``<g class="series" data-series="NAME">`` so tests and
readers can find it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from triage.bench.summary import Report, criteria_subset, num, part, parts, plain_summary, seq, times
from triage.bench.workload import SHOWN_MODES

W, H = 980, 590
FONT = "font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif\""
COLORS = {
    "prefill": "#4c78a8",
    "tails": "#f58518",
    "other": "#bab0ac",
    "probe": "#222222",
    "fit": "#222222",
    "fresh": "#54a24b",
    "seed": "#9d9d9d",
    "serial_truncate": "#e45756",
    "serial_restore": "#b279a2",
    "fanout": "#4c78a8",
    "fanout_learned": "#72b7b2",
    "shared_learned": "#2a9d8f",
    "serial_long": "#eeca3b",
    "letter_serial": "#9d755d",
}
MODE_LABELS = {
    "full": "full",
    "serial_truncate": "serial · truncate",
    "serial_restore": "serial · restore",
    "fanout": "fanout",
    "fanout_learned": "fanout + learned head",
    "shared_learned": "learned head, shared read",
    "serial_long": "serial · long pack",
    "split": "split (reference)",
    "letter_serial": "letter · cyclic · serial",
}


@dataclass(frozen=True)
class Bar:
    """One mode's median ticket, split into parts (ms)."""

    mode: str
    prefill: float
    tails: float
    other: float
    speedup: float | None = None
    ticket: float | None = None  # the median ticket's ms; the parts (medians each) are scaled to it
    label: str | None = None

    @property
    def total(self) -> float:
        return self.ticket if self.ticket is not None else self.prefill + self.tails + self.other

    def part(self, name: str) -> float:
        """One part, scaled so that the parts add up to ``total``."""
        parts = self.prefill + self.tails + self.other
        value: float = getattr(self, name)
        return value * (self.total / parts if parts > 0 else 0.0)


@dataclass(frozen=True)
class Scatter:
    """Points of one series in the tail-cost panel."""

    name: str
    label: str
    points: Sequence[tuple[float, float]]
    hollow: bool = False


@dataclass(frozen=True)
class Line:
    """y = intercept + slope * x, drawn across the panel (clipped)."""

    name: str
    label: str
    intercept: float
    slope: float
    dashed: bool = False


def _t(
    x: float,
    y: float,
    s: str,
    *,
    size: int = 12,
    anchor: str = "start",
    weight: str = "normal",
    fill: str = "#222",
    extra: str = "",
) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
        f'font-weight="{weight}" fill="{fill}" {extra}>{escape(s)}</text>'
    )


def text_width(s: str, size: float) -> float:
    """A generous estimate of ``s``'s width in px at font ``size`` (sans-serif averages about 0.55 em a
    character; 0.6 leaves room), so that a label placed by it is never clipped."""
    return 0.6 * size * len(s)


def wrap(s: str, size: float, width: float) -> list[str]:
    """``s`` as lines no wider than ``width`` px at font ``size`` (by :func:`text_width`)."""
    import textwrap

    return textwrap.wrap(s, max(10, int(width / (0.6 * size)))) if s else []


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / max(ticks, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _ms(v: float) -> str:
    return f"{v / 1000:.1f} s" if v >= 1000 else f"{v:.0f} ms"


def _note(b: Bar) -> str:
    """What a bar says beside it: the median ticket, and how much faster (or slower) than full."""
    return _ms(b.total) + (f" · {times(b.speedup)}" if b.speedup and b.mode != "full" else "")


def _bars_panel(bars: Sequence[Bar], x0: float, y0: float, w: float, h: float) -> list[str]:
    out = [_t(x0, y0 - 14, "Where a ticket's time goes (median ticket)", size=15, weight="600")]
    if not bars:
        return out
    # the labels' column fits the longest label; the bars and their notes share what is left
    label_w = max(128.0, max(text_width(b.label or MODE_LABELS.get(b.mode, b.mode), 12) for b in bars) + 10)
    note_w = max(text_width(_note(b), 11) for b in bars) + 8
    gx, gw = x0 + label_w, max(40.0, w - label_w - note_w)
    vmax = max(b.total for b in bars) or 1.0
    row = min(44.0, h / len(bars))
    bh = row * 0.58
    for i, b in enumerate(bars):
        y = y0 + 10 + i * row
        out.append(f'<g class="series" data-series={quoteattr("bar-" + b.mode)}>')
        out.append(_t(gx - 8, y + bh * 0.72, b.label or MODE_LABELS.get(b.mode, b.mode), anchor="end", size=12))
        x = gx
        for name in ("prefill", "tails", "other"):
            v = b.part(name)
            if v <= 0:
                continue
            pw = gw * v / vmax
            out.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{pw:.1f}" height="{bh:.1f}" '
                f'fill="{COLORS[name]}"><title>{escape(f"{name}: {_ms(v)}")}</title></rect>'
            )
            x += pw
        out.append(_t(x + 6, y + bh * 0.72, _note(b), size=11, fill="#444"))
        out.append("</g>")
    ly = y0 + 22 + len(bars) * row
    for name, label in (
        ("prefill", "ticket prefill, once (reuse modes)"),
        ("tails", "tails (full and split: whole prompts)"),
        ("other", "other: prompt building, readout, state save"),
    ):
        out.append(f'<rect x="{gx:.1f}" y="{ly - 9:.1f}" width="11" height="11" fill="{COLORS[name]}"/>')
        out.append(_t(gx + 15, ly, label, size=11, fill="#444"))
        ly += 16
    return out


def _scatter_panel(
    scatters: Sequence[Scatter], lines: Sequence[Line], x0: float, y0: float, w: float, h: float, note: str
) -> list[str]:
    out = [_t(x0, y0 - 14, "What one tail costs", size=15, weight="600")]
    pts = [p for s in scatters for p in s.points]
    if not pts:
        return out
    xmax = max(p[0] for p in pts) * 1.05
    ymax = max(p[1] for p in pts) * 1.12
    xs, ys = _nice_step(xmax), _nice_step(ymax)
    xmax, ymax = math.ceil(xmax / xs) * xs, math.ceil(ymax / ys) * ys

    def px(x: float) -> float:
        return x0 + w * x / xmax

    def py(y: float) -> float:
        return y0 + h - h * y / ymax

    out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="#fbfbfb" stroke="#ddd"/>')
    v = 0.0
    while v <= xmax + 1e-9:
        out.append(f'<line x1="{px(v):.1f}" y1="{y0}" x2="{px(v):.1f}" y2="{y0 + h}" stroke="#eee"/>')
        out.append(_t(px(v), y0 + h + 15, f"{v:g}", size=10, anchor="middle", fill="#666"))
        v += xs
    v = 0.0
    while v <= ymax + 1e-9:
        out.append(f'<line x1="{x0}" y1="{py(v):.1f}" x2="{x0 + w}" y2="{py(v):.1f}" stroke="#eee"/>')
        out.append(_t(x0 - 6, py(v) + 3, f"{v:g}", size=10, anchor="end", fill="#666"))
        v += ys
    out.append(_t(x0 + w / 2, y0 + h + 32, "tail tokens", size=11, anchor="middle", fill="#444"))
    out.append(
        _t(
            x0 - 42,
            y0 + h / 2,
            "ms",
            size=11,
            anchor="middle",
            fill="#444",
            extra=f'transform="rotate(-90 {x0 - 42} {y0 + h / 2})"',
        )
    )
    out.append(f'<clipPath id="plot"><rect x="{x0}" y="{y0}" width="{w}" height="{h}"/></clipPath>')
    for ln in lines:
        color = COLORS.get(ln.name, "#222")
        dash = ' stroke-dasharray="6 4"' if ln.dashed else ""
        out.append(f'<g class="series" data-series={quoteattr(ln.name)} clip-path="url(#plot)">')
        out.append(
            f'<line x1="{px(0):.1f}" y1="{py(ln.intercept):.1f}" x2="{px(xmax):.1f}" '
            f'y2="{py(ln.intercept + ln.slope * xmax):.1f}" stroke="{color}" '
            f'stroke-width="1.6"{dash}><title>{escape(ln.label)}</title></line>'
        )
        out.append("</g>")
    for s in scatters:
        color = COLORS.get(s.name, "#222")
        out.append(f'<g class="series" data-series={quoteattr(s.name)}>')
        for x, y in s.points:
            fill = "none" if s.hollow else color
            out.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.2" fill="{fill}" '
                f'stroke="{color}" stroke-width="1.2" fill-opacity="0.75"/>'
            )
        out.append("</g>")
    # legend, under the plot
    ly = y0 + h + 54
    items: list[Line | Scatter] = [*lines, *scatters]
    for item in items:
        color = COLORS.get(item.name, "#222")
        lx = x0 - 40
        if isinstance(item, Line):
            dash = ' stroke-dasharray="6 4"' if item.dashed else ""
            out.append(
                f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 18}" '
                f'y2="{ly - 4}" stroke="{color}" stroke-width="1.6"{dash}/>'
            )
        else:
            fill = "none" if item.hollow else color
            out.append(
                f'<circle cx="{lx + 9}" cy="{ly - 4}" r="3.2" fill="{fill}" stroke="{color}" stroke-width="1.2"/>'
            )
        out.append(_t(lx + 24, ly, item.label, size=11, fill="#333"))
        ly += 15
    if note:
        out.append(_t(x0 + w - 8, y0 + 14, note, size=10, anchor="end", fill="#666"))
    return out


def render_svg(
    bars: Sequence[Bar],
    scatters: Sequence[Scatter],
    lines: Sequence[Line],
    *,
    title: str,
    subtitle: str | Sequence[str] = "",
    note: str = "",
) -> str:
    """The whole chart as an SVG document; the subtitle is wrapped to the chart's width, and the panels
    move down (the chart grows) by the lines it takes beyond two."""
    sub = [s for line in ([subtitle] if isinstance(subtitle, str) else subtitle) for s in wrap(line, 12, W - 48)]
    down = 16 * max(0, len(sub) - 2)
    h = H + down
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" {FONT}>',
        f'<rect width="{W}" height="{h}" fill="#ffffff"/>',
        _t(24, 30, title, size=17, weight="700"),
    ]
    for i, line in enumerate(sub):
        parts.append(_t(24, 52 + 16 * i, line, size=12, fill="#555"))
    parts += _bars_panel(bars, 24, 110 + down, 440, 290)
    parts += _scatter_panel(scatters, lines, 580, 110 + down, 370, 290, note)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def chart_from_report(report: Report) -> str:
    """Build the chart from a bench report alone (its ``points`` hold what is plotted)."""
    pts = part(report, "points")
    tails = {m: _points(v) for m, v in part(pts, "engine_tails").items()}
    modes = parts(report, "modes")
    sp = part(report, "speedup")

    def label(m: str) -> str | None:
        k = criteria_subset(report, m)
        return f"{m} ({k} criteria)" if k else None

    bars = [
        Bar(
            m,
            num(modes[m], "prefill_ms_median") or 0.0,
            num(modes[m], "tails_ms_median") or 0.0,
            max(0.0, num(modes[m], "other_ms_median") or 0.0),
            num(sp, f"{m}_vs_full"),
            ticket=num(modes[m], "ticket_ms_median"),
            label=label(m),
        )
        for m in SHOWN_MODES
        if modes.get(m)
    ]
    scatters: list[Scatter] = []
    lines: list[Line] = []
    fit = part(report, "cost_fit")
    probe_pts = _points(pts.get("probe_tails"))
    fresh_pts = _points(pts.get("fresh"))
    fixed, per_token = num(fit, "fixed_ms"), num(fit, "per_token_ms")
    if fixed is not None and per_token is not None:
        lines.append(
            Line("fit", f"fit: {fixed:.1f} ms + {per_token:.2f} ms/token (R² {fit['r2']:.3f})", fixed, per_token)
        )
    seed = part(fit, "seed_onnx")
    seed_fixed, seed_per_token = num(seed, "fixed_ms"), num(seed, "per_token_ms")
    if seed_fixed is not None and seed_per_token is not None:
        lines.append(
            Line(
                "seed",
                f"seed ONNX Runtime: {seed['fixed_ms']} ms + {seed['per_token_ms']} ms/token",
                seed_fixed,
                seed_per_token,
                dashed=True,
            )
        )
    if probe_pts:
        scatters.append(Scatter("probe", "tail probe (decode + truncate after a real prefix)", probe_pts))
    if fresh_pts:
        scatters.append(Scatter("fresh", "fresh sequence, empty cache (raw llama.cpp)", fresh_pts, hollow=True))
    for m in ("serial_truncate", "serial_restore", "fanout", "serial_long"):
        if tails.get(m):
            scatters.append(Scatter(m, f"engine tails: {MODE_LABELS[m]}", tails[m]))
    wl = part(report, "workload")
    model = part(report, "model")
    machine = part(report, "machine")
    title = (
        f"triage bench: {model.get('name', '?')}, {part(wl, 'pack').get('criteria', '?')} "
        f"criteria, orderings {wl.get('orderings', '?')}"
    )
    load = seq(machine, "load_avg_start") or ["?"]
    other = machine.get("other_cpu_share")
    said = plain_summary(report)[:2]  # the headline: a warm ticket's time, and against full
    n = len(seq(wl, "tickets"))
    subtitle = [
        " ".join(said) if said else str(report.get("summary", "")),
        f"{n} ticket{'' if n == 1 else 's'}"
        f"{' (quick)' if wl.get('quick') else ''}, "
        f"{machine.get('threads', '?')} thread{'' if machine.get('threads') == 1 else 's'} on "
        f"{machine.get('cores', '?')} cores ({machine.get('cpu_model', '?')}), load {load[0]} at start"
        + (f", other processes {other:.0%} of the CPU during the run" if other is not None else "")
        + (" (busy: noisy)" if machine.get("warnings") else ""),
    ]
    note = "engine tails: average tail per (ticket, criterion)"
    return render_svg(bars, scatters, lines, title=title, subtitle=subtitle, note=note)


def _points(v: object) -> list[tuple[float, float]]:
    """A report's ``[[x, y], ...]`` as points (anything else left out)."""
    return [
        (x, y)
        for p in (v if isinstance(v, list) else [])
        if isinstance(p, list | tuple)
        and len(p) == 2
        and isinstance(x := p[0], int | float)
        and isinstance(y := p[1], int | float)
    ]
