"""``triage serve`` itself (the command: flags, the socket, signals, uvicorn, the worker) on the scripted
engine of tests/fake_engine.py instead of a model, for the tests about the server.

    python tests/serve_fake.py --port 9000 --history ...     # the arguments of `triage serve`

TRIAGE_FAKE_DELAY: seconds each criterion takes (the fake checks its cancel every 10 ms, as
llama.cpp's abort callback is asked between graph computations).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fake_engine import FakeEngine  # noqa: E402


class ServedFake(FakeEngine):
    """The fake, with what ``triage serve`` asks of an engine at start-up."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.stable_held: list[tuple[str, str]] = []

    def hold_stable(self, pack: Any, readout: str = "shared:answer") -> None:
        self.stable_held.append((pack.name, readout))


def main() -> int:
    import triage.scoring.loader as loader
    from triage.cli import main as triage_main

    delay = float(os.environ.get("TRIAGE_FAKE_DELAY", "0"))
    loader.load_engine = lambda *a, **k: ServedFake(delay=delay, fixed_time=False)  # type: ignore[assignment]
    return triage_main(["serve", *sys.argv[1:]])


if __name__ == "__main__":
    raise SystemExit(main())
