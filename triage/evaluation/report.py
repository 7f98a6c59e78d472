"""The eval report on a terminal (Rich) and as JSON."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from triage.domain.ticket import printable
from triage.render import safe
from triage.store.files import write_json_atomic

COLUMNS = (
    ("n", "n", "{:d}"),
    ("accuracy", "acc", "{:.3f}"),
    ("balanced_accuracy", "bal acc", "{:.3f}"),
    ("balanced_accuracy_ci95", "bal acc 95% CI", "ci"),
    ("macro_f1", "macro-F1", "{:.3f}"),
    ("ece", "ECE", "{:.3f}"),
    ("ece_floor", "ECE floor", "{:.3f}"),
    ("brier", "Brier", "{:.3f}"),
    ("nll", "NLL", "{:.3f}"),
    ("flip_rate", "flips", "{:.0%}"),
    ("coverage", "coverage", "{:.0%}"),
)


def _fmt(value: Any, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if spec == "ci":
        return "–" if any(v is None or math.isnan(v) for v in value) else f"{value[0]:.2f}–{value[1]:.2f}"
    return spec.format(value)


def print_report(report: dict[str, Any], console: Console, *, confusion: bool = False) -> None:
    """One table per criterion: a row per variant and the baseline; then confusion matrices."""
    for crit in report["criteria"]:
        counts = ", ".join(f"{o} {n}" for o, n in crit["label_counts"].items())
        table = Table(title=safe(f"{crit['id']} · n={crit['n']} · gold: {counts}"), title_justify="left")
        table.add_column("variant", style="bold", no_wrap=True)
        for _, head, _ in COLUMNS:
            table.add_column(head, justify="right")
        best = max(
            (v["balanced_accuracy"] for v in crit["variants"].values() if not math.isnan(v["balanced_accuracy"])),
            default=None,
        )
        for name, m in crit["variants"].items():
            style = "green" if best is not None and m["balanced_accuracy"] == best else ""
            table.add_row(name, *[_fmt(m.get(key), spec) for key, _, spec in COLUMNS], style=style)
        base = crit.get("baseline")
        if base and "error" not in base:
            cells = [
                _fmt(base.get(key), spec) if key not in ("flip_rate", "coverage") else "" for key, _, spec in COLUMNS
            ]
            table.add_row(f"baseline (train n={base['train_n']})", *cells, style="cyan")
        console.print(table)
        for label, key in (("calibrated", "calibration"), ("raw+calibrated", "calibration_raw")):
            _print_calibration(label, crit.get(key), console)
        _print_learned(crit, console)
        if base and "error" in base:
            console.print(f"baseline: {printable(base['error'])}", style="yellow", markup=False)
        shown = (
            crit["variants"].items()
            if confusion
            else [
                (n, m)
                for n, m in crit["variants"].items()
                if n in ("calibrated", "cyclic+prior", "raw+prior", "learned")
            ][-1:]
        )
        for name, m in shown:
            print_confusion(
                crit["options"], m["confusion"], f"{crit['id']} · {name} · rows gold, columns predicted", console
            )


def _print_calibration(label: str, cal: dict[str, Any] | None, console: Console) -> None:
    """One calibration's parameters and holdout check, or why it was refused."""
    if not cal:
        return
    if "refused" in cal:
        console.print(f"{label}: refused: {printable(cal['refused'])}", style="yellow", markup=False)
        return
    bias = ", ".join(f"{o} {b:+.2f}" for o, b in cal["bias"].items())
    console.print(
        printable(f"{label} ({cal['base']} base, {cal['source']}): T={cal['temperature']:.2f}; bias {bias}"),
        style="dim",
        markup=False,
    )
    h = cal.get("holdout")
    if h:
        b, a = h["before"], h["after"]
        console.print(
            f"  train holdout n={h['n']}: NLL {b['nll']:.3f}→{a['nll']:.3f} · ECE {b['ece']:.3f}→{a['ece']:.3f} · "
            f"bal acc {b['balanced_accuracy']:.3f}→{a['balanced_accuracy']:.3f}",
            style="dim",
        )
    for w in cal.get("warnings", []):
        console.print(f"  warning: {printable(w)}", style="yellow", markup=False)


def _print_learned(crit: dict[str, Any], console: Console) -> None:
    """The learned head's fit (or why it was refused) and the learning curve."""
    note = crit.get("learned")
    if not note:
        return
    if note.get("refused"):
        console.print(f"learned: refused: {printable(note['refused'])}", style="yellow", markup=False)
    else:
        cv = note.get("cv", {})
        back = f"; left to zero-shot: {', '.join(note['backoff'])}" if note.get("backoff") else ""
        how = (
            f"by {cv['folds']}-fold CV (bal acc {cv['balanced_accuracy']:.3f})"
            if cv.get("folds")
            else "not cross-validated"
        )
        console.print(printable(f"learned: C={note['c']:g} {how}{back}"), style="dim", markup=False)
        for w in note.get("warnings", []):
            console.print(f"  warning: {printable(w)}", style="yellow", markup=False)
    curve = crit.get("learning_curve")
    if not curve:
        return
    table = Table(
        title=safe(f"{crit['id']} · learning curve · balanced accuracy (ECE) on the dev rows"),
        title_justify="left",
        title_style="dim",
    )
    table.add_column("training rows", justify="right")
    for name in ("learned", "calibrated", "tfidf"):
        table.add_column(name, justify="right")
    for point in curve:
        cells = []
        for name in ("learned", "calibrated", "tfidf"):
            m = point.get(name)
            cells.append(
                "–" if not m else "refused" if "refused" in m else f"{m['balanced_accuracy']:.3f} ({m['ece']:.3f})"
            )
        table.add_row(str(point["n"]), *cells)
    console.print(table)


def print_confusion(options: list[str], matrix: list[list[int]], title: str, console: Console) -> None:
    """A confusion matrix with gold options as rows and predictions as columns."""
    table = Table(title=safe(title), title_justify="left", title_style="dim")
    table.add_column("gold \\ pred")
    for o in options:
        table.add_column(safe(o), justify="right")
    for o, row in zip(options, matrix, strict=True):
        table.add_row(safe(o), *[f"[bold]{v}[/]" if i == options.index(o) else str(v) for i, v in enumerate(row)])
    console.print(table)


def write_json(report: dict[str, object], path: str | Path) -> Path:
    """Write the report (NaN as null), atomically."""
    return write_json_atomic(path, report)
