"""Print the markdown tables of docs/quality.md from bench/quality/results/*.json.

python bench/quality/table.py air-default cfpb-default issue-default      # main table
python bench/quality/table.py --levers air-default-40 air-plain air-v2 air-v2-fewshot   # one line per run
python bench/quality/table.py --readouts airline-sentiment issue-kind cfpb-product   # label against letter (readout.sh)
python bench/quality/table.py --learned airline-sentiment issue-kind cfpb-product    # learned read-out (learn.sh)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
VARIANTS = ("raw", "cyclic", "cyclic+prior", "calibrated", "raw+calibrated")


def f(v: float | None, spec: str = ".3f") -> str:
    return "–" if v is None else format(v, spec)


def row(name: str, m: dict | None) -> str:
    if m is None:
        return f"| {name} | – | – | – | – | – | – | – | – |"
    ci = m.get("balanced_accuracy_ci95") or [None, None]
    return (
        f"| {name} | {f(m['accuracy'])} | **{f(m['balanced_accuracy'])}** ({f(ci[0], '.2f')}–{f(ci[1], '.2f')}) | "
        f"{f(m['macro_f1'])} | {f(m['ece'])} | {f(m.get('ece_floor'))} | {f(m.get('brier'))} | {f(m.get('nll'))} | "
        f"{f(m.get('flip_rate'), '.0%') if 'flip_rate' in m else ''} |"
    )


def bal(m: dict | None) -> str:
    if m is None:
        return "–"
    ci = m.get("balanced_accuracy_ci95") or [None, None]
    return f"{f(m['balanced_accuracy'])} ({f(ci[0], '.2f')}–{f(ci[1], '.2f')})"


def readouts(sets: list[str], results: Path = RESULTS) -> None:
    """One row per set: label against letter, zero-shot and calibrated, from readout-SET-{label,letter}.json."""
    print(
        "| set | dev / train n | zero-shot: by name (raw) | zero-shot: "
        "letters (cyclic) | calibrated: by name | calibrated: letters | "
        "by name + prior | TF-IDF baseline | letter flip rate | ECE by name calibrated (floor) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in sets:
        lab = json.loads((results / f"readout-{name}-label.json").read_text())
        let_path = results / f"readout-{name}-letter.json"
        let = json.loads(let_path.read_text()) if let_path.exists() else None
        c = lab["criteria"][0]
        v = c["variants"]
        lv = let["criteria"][0]["variants"] if let else {}
        cal = v.get("calibrated")
        ece = f"{f(cal['ece'])} ({f(cal.get('ece_floor'))})" if cal else "–"
        print(
            f"| {name} | {c['n']} / {lab['train']['rows_used'] if lab.get('train') else '–'} "
            f"| {bal(v.get('raw'))} | {bal(lv.get('cyclic'))} | "
            f"{bal(cal)} | {bal(lv.get('calibrated'))} | {bal(v.get('raw+prior'))} | {bal(c.get('baseline'))} | "
            f"{f(lv.get('cyclic', {}).get('flip_rate'), '.0%') if lv else '–'} | {ece} |"
        )


def learned(sets: list[str], results: Path = RESULTS) -> None:
    """The learned read-out against calibration and TF-IDF, then the learning curves (learn-SET[-balanced].json)."""
    print(
        "| set | dev / train n | zero-shot (by name) | calibrated | calibrated (balanced "
        "objective) | TF-IDF + LR | **learned** | learned ECE (floor) | calibrated ECE (floor) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    curves = []
    for name in sets:
        r = json.loads((results / f"learn-{name}.json").read_text())
        b_path = results / f"learn-{name}-balanced.json"
        b = json.loads(b_path.read_text()) if b_path.exists() else None
        c = r["criteria"][0]
        v = c["variants"]
        bv = b["criteria"][0]["variants"] if b else {}
        lm, cm = v.get("learned"), v.get("calibrated")
        print(
            f"| {name} | {c['n']} / {r['train']['rows_used']} | {bal(v.get('raw'))} "
            f"| {bal(cm)} | {bal(bv.get('calibrated'))} | {bal(c.get('baseline'))} | "
            f"**{bal(lm)}** | {f(lm and lm['ece'])} ({f(lm and lm.get('ece_floor'))}) "
            f"| {f(cm and cm['ece'])} ({f(cm and cm.get('ece_floor'))}) |"
        )
        curves.append((name, c.get("learning_curve") or []))
    print("\nLearning curves: balanced accuracy on the same dev rows (ECE), fitted on the first N training rows.\n")
    print("| set | training rows | learned | calibrated | TF-IDF + LR |")
    print("|---|---|---|---|---|")
    for name, curve in curves:
        for p in curve:
            cells = []
            for key in ("learned", "calibrated", "tfidf"):
                m = p.get(key)
                cells.append(
                    "–" if not m else "refused" if "refused" in m else f"{f(m['balanced_accuracy'])} ({f(m['ece'])})"
                )
            print(f"| {name} | {p['n']} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="+")
    ap.add_argument("--levers", action="store_true", help="one line per run: its cyclic+prior and calibrated figures")
    ap.add_argument("--readouts", action="store_true", help="label against letter per set (bench/quality/readout.sh)")
    ap.add_argument(
        "--learned",
        action="store_true",
        help="learned read-out against calibration and TF-IDF, and learning curves (learn.sh)",
    )
    ap.add_argument(
        "--results", type=Path, default=RESULTS, help="where the result JSONs are (default bench/quality/results)"
    )
    args = ap.parse_args()
    if args.learned:
        learned(args.names, args.results)
        return
    if args.readouts:
        readouts(args.names, args.results)
        return
    head = (
        "| variant | accuracy | balanced accuracy (95% CI) | macro-F1 | ECE | "
        "ECE floor | Brier | NLL | flips |\n|---|---|---|---|---|---|---|---|---|"
    )
    if args.levers:
        print(
            "| run | pack | prompt | dev n | flips | cyclic+prior bal acc | calibrated bal acc | "
            "calibrated ECE (floor) | calibrated NLL | raw+calibrated bal acc | raw+calibrated NLL |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name in args.names:
            r = json.loads((RESULTS / f"{name}.json").read_text())
            for c in r["criteria"]:
                v = c["variants"]
                cal, raw = v.get("calibrated"), v.get("raw+calibrated")
                print(
                    f"| {name} | {r['pack']['name']} | {r['prompt_format'].split(':')[1]} "
                    f"| {c['n']} | {f(v['cyclic']['flip_rate'], '.0%')} | "
                    f"{f(v['cyclic+prior']['balanced_accuracy'])} | {f(cal and cal['balanced_accuracy'])} | "
                    f"{f(cal and cal['ece'])} ({f(cal and cal['ece_floor'])}) | {f(cal and cal['nll'])} | "
                    f"{f(raw and raw['balanced_accuracy'])} | {f(raw and raw['nll'])} |"
                )
        return
    for name in args.names:
        r = json.loads((RESULTS / f"{name}.json").read_text())
        for c in r["criteria"]:
            n_train = (r.get("train") or {}).get("rows_used")
            print(
                f"\n**{name}** · {r['pack']['name']} · `{c['id']}` · dev n={c['n']}, train n={n_train} · "
                f"{r['prompt_format']} · n_ctx {r['n_ctx']} · cut {r['tickets']['cut']} dev tickets\n"
            )
            print(head)
            for v in VARIANTS:
                print(row(v, c["variants"].get(v)))
            print(row("TF-IDF + logreg baseline", c.get("baseline")))
            for label, key in (("calibrated", "calibration"), ("raw+calibrated", "calibration_raw")):
                cal = c.get(key) or {}
                if "refused" in cal:
                    print(f"\n{label}: refused — {cal['refused']}")
                elif cal:
                    bias = ", ".join(f"{o} {b:+.2f}" for o, b in cal["bias"].items())
                    print(f"\n{label}: T = {cal['temperature']:.3f}; bias {bias}")


if __name__ == "__main__":
    main()
