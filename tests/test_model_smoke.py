"""The real test model through the real llama-cpp-python: it loads, decodes, and its logits are usable."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from triage.errors import TriageError
from triage.model import buildcheck


@pytest.mark.model
def test_letter_logits_are_finite_and_differ(smollm2_path: Path) -> None:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(smollm2_path), n_ctx=256, n_threads=2, verbose=False)
    try:
        letters = {}
        for text in (" A", " B"):
            ids = llm.tokenize(text.encode(), add_bos=False, special=False)
            assert len(ids) == 1, f"{text!r} is {len(ids)} tokens for this model"
            letters[text] = ids[0]
        prompt = "Question: Is the sky blue?\nA. yes\nB. no\nAnswer:"
        llm.eval(llm.tokenize(prompt.encode(), add_bos=True, special=False))
        # With logits_all=False, eval() does not fill llm.scores: read the last position directly.
        logits = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
        a, b = logits[letters[" A"]], logits[letters[" B"]]
        assert math.isfinite(a) and math.isfinite(b)
        assert a != b
    finally:
        llm.close()


@pytest.mark.model
def test_buildcheck_decodes_in_a_child(smollm2_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert buildcheck.main([str(smollm2_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("llama.cpp decodes on this CPU (model smollm2-135m.gguf, ")


def test_buildcheck_names_sigill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child killed by SIGILL (what a build with the wrong CPU flags does) gets the CPU message."""
    fake_python = tmp_path / "python"
    fake_python.write_text("#!/bin/sh\nkill -ILL $$\n")
    fake_python.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake_python))  # the process boundary, not our code
    with pytest.raises(TriageError, match="SIGILL .*uses CPU instructions this CPU lacks"):
        buildcheck.check_decode(tmp_path / "m.gguf", "m")
