"""The three export shapes of development sets through pack init, learn --holdout and eval (docs/teams.md).

For each set (``../shared/datasets/NAME``), the first ``--limit`` rows are written as triage's JSON Lines
and as the three export shapes of ``bench/intake/exports.py`` (Freshdesk-like CSV with HTML and
``Group``, Jira-like semicolon CSV in Windows-1252, Zendesk-like JSON Lines with dotted paths). Then,
each command a process of its own (``python -m triage.cli``, so one model at a time), in one
TRIAGE_HOME so the readout cache is shared:

1. with the set's hand-written pack: ``learn --holdout 0.3`` on the JSON Lines rows and on each shape;
2. for each shape: ``pack init`` on the export; ``learn --holdout 0.3`` and ``eval --split 0.7`` on the
   export with that pack; and ``learn --holdout 0.3`` on the same rows as triage's JSON Lines, their labels
   written as that pack's option ids (the JSON Lines path with the same pack).

The held-out balanced accuracy of each learn run is read from its head's report (``-o``, ``--no-store``),
eval's from its ``--json`` report. Everything goes to ``OUTDIR/results.json``.

usage: python bench/intake/export_shapes.py OUTDIR SET [SET...] --model PATH [--limit 150] [--threads 1]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ROOT.parent / "shared" / "datasets"


def _exports() -> Any:
    spec = importlib.util.spec_from_file_location("intake_exports", ROOT / "bench" / "intake" / "exports.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def triage(args: list[str], home: Path, log: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRIAGE_HOME": str(home), "PYTHONPATH": str(ROOT), "COLUMNS": "150"}
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "triage.cli", *args], env=env, capture_output=True, text=True, check=False
    )
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ triage {' '.join(args)}\n# exit {done.returncode}, {time.monotonic() - t0:.1f} s\n")
        fh.write(done.stdout + done.stderr + "\n")
    if done.returncode != 0:
        raise SystemExit(f"triage {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


def held_out(head_path: Path) -> dict[str, Any]:
    """Per criterion: held-out balanced accuracy of learned, zero-shot and TF-IDF (the head's report)."""
    from triage.learning.head_file import read_head

    report = read_head(head_path).report
    out = {}
    for cid, entry in (report.get("holdout") or {}).items():
        if not isinstance(entry, dict) or cid == "fraction":
            continue
        out[cid] = {"n": entry.get("n")} | {
            v: round(entry[v]["balanced_accuracy"], 4)
            for v in ("learned", "zero-shot", "tfidf")
            if isinstance(entry.get(v), dict) and "balanced_accuracy" in entry[v]
        }
    return out


def eval_figures(path: Path) -> dict[str, Any]:
    report = json.loads(path.read_text(encoding="utf-8"))
    out = {}
    for c in report["criteria"]:
        out[c["id"]] = {"n": c["n"]} | {
            name: round(v["balanced_accuracy"], 4) for name, v in c["variants"].items() if "balanced_accuracy" in v
        }
        if c.get("baseline") and "balanced_accuracy" in c["baseline"]:
            out[c["id"]]["tfidf"] = round(c["baseline"]["balanced_accuracy"], 4)
    return out


def shape_values(shape: str, pack: Any, row: dict[str, Any]) -> dict[str, str]:
    """The label values the shape's writer put in the export for ``row`` (exports.py)."""
    out = {}
    for c in pack.criteria:
        if c.id not in row["labels"]:
            continue
        gold = row["labels"][c.id]
        out[c.id] = pack.criterion(c.id).option(gold).label if shape == "freshdesk" else gold
        if shape == "jira":
            out[c.id] = gold.upper()
    return out


def _encodes(text: str, encoding: str) -> bool:
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return False
    return True


def one_set(name: str, out: Path, model: str, limit: int, threads: int) -> dict[str, Any]:
    from triage.domain.pack import load_pack
    from triage.intake.values import OptionMatcher

    ex = _exports()
    src = DATASETS / name
    work = out / name
    work.mkdir(parents=True, exist_ok=True)
    home = out / "home"  # one readout cache for every set and run
    log = work / "commands.log"
    pack_path = src / "criteria.toml"
    pack = load_pack(pack_path)
    rows = ex.read_rows(src / "tickets.jsonl", limit)
    jsonl = work / "sample.jsonl"
    jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    files = {shape: write(rows, pack, work / fname) for shape, (write, fname) in ex.WRITERS.items()}
    # --force: keep a head that cross-validates below zero-shot (learn refuses it by default), so every run has one
    common = ["--model", model, "--threads", str(threads), "--holdout", "0.3", "--no-store", "--force"]
    from triage.intake.html import looks_like_html

    res: dict[str, Any] = {"set": name, "rows": len(rows), "hand_pack": {}, "pack_init": {}}
    # Rows whose text the shapes cannot carry unchanged: HTML in a plain-text field becomes text (Jira, Zendesk),
    # characters Windows-1252 lacks become "?" (Jira).
    res["rows_with_html"] = sum(looks_like_html(r["text"]) for r in rows)
    res["rows_not_cp1252"] = sum(not _encodes(r["text"], "cp1252") for r in rows)
    t0 = time.monotonic()
    # 1. the hand-written pack: the JSONL path and each shape
    triage(["learn", str(jsonl), "--pack", str(pack_path), *common, "-o", str(work / "hand-jsonl.npz")], home, log)
    res["hand_pack"]["jsonl"] = held_out(work / "hand-jsonl.npz")
    for shape, path in files.items():
        head = work / f"hand-{shape}.npz"
        flags = ex.mapping_flags(shape, pack)
        triage(["learn", str(path), "--pack", str(pack_path), *flags, *common, "-o", str(head)], home, log)
        res["hand_pack"][shape] = held_out(head)
    # 2. pack init per shape, then learn and eval with that pack, and the JSONL path with the same pack
    for shape, path in files.items():
        flags = ex.mapping_flags(shape, pack)
        text_id = flags[:4]  # --text COLS --id COL
        cols = [f.split("=", 1) for f in flags[5::2]]  # the --label CRITERION=COL values
        team = work / f"{shape}-team.toml"
        crit = ",".join(f"{c}={col}" for c, col in cols)
        init = triage(["pack", "init", str(path), *text_id, "--criteria", crit, "-o", str(team), "--force"], home, log)
        team_pack = load_pack(team)
        matchers = {c.id: OptionMatcher(c) for c in team_pack.criteria}
        mapped = []
        for r in rows:
            labels = {}
            for cid, value in shape_values(shape, pack, r).items():
                got = matchers[cid].match(value) if cid in matchers else None
                if got is not None:
                    labels[cid] = got
            mapped.append({"id": r["id"], "text": r["text"], "labels": labels})
        shape_jsonl = work / f"{shape}-team.jsonl"
        shape_jsonl.write_text("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in mapped), encoding="utf-8")
        entry: dict[str, Any] = {
            "pack_hash": team_pack.hash,
            "options": {c.id: [o.id for o in c.options] for c in team_pack.criteria},
            "pack_init_said": init.stdout.strip().splitlines()[:12],
        }
        head = work / f"{shape}-team.npz"
        triage(["learn", str(path), "--pack", str(team), *flags, *common, "-o", str(head)], home, log)
        entry["learn"] = held_out(head)
        jhead = work / f"{shape}-team-jsonl.npz"
        triage(["learn", str(shape_jsonl), "--pack", str(team), *common, "-o", str(jhead)], home, log)
        entry["learn_jsonl"] = held_out(jhead)
        ev = work / f"{shape}-team-eval.json"
        eval_args = ["eval", str(path), "--pack", str(team), *flags, "--model", model, "--threads", str(threads)]
        triage([*eval_args, "--split", "0.7", "--curve", "none", "--json", str(ev)], home, log)
        entry["eval"] = eval_figures(ev)
        res["pack_init"][shape] = entry
    res["wall_s"] = round(time.monotonic() - t0, 1)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", type=Path)
    ap.add_argument("sets", nargs="+")
    ap.add_argument("--model", required=True, help="a .gguf path (resolved before TRIAGE_HOME moves)")
    ap.add_argument("--limit", type=int, default=150)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, help="results file (default OUTDIR/results.json)")
    a = ap.parse_args(argv)
    a.outdir.mkdir(parents=True, exist_ok=True)
    target = a.json or a.outdir / "results.json"
    results = json.loads(target.read_text(encoding="utf-8")) if target.exists() else {"sets": []}
    for name in a.sets:
        res = one_set(name, a.outdir, a.model, a.limit, a.threads)
        results["sets"] = [s for s in results["sets"] if s["set"] != name] + [res]
        results.update({"model": a.model, "limit": a.limit, "threads": a.threads})
        target.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
