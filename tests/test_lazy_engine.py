"""The lazy engine (triage.scoring.lazy) on the real smollm2-135m: the model's identity without its weights,
then, on first use, exactly the engine it stands for."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from triage.domain.pack import default_pack
from triage.errors import InputError
from triage.model.resolve import resolve_model
from triage.scoring.engine import Engine
from triage.scoring.lazy import LazyEngine

TICKET = "I was charged twice for my order last week and nobody answers my e-mails."


def _lazy(path: Path, n_ctx: int, **kw: object) -> LazyEngine:
    ref = resolve_model(str(path))
    return LazyEngine(
        ref, lambda: Engine.from_ref(ref, n_ctx=n_ctx, threads=1, **kw), n_ctx=n_ctx, flash_attn=True, **kw
    )


@pytest.mark.model
def test_the_identity_is_the_engines_and_the_weights_wait_for_a_decode(smollm2_path: Path) -> None:
    pack = default_pack()
    with Engine(smollm2_path, n_ctx=1000, threads=1) as eng, _lazy(smollm2_path, 1000) as lazy:
        # 1000 asked: llama.cpp makes 1024, and the lazy engine says so before making anything
        assert lazy.n_ctx == eng.n_ctx == 1024
        assert lazy.sha256 == eng.sha256 and lazy.model_info["sha256"] == eng.model_info["sha256"]
        assert lazy.format_for("label").id == eng.format_for("label").id
        assert (lazy.native.n_vocab, lazy.native.n_embd, lazy.native.attention) == (
            eng.native.n_vocab,
            eng.native.n_embd,
            eng.native.attention,
        )
        assert not lazy.loaded
        got = lazy.score_ticket(TICKET, pack)  # anything else opens the real engine
        assert lazy.loaded
        want = eng.score_ticket(TICKET, pack)
        assert [o.probability for c in got.criteria for o in c.options] == pytest.approx(
            [o.probability for c in want.criteria for o in c.options], abs=0
        )
        assert np.isclose(got.tokens.evaluated, want.tokens.evaluated)


@pytest.mark.model
def test_a_context_longer_than_trained_is_refused_before_loading(smollm2_path: Path) -> None:
    with pytest.raises(InputError, match="was trained for"):
        _lazy(smollm2_path, 1 << 20)
