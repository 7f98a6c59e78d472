"""The product core and the lab apart: the product path loads no module of ``triage.lab``, no product
module imports it, and the product's types carry no orderings and no prior."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import triage
from triage.scoring.decide import Decider
from triage.scoring.options import ScoreOptions

ROOT = Path(triage.__file__).resolve().parent
PRODUCT = [
    "triage.session",
    "triage.scoring.engine",
    "triage.scoring.start",
    "triage.scoring.prompt",
    "triage.commands.score",  # what `triage score` loads
    "triage.backlog.worker",
    "triage.serve.worker",
    "triage.tui.desk",
]
LAB_IMPORT = re.compile(r"^\s*(from\s+triage\.lab\b|import\s+triage\.lab\b|from\s+triage\s+import\s+.*\blab\b)", re.M)


def loaded_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


def test_the_product_path_loads_no_module_of_the_lab() -> None:
    mods = loaded_after("\n".join(f"import {m}" for m in PRODUCT))
    assert set(PRODUCT) <= mods
    assert sorted(m for m in mods if m == "triage.lab" or m.startswith("triage.lab.")) == []


def test_triage_score_scores_without_loading_the_lab(tmp_path: Path) -> None:
    code = (
        "from triage.commands.score import options_of\n"
        "from triage.scoring.readout import LABEL\n"
        "from triage.scoring.schedule import Fanout\n"
        "from triage.domain.pack import default_pack\n"
        "import argparse\n"
        "options_of(argparse.Namespace(criteria=None), default_pack())\n"
    )
    mods = loaded_after(code)
    assert not any(m == "triage.lab" or m.startswith("triage.lab.") for m in mods)


def test_no_product_module_imports_the_lab() -> None:
    product = [*(ROOT / "scoring").rglob("*.py"), ROOT / "session.py", *(ROOT / "serve").rglob("*.py")]
    product += [*(ROOT / "tui").rglob("*.py")]
    found = [str(p.relative_to(ROOT)) for p in product if LAB_IMPORT.search(p.read_text(encoding="utf-8"))]
    assert found == []


def test_the_products_types_carry_no_orderings_and_no_prior() -> None:
    decider = {f.name for f in dataclasses.fields(Decider)}
    assert not decider & {"orderings", "prior"}, decider
    options = {f.name for f in dataclasses.fields(ScoreOptions)}
    assert not options & {"mode", "readout", "orderings", "prior"}, options
