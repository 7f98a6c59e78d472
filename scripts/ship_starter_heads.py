#!/usr/bin/env python3
"""Fit the built-in pack's starter head for each catalog stand-in and ship it in ``assets/heads/``.

    .venv/bin/python scripts/ship_starter_heads.py [--model NAME ...] [--threads N]

For each model (default: every catalog stand-in that is installed) this runs the product's own fit,
:func:`triage.learning.starter.fit_and_store`: the starter set scored through eval's readout cache at the
starter head's read position, in ``triage score``'s context, and ``triage learn``'s fit. The head goes to
``assets/heads/`` under the fit store's name (model sha256, pack hash, prompt format), where
:func:`triage.learning.fitstore.stored_starter` finds it: set-up, ``model pull``, first use and the suite then
fit nothing for these models. Beside it, ``NAME.witness.json`` records two things that
``tests/test_shipped_heads.py`` checks again:

- ``scored``: what ``triage score`` decided with the shipped head on a few starter tickets (a fresh home, the
  starter on), choices and probabilities;
- ``slice``: a head fitted the same way on a slice of the starter set alone, and its choices on that slice.

Run it after any change to the starter set, the pack, the prompt or the fit; the test fails until it is run.

Both depend on llama.cpp's kernels, which the build picks from the CPU (``triage/model/cpuflags.py``): the same
head on an AVX2 build and an AVX-512 one moves probabilities by up to 0.15 and changes a few choices
(docs/quality.md, "Shipped heads across CPU builds"). So the witness records the build it was made on
(``build``), and ``--witness-only`` adds what the shipped head decides on this machine's build (``builds``)
without fitting or changing the head; the test checks strictly against its own build's entry, and against
the measured cross-build bounds where it has none.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WITNESS_STEP = 100  # every 100th starter row is scored by `triage score` for the witness (13 rows of 1245)
SLICE_STEP = 15  # every 15th starter row is the re-fitted slice (83 rows of 1245)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", help="a catalog model (repeatable; default: every stand-in installed)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument(
        "--witness-only",
        action="store_true",
        help="add this build's witness to each shipped head's (no fit; the head is not touched)",
    )
    args = ap.parse_args()

    from triage.domain.pack import default_pack
    from triage.model.catalog import load_catalog
    from triage.model.installed import model_file

    pack = default_pack()
    names = args.model or [e.name for e in load_catalog().stand_ins()]
    for name in names:
        path = model_file(name)
        if not path.is_file():
            print(f"{name}: not installed; skipped (`triage model pull {name}`)", file=sys.stderr)
            continue
        if args.witness_only:
            witness_this_build(name, path, pack, args.threads)
        else:
            ship(name, path, pack, args.threads)
    return 0


def this_build() -> str:
    """The llama.cpp build's CPU extensions, as ``scripts/setup`` chose them for this CPU (its kernels)."""
    from triage.model.cpuflags import cmake_options, describe, read_cpu_flags

    return describe(cmake_options(read_cpu_flags()))


def witness_this_build(name: str, model: Path, pack, threads: int | None) -> None:  # noqa: ANN001
    """Add to ``name``'s witness what its shipped head decides on this build: the witness tickets and the slice."""
    from triage.learning.fitstore import shipped_dir
    from triage.scoring.loader import load_engine

    engine = load_engine(str(model), threads=threads)
    with engine:
        found = sorted(shipped_dir().glob(f"{engine.sha256[:16]}-*.witness.json"))
        if not found:
            raise SystemExit(f"{name}: no shipped head to witness; run this script without --witness-only")
        path = found[0]
        with tempfile.TemporaryDirectory() as tmp:
            sliced = slice_choices(engine, pack, Path(tmp) / "readouts.sqlite3")
    witness = json.loads(path.read_text(encoding="utf-8"))
    build = this_build()
    if witness.get("build") == build:
        raise SystemExit(f"{name}: the witness was made on this build ({build}); nothing to add")
    witness.setdefault("builds", {})[build] = {
        "scored": score_witness(model, pack, threads),
        "slice": sliced,
        "made": time.strftime("%Y-%m-%d"),
    }
    path.write_text(json.dumps(witness, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{name}: this build's witness ({build}) -> {path.relative_to(ROOT)}", file=sys.stderr)


def ship(name: str, model: Path, pack, threads: int | None) -> None:  # noqa: ANN001
    from triage.assets_path import asset
    from triage.learning import starter
    from triage.learning.fitstore import shipped_dir, shipped_starter_path
    from triage.learning.head_file import write_head
    from triage.scoring.loader import load_engine

    engine = load_engine(str(model), threads=threads)
    with engine:
        keys = (engine.sha256, pack.hash, engine.format_for("label").id)
        target = shipped_starter_path(*keys)
        shipped_dir().mkdir(parents=True, exist_ok=True)
        for old in shipped_dir().glob(f"{engine.sha256[:16]}-*"):
            old.unlink()  # this model's earlier heads (another pack hash or prompt format): triage wrote them

        def progress(done: int, total: int) -> None:
            if done == total or done % 100 == 0:
                print(f"{name}: starter set {done}/{total}", file=sys.stderr, flush=True)

        fitted = starter.fit_and_store(engine, pack, progress=progress, store=lambda h: write_head(h, target))
        if fitted.unkept:
            raise SystemExit(f"{name}: {fitted.unkept}")
        head, seconds = fitted.head, fitted.seconds
        print(f"{name}: starter head fitted in {seconds:.0f} s -> {target.relative_to(ROOT)}", file=sys.stderr)
        sliced = slice_choices(engine, pack)
    witness = {
        "model": name,
        "sha256": engine.sha256,
        "pack_hash": pack.hash,
        "prompt_format": keys[2],
        "head": target.name,
        "starter_sha256": hashlib.sha256(asset("starter/support.jsonl").read_bytes()).hexdigest(),
        "criteria": sorted(head.criteria),
        "build": this_build(),
        "scored": score_witness(model, pack, threads),
        "slice": sliced,
        "made": time.strftime("%Y-%m-%d"),
    }
    out = target.with_name(target.name.removesuffix(".npz") + ".witness.json")
    out.write_text(json.dumps(witness, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{name}: witness -> {out.relative_to(ROOT)}", file=sys.stderr)


def slice_choices(engine, pack, cache_path: Path | None = None) -> dict:  # noqa: ANN001
    """A head fitted on every ``SLICE_STEP``-th starter row alone, and its choices on those rows (scored through
    eval's readout cache, or a cache at ``cache_path``)."""
    rows = starter_slice(pack)
    choices = fit_slice(engine, pack, rows, cache_path)
    return {"step": SLICE_STEP, "ids": [r.ticket.id for r in rows], "choices": choices}


def starter_slice(pack):  # noqa: ANN001, ANN201
    from triage.learning.starter import starter_rows

    return starter_rows(pack)[::SLICE_STEP]


def fit_slice(engine, pack, rows, cache_path: Path | None = None) -> dict[str, dict[str, str]]:  # noqa: ANN001
    """Per row id, per criterion the slice head covers, the option it chooses (the starter fit on ``rows``)."""
    import numpy as np

    from triage.evaluation.variants import readings
    from triage.learning.cache import ReadoutCache
    from triage.learning.scorer import Scorer, score_rows, stack_features
    from triage.learning.starter import STARTER_READ, fit_starter_head

    with ReadoutCache(cache_path) if cache_path else ReadoutCache() as cache:
        scorer = Scorer(engine, pack, cache, "label", STARTER_READ)
        scorer.features = True
        scored = score_rows(scorer, rows)
    head, _ = fit_starter_head(engine, pack, scored.rows, scored.outcomes)
    out: dict[str, dict[str, str]] = {r.ticket.id: {} for r in scored.rows}
    for crit in pack.criteria:
        if not head.covers(crit.id):
            continue
        feats = stack_features(scored.outcomes, crit.id)
        raw = readings(crit, scored.outcomes, None).raw
        ids = [o.id for o in crit.options]
        for i, row in enumerate(scored.rows):
            out[row.ticket.id][crit.id] = ids[int(np.argmax(head.apply(crit.id, feats[i], raw[i])))]
    return out


def witness_rows(pack) -> list:  # noqa: ANN001
    from triage.learning.starter import starter_rows

    return starter_rows(pack)[::WITNESS_STEP]


def score_witness(model: Path, pack, threads: int | None) -> dict:  # noqa: ANN001
    """``triage score`` on the witness rows in a fresh home, the starter on: per id, choices and probabilities."""
    rows = witness_rows(pack)
    lines = "".join(json.dumps({"id": r.ticket.id, "text": r.ticket.text}, ensure_ascii=False) + "\n" for r in rows)
    return run_score(model, lines, threads)


def run_score(model: Path, lines: str, threads: int | None) -> dict:
    """``triage score`` (this checkout's) on JSON Lines ``lines`` in a new empty home; per id, the decisions."""
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "TRIAGE_HOME": home, "TRIAGE_STARTER": "1"}
        env.pop("TRIAGE_MODEL", None)
        cmd = [sys.executable, "-m", "triage.cli", "score", "--model", str(model)]  # JSON Lines in, JSON Lines out
        if threads:
            cmd += ["--threads", str(threads)]
        p = subprocess.run(cmd, input=lines, capture_output=True, text=True, env=env, cwd=ROOT, timeout=3600)
    if p.returncode != 0:
        raise SystemExit(f"triage score failed ({p.returncode}): {p.stderr[-2000:]}")
    if "fitting the starter head" in p.stderr:
        raise SystemExit("triage score fitted a starter head: the shipped one was not found")
    out = {}
    for line in p.stdout.splitlines():
        rec = json.loads(line)
        out[rec["ticket_id"]] = {
            c["id"]: {
                "choice": c["choice"],
                "source": c["source"],
                "probabilities": [round(o["probability"], 6) for o in c["options"]],
            }
            for c in rec["criteria"]
        }
    return out


if __name__ == "__main__":
    sys.exit(main())
