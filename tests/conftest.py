"""Shared fixtures: an isolated TRIAGE_HOME for every test, the real test model, and what several test files use.

The real model (``smollm2-135m``) is installed by ``scripts/setup`` into the user's
data dir. We locate it *before* any test points ``TRIAGE_HOME`` at a temporary
directory. Model tests skip when it is missing, except under CI (``CI`` set),
where a missing model is a failure: a green run must not hide skipped engine tests.

Shared by several files (import the names with ``from conftest import ...``; pytest puts tests/ on the path):
the mini pack (``MINI_PACK``, ``mini_pack``), the two-criterion pack of the fit tests (``TOPIC_MOOD``), the
labelled tickets of the learn tests (``MIXED``, ``labelled_rows``), ``triage`` in a subprocess (``run_triage``,
``home_env``, ``assert_clean``), in the test's own process (the ``cli`` fixture), and ``load_module`` for the
scripts under bench/ and packaging/.
"""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from triage.domain.pack import parse_pack
from triage.store.paths import user_dirs

# Ray reads this when it is first imported (ray._private.ray_constants): set before any test imports
# ray, the head, the nodes and the driver of every test cluster use 127.0.0.1, never the machine's
# interface address. Test traffic stays on loopback.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
# The built-in pack's starter head is fitted on a model's first use (triage.learning.starter): off for every
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


def _pin_worker() -> bool:
    """Under ``pytest -n N`` (pytest-xdist), give this worker its own share of the cores.

    llama.cpp's threads spin while they wait, so two model processes that each take every core starve each
    other (docs/build.md, "Threads"). Pinned, each worker's engines (and the processes it starts) see only
    its cores: triage's default thread count is the cores a process may run on. Returns whether this
    worker has cores of its own (False outside xdist, or with more workers than cores).
    """
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not count or not hasattr(os, "sched_setaffinity"):
        return False
    cores, n = sorted(os.sched_getaffinity(0)), int(count)
    if len(cores) < n:
        return False
    os.sched_setaffinity(0, cores[int(worker.removeprefix("gw")) :: n])
    return True


_PINNED = _pin_worker()


def _need(path: Path | None, name: str) -> Path:
    if os.environ.get("PYTEST_XDIST_WORKER") and not _PINNED:
        pytest.fail(
            f"model {name}: model tests run in parallel only with a core per worker (-n at most the cores this "
            "process may use): llama.cpp's spinning threads starve each other (README, the test tiers)"
        )
    if path is None:
        message = f"model {name} is not installed; run ./scripts/setup (or: triage model pull {name})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


# The fixtures that hand a test a real GGUF (directly, or through a fixture built on them: a module's engine,
# a home with the model installed). A test that asks for one, however indirectly, needs the model.
REAL_MODEL_FIXTURES = frozenset({"smollm2_path", "smollm2_engine", "qwen25_path"})


@pytest.hookimpl(tryfirst=True)  # before -m deselects by markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``model`` every test that reaches a real GGUF through its fixtures.

    ``-m "not model and not slow"`` (the fast tier, README) must never load a real model; a test that
    forgets the marker is caught here rather than running a model in the fast tier.
    """
    for item in items:
        if REAL_MODEL_FIXTURES.intersection(getattr(item, "fixturenames", ())) and not item.get_closest_marker("model"):
            item.add_marker(pytest.mark.model)
        # ``--dist loadgroup`` (./scripts/test): a file's tests stay on one worker, so a module's fixtures (a
        # fitted starter head, a server, an engine) are made once; the Ray files share one worker, so two local
        # clusters never start at once. The mark is xdist's: without the plugin, --strict-markers refuses it.
        if config.pluginmanager.hasplugin("xdist"):
            module = item.nodeid.split("::", 1)[0]
            item.add_marker(pytest.mark.xdist_group("ray" if "test_ray_" in module else module))


@pytest.fixture(autouse=True)
def triage_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own empty TRIAGE_HOME; nothing touches the user's real dirs."""
    home = tmp_path_factory.mktemp("triage-home")
    monkeypatch.setenv("TRIAGE_HOME", str(home))
    monkeypatch.delenv("TRIAGE_MODEL", raising=False)
    # The built-in pack's starter head is fitted on a model's first use (triage.learning.starter): off in
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
def other_model(tmp_path_factory: pytest.TempPathFactory, smollm2_path: Path) -> Path:
    """smollm2's weights under another sha256 (a line appended after the tensors, which llama.cpp never reads):
    a model triage ships no starter head for (assets/heads/), as Qwen3-0.6B is on a user's machine, so its
    first use fits one. Pair it with :func:`starter_slice` to keep that fit to seconds."""
    path = tmp_path_factory.mktemp("other-model") / "other-model.gguf"
    shutil.copyfile(smollm2_path, path)
    with path.open("ab") as fh:
        fh.write(b"triage test: a model file with no shipped starter head\n")
    return path


STARTER_SLICE = 10  # a starter fit in a test: every 10th starter row (125 of 1245), the product's fit on fewer rows


def starter_slice(monkeypatch: pytest.MonkeyPatch) -> list:
    """Fit starter heads in this process on every ``STARTER_SLICE``-th starter row; returns those rows."""
    from triage.domain.pack import default_pack
    from triage.learning import starter

    rows = starter.starter_rows(default_pack())[::STARTER_SLICE]
    monkeypatch.setattr(starter, "starter_rows", lambda pack: list(rows) if starter.is_builtin(pack) else [])
    return rows


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


# -- what several test files share ------------------------------------------------------------

TRACEBACK = "Traceback (most recent call last)"

# The smallest pack: one criterion, two options.
MINI_PACK = """
[pack]
name = "mini"
[[criterion]]
id = "mood"
question = "Is the customer angry?"
options = [ { id = "angry", label = "Angry" }, { id = "calm", label = "Calm" } ]
"""


@pytest.fixture()
def mini_pack(tmp_path: Path) -> Path:
    """``MINI_PACK`` written to ``tmp_path/mini.toml``."""
    path = tmp_path / "mini.toml"
    path.write_text(MINI_PACK, encoding="utf-8")
    return path


# Two criteria of two options each: the fit policy's and the verdicts' tests (no model).
TOPIC_MOOD = parse_pack(
    {
        "criterion": [
            {
                "id": "topic",
                "question": "Topic?",
                "options": [{"id": "billing", "label": "Billing"}, {"id": "other", "label": "Other"}],
            },
            {
                "id": "mood",
                "question": "Mood?",
                "options": [{"id": "angry", "label": "Angry"}, {"id": "calm", "label": "Calm"}],
            },
        ]
    }
)

# A learned criterion (topic, labelled) beside an unlabelled one (mood): the learn tests' pack.
MIXED = """
[pack]
name = "mixed"
[[criterion]]
id = "topic"
question = "Is this about a payment or a delivery?"
options = [ { id = "payment", label = "Payment, charge or refund" },
            { id = "delivery", label = "Delivery of an order" } ]
[[criterion]]
id = "mood"
question = "Is the customer happy or angry?"
options = [ { id = "happy", label = "Happy" }, { id = "angry", label = "Angry" } ]
"""

PAYMENT = [
    "I was charged twice for {x}.",
    "Please refund the payment for {x}.",
    "My card was billed for {x} I never bought.",
    "The invoice for {x} shows the wrong amount.",
    "Why did you take money for {x} again?",
]
DELIVERY = [
    "My parcel with {x} never arrived.",
    "The courier lost {x}.",
    "Where is my delivery of {x}? It is a week late.",
    "The tracking for {x} has not moved in days.",
    "{x} was delivered to the wrong address.",
]
THINGS = ["the blender", "my new shoes", "a phone case"]


def labelled_rows() -> list[dict[str, object]]:
    """30 tickets labelled for ``MIXED``'s topic: 15 payments, 15 deliveries."""
    rows = []
    for i, (tpl, thing) in enumerate((t, x) for t in PAYMENT for x in THINGS):
        rows.append({"id": f"p{i}", "text": tpl.format(x=thing), "labels": {"topic": "payment"}})
    for i, (tpl, thing) in enumerate((t, x) for t in DELIVERY for x in THINGS):
        rows.append({"id": f"d{i}", "text": tpl.format(x=thing).capitalize(), "labels": {"topic": "delivery"}})
    return rows


def load_module(path: Path, name: str) -> ModuleType:
    """Import a script that is not in a package (bench/*.py, packaging/*.py) as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    return module


def home_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment with ``TRIAGE_HOME=home`` (and ``extra``), for a child process."""
    return {**os.environ, "TRIAGE_HOME": str(home), **extra}


def run_triage(
    args: list[str], home: Path, *, stdin: str | bytes | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``triage ARGS`` in a subprocess with ``TRIAGE_HOME=home``, as a user would.

    For what only a process shows: its exit status after a signal or an abort, a closed or redirected
    stream, its own environment. The ``cli`` fixture runs the same command in this process, faster.
    """
    env = home_env(home, COLUMNS="200")
    env.pop("TRIAGE_MODEL", None)
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    proc = subprocess.run(
        [sys.executable, "-m", "triage.cli", *args],
        input=data if data is not None else b"",
        capture_output=True,
        env=env,
        timeout=timeout,
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    )


def assert_clean(proc: Any) -> None:
    """No traceback anywhere, and the process ended by itself (no signal, no abort)."""
    assert TRACEBACK not in proc.stdout and TRACEBACK not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode >= 0 and proc.returncode != 134, (
        f"died with {proc.returncode}: {proc.stdout[-500:]} {proc.stderr[-500:]}"
    )


@dataclass
class Ran:
    """What ``cli`` returns: named as a ``subprocess.CompletedProcess``'s fields."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture()
def cli(monkeypatch: pytest.MonkeyPatch, triage_home: Path) -> Callable[..., Ran]:
    """Run ``triage ARGS`` in this process: ``triage.cli.main`` with its own stdin, stdout and stderr.

    The streams are byte buffers behind UTF-8 text, as a pipe's are (stdout strict, stderr backslashreplace),
    and both are decoded strictly: output that is not valid UTF-8 fails the test. An exit through
    ``SystemExit`` (argparse's usage errors) is its code. ``home`` (default: the test's TRIAGE_HOME) and
    ``env`` set the environment for the call: ``cli(args, home)`` stands in for ``run_triage(args, home)``,
    about a second less a call (no interpreter to start, nothing to import again). Use ``run_triage`` where
    the process itself matters: signals, exit statuses of a crash, closed streams, another user, the
    environment it starts with. The file log is set up once a process, so a run here logs to the first
    home's file: read a command's log in a subprocess.
    """
    import signal

    from triage.cli import main

    def run(
        args: list[str], home: Path | None = None, *, stdin: str | bytes = b"", env: dict[str, str] | None = None
    ) -> Ran:
        monkeypatch.setenv("TRIAGE_HOME", str(home or triage_home))
        monkeypatch.setenv("COLUMNS", "200")
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
        streams = (
            io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"),
            io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True),
            io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True),
        )
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        saved = sys.stdin, sys.stdout, sys.stderr
        sys.stdin, sys.stdout, sys.stderr = streams
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved
            for s, h in handlers.items():
                signal.signal(s, h)
        out, err = (s.buffer.getvalue().decode("utf-8") for s in streams[1:])  # type: ignore[attr-defined]
        return Ran(list(args), int(code), out, err)

    return run
