"""Shared fixtures: an isolated TRIAGE_HOME for every test, and the real test model.

The real model (``smollm2-135m``) is installed by ``scripts/setup`` into the user's
data dir. We locate it *before* any test points ``TRIAGE_HOME`` at a temporary
directory. Model tests skip when it is missing, except under CI (``CI`` set),
where a missing model is a failure: a green run must not hide skipped engine tests.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from triage.store.paths import user_dirs

# Ray reads this when it is first imported (ray._private.ray_constants): set before any test imports
# ray, the head, the nodes and the driver of every test cluster use 127.0.0.1, never the machine's
# interface address. Test traffic stays on loopback.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
# The built-in pack's starter head is fitted on a model's first use (triage.evaluation.starter): off for every
# process the tests start, module- and session-scoped fixtures' servers included (they start before any
# function-scoped fixture runs); tests/test_starter.py turns it on in its own subprocesses.
os.environ["TRIAGE_STARTER"] = "0"

SHARED = Path(__file__).resolve().parents[2] / "shared"
_REAL_MODELS = user_dirs().models  # resolved at import, before any TRIAGE_HOME override


def _installed(filename: str) -> Path | None:
    override = os.environ.get("TRIAGE_TEST_MODEL_DIR")
    for folder in ([Path(override)] if override else []) + [_REAL_MODELS]:
        candidate = folder / filename
        if candidate.is_file():
            return candidate
    return None


def _need(path: Path | None, name: str) -> Path:
    if path is None:
        message = f"model {name} is not installed; run ./scripts/setup (or: triage model pull {name})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(autouse=True)
def triage_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own empty TRIAGE_HOME; nothing touches the user's real dirs."""
    home = tmp_path_factory.mktemp("triage-home")
    monkeypatch.setenv("TRIAGE_HOME", str(home))
    monkeypatch.delenv("TRIAGE_MODEL", raising=False)
    # The built-in pack's starter head is fitted on a model's first use (triage.evaluation.starter): off in
    # every test but those about it, which turn it on and share one fitted head (tests/test_starter.py).
    monkeypatch.setenv("TRIAGE_STARTER", "0")
    monkeypatch.delenv("TRIAGE_SERVER", raising=False)  # a developer's shell must not send tests' scores to a server
    yield home


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """Path of the real SmolLM2-135M GGUF (skips, or fails under CI, when missing)."""
    return _need(_installed("smollm2-135m.gguf"), "smollm2-135m")


@pytest.fixture(scope="module")
def smollm2_engine(smollm2_path: Path) -> Iterator[Any]:
    """A real engine on smollm2-135m (2,048-token context), one per test module."""
    from triage.scoring.engine import Engine

    eng = Engine(smollm2_path, name="smollm2-135m", n_ctx=2048)
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def qwen25_path() -> Path:
    """Path of the real Qwen2.5-Coder-0.5B GGUF, the stand-in for Qwen3-0.6B."""
    return _need(_installed("qwen2.5-coder-0.5b.gguf"), "qwen2.5-coder-0.5b")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The development checkout's ../shared folder; skips when absent (a user's clone)."""
    if not SHARED.is_dir():
        pytest.skip("../shared is not beside this checkout")
    return SHARED
