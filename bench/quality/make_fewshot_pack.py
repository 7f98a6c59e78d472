"""Write a few-shot variant of a criteria pack: [[example]] entries drawn from training rows by a fixed rule.

The rule (no hand-picking): skip the first --skip usable rows of TRAIN (those are the
rows eval trains the calibration and the baseline on, so examples never overlap them),
then per option take the first --per-option rows, in file order, whose text is at most
--max-chars long; list them round-robin over the options so no class comes last in a
block. Examples go into the pack's stable block (cached once per pack).

  python bench/quality/make_fewshot_pack.py PACK.toml TRAIN.jsonl OUT.toml --skip 60 --per-option 2 --max-chars 200
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

from triage.domain.pack import load_pack
from triage.learning.labelled import read_labelled


def toml_str(s: str) -> str:
    """A TOML basic string (JSON escapes are valid TOML escapes; keep non-ASCII as is)."""
    return json.dumps(s, ensure_ascii=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pack")
    ap.add_argument("train")
    ap.add_argument("out")
    ap.add_argument("--skip", type=int, required=True)
    ap.add_argument("--per-option", type=int, default=2)
    ap.add_argument("--max-chars", type=int, default=300)
    args = ap.parse_args(argv)

    pack = load_pack(args.pack)
    rows = read_labelled(args.train, pack).rows[args.skip :]
    crit = pack.criteria[0]  # the datasets' packs have one criterion each
    picked: dict[str, list] = {o.id: [] for o in crit.options}
    for r in rows:
        bucket = picked[r.labels[crit.id]]
        if len(bucket) < args.per_option and len(r.ticket.text) <= args.max_chars:
            bucket.append(r)
    order = [picked[o.id][i] for i in range(args.per_option) for o in crit.options if i < len(picked[o.id])]
    missing = [o for o, b in picked.items() if len(b) < args.per_option]
    src = Path(args.pack).read_text(encoding="utf-8")
    data = tomllib.loads(src)
    if data.get("example"):
        sys.exit(f"{args.pack} already has examples")
    lines = [
        src.rstrip(),
        "",
        f"# Few-shot examples: {len(order)} rows of the training split "
        f"{Path(args.train).parent.name}/{Path(args.train).name} after the first {args.skip}, "
        f"first {args.per_option} per option with at most {args.max_chars} "
        "characters (bench/quality/make_fewshot_pack.py).",
    ]
    if missing:
        lines.append(f"# Too few such rows for: {', '.join(missing)}")
    for r in order:
        lines += [
            "[[example]]",
            f"text = {toml_str(r.ticket.text)}",
            f"labels = {{ {crit.id} = {toml_str(r.labels[crit.id])} }}",
            "",
        ]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    p = load_pack(args.out)
    print(
        f"wrote {args.out}: {len(p.examples)} examples, pack hash {p.hash}"
        + (f"; short of examples for {missing}" if missing else "")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
