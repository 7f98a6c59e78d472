"""The stable block's token ids are byte-identical across fresh processes and hash seeds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import json, sys
from triage.domain.pack import default_pack, load_pack
from triage.scoring.prompt import PromptBuilder, PromptFormat
pack = load_pack(sys.argv[2]) if len(sys.argv) > 2 else default_pack()
if sys.argv[1] == "hf":
    from triage.scoring.tokenizer import qwen3_tokenizer
    b = PromptBuilder(pack, PromptFormat("chat", think=True), qwen3_tokenizer())
    fmt = b.fmt.id
else:
    from triage.scoring.engine import Engine
    e = Engine(sys.argv[1], n_ctx=1024)
    b, fmt = e.builder(pack), e.fmt.id
print(json.dumps({"ids": list(b.stable_tokens), "hash": b.stable_hash, "fmt": fmt, "pack": pack.hash}))
"""

EXAMPLES_PACK = """
[pack]
name = "with-examples"
context = "We sell phones, plans and accessories."
[[criterion]]
id = "q"
question = "Which team?"
options = [ { id = "b", label = "Billing", description = "money" },
            { id = "t", label = "Tech", description = "broken things" } ]
[[example]]
text = "My bill doubled."
labels = { q = "b" }
[[example]]
text = "Screen is black."
labels = { q = "t" }
"""


def stable_in_fresh_process(which: str, seed: str, *extra: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, which, *extra], capture_output=True, text=True, check=True, env=env
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_identical_ids_across_processes_reference_tokenizer(tmp_path: Path) -> None:
    pack = tmp_path / "p.toml"
    pack.write_text(EXAMPLES_PACK)
    a = stable_in_fresh_process("hf", "1", str(pack))
    b = stable_in_fresh_process("hf", "12345", str(pack))
    assert a == b
    assert len(a["ids"]) > 40  # type: ignore[arg-type]


def test_identical_ids_across_processes_real_model(smollm2_path: Path) -> None:
    a = stable_in_fresh_process(str(smollm2_path), "7")
    b = stable_in_fresh_process(str(smollm2_path), "99")
    assert a == b
    assert a["fmt"] == b["fmt"] and str(a["fmt"]).startswith("triage-prompt/")
