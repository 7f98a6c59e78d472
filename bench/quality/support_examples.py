"""Score hand-written support tickets (and the bench tickets) with the default pack, label and letter readouts.

    .venv/bin/python bench/quality/support_examples.py [--model NAME] [--threads N] > table.md

Prints Markdown tables for docs/quality.md: per ticket and criterion, the label readout's
choice and probability, the letter readout's (cyclic, serial), and, for the hand-written
tickets, what a support agent would pick (`expect` in support-tickets.jsonl; null where
no option fits). Right or wrong, every row is shown.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from triage.assets_path import asset
from triage.domain.pack import default_pack
from triage.domain.ticket import make_ticket
from triage.lab import score as lab
from triage.lab.options import LabOptions
from triage.scoring.loader import load_engine

HERE = Path(__file__).resolve().parent


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    pack = default_pack()
    ids = [c.id for c in pack.criteria]
    label = LabOptions(mode="fanout", readout="label")
    letter = LabOptions(mode="serial", readout="letter", orderings="cyclic")
    with load_engine(args.model, threads=args.threads) as eng:
        for title, path, with_expect in (
            ("Hand-written support tickets", HERE / "support-tickets.jsonl", True),
            ("The bench tickets", asset("bench-tickets.jsonl"), False),
        ):
            print(f"\n**{title}** (label: by name, fanout; letter: A/B/C, every rotation, serial)\n")
            print("| ticket | " + " | ".join(ids) + " |")
            print("|---|" + "---|" * len(ids))
            right = total = 0
            for row in rows(path):
                t = make_ticket(row["text"], row["id"])
                a = lab.score_ticket(eng, t, pack, label)
                b = lab.score_ticket(eng, t, pack, letter)
                cells = []
                for ca, cb in zip(a.criteria, b.criteria, strict=True):
                    want = (row.get("expect") or {}).get(ca.id)
                    mark = ""
                    if with_expect and want:
                        total += 1
                        right += ca.choice == want
                        mark = " ✓" if ca.choice == want else f" ✗ ({want})"
                    cells.append(f"{ca.choice} {ca.probability(ca.choice):.0%}{mark} · letter {cb.choice}")
                flat = " ".join(row["text"].split())
                text = flat if len(flat) <= 60 else flat[:57] + "…"
                print(f"| {text} | " + " | ".join(cells) + " |")
            if with_expect:
                print(f"\nLabel readout agrees with the expected choice on {right} of {total} decisions.")


if __name__ == "__main__":
    main()
