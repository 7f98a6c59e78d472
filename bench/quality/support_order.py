"""Does the support pack's zero-shot choice follow the answer's meaning or its place in the list?

    .venv/bin/python bench/quality/support_order.py [MODEL_PATH]

Scores the hand-written support tickets (support-tickets.jsonl) with the label readout, fanout,
three ways: the pack as shipped; the queue's options listed in reverse order in the stable block;
and no answer list at all (the stable block is the instruction only). Prints each criterion's
choices and how many expected decisions each way gets (docs/quality.md, "The support pack").
A throwaway measurement: the third variant swaps PromptBuilder.system_text for the run.
"""

from __future__ import annotations

import copy
import json
import sys
import tomllib
from pathlib import Path

from triage.domain.pack import parse_pack
from triage.scoring import prompt as prompt_mod
from triage.scoring.engine import Engine, ScoreOptions

ROOT = Path(__file__).resolve().parents[2]
MODEL = sys.argv[1] if len(sys.argv) > 1 else str(Path.home() / ".local/share/triage/models/qwen2.5-coder-0.5b.gguf")


def run(engine: Engine, name: str, data: dict, rows: list[dict]) -> None:
    engine._builders.clear()  # a variant may change the prompt without changing the pack
    engine.clear()
    pack = parse_pack(data, f"{name}.toml")
    ok = total = 0
    chosen: dict[str, list[str]] = {c.id: [] for c in pack.criteria}
    for r in rows:
        res = engine.score_ticket(r["text"], pack, ScoreOptions())
        for c in res.criteria:
            chosen[c.id].append(c.choice)
            want = r["expect"].get(c.id)
            if want is not None:
                total += 1
                ok += c.choice == want
    print(f"{name}: {ok} of {total} expected decisions")
    for cid, picks in chosen.items():
        print(f"  {cid}: {', '.join(picks)}")


def main() -> None:
    base = tomllib.loads((ROOT / "assets/support.toml").read_text(encoding="utf-8"))
    rows = [
        json.loads(line)
        for line in (ROOT / "bench/quality/support-tickets.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    print("expected queue:", ", ".join(str(r["expect"]["queue"]) for r in rows))
    with Engine(MODEL, n_ctx=2048) as engine:
        run(engine, "as shipped", base, rows)
        rev = copy.deepcopy(base)
        rev["criterion"][0]["options"] = rev["criterion"][0]["options"][::-1]
        run(engine, "queue listed in reverse", rev, rows)
        shipped = prompt_mod.PromptBuilder.system_text
        prompt_mod.PromptBuilder.system_text = lambda self: (
            f"{self.pack.instruction}\n\nAnswer each question in one word."
        )
        try:
            run(engine, "no answer list", base, rows)
        finally:
            prompt_mod.PromptBuilder.system_text = shipped


if __name__ == "__main__":
    main()
