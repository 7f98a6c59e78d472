"""Prove that the installed llama-cpp-python decodes on this CPU.

``python -m triage.model.buildcheck [NAME|PATH]`` resolves the model, then loads it
and evaluates a few tokens in a *child* process. A llama.cpp built for CPU
instructions this machine lacks dies with SIGILL at the first decode; in a
child, that becomes a clear message and a non-zero exit instead of killing
the caller.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from triage.errors import TriageError

PROMPT = "The quick brown fox jumps over the lazy dog."
TIMEOUT = 300.0  # seconds; a 0.5B model loads and decodes in about one

# Runs in the child. Prints one JSON line on success.
_CHILD = r"""
import json, os, sys, time
import llama_cpp
path, prompt = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_threads=os.cpu_count(), verbose=False)
t1 = time.perf_counter()
tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=False)
llm.eval(tokens)
t2 = time.perf_counter()
logits = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
n_vocab = llm.n_vocab()
finite = all(logits[i] == logits[i] and abs(logits[i]) != float("inf") for i in range(n_vocab))
print(json.dumps({"tokens": len(tokens), "load_ms": (t1 - t0) * 1e3, "eval_ms": (t2 - t1) * 1e3,
                  "finite": finite, "version": getattr(llama_cpp, "__version__", "?")}))
"""


BUSY = 0.5  # above this share of busy cores, timings are flagged as unrepresentative


def cpu_busy(interval: float = 0.25) -> float | None:
    """Share (0..1) of all CPU time spent busy over ``interval`` seconds; None off Linux.

    Sampled from /proc/stat rather than the load average, which lags by a minute.
    """

    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields), idle

    try:
        total0, idle0 = sample()
        time.sleep(interval)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    return None if total <= 0 else 1.0 - (idle1 - idle0) / total


@dataclass(frozen=True)
class BuildCheckResult:
    """What the child measured."""

    model: str
    tokens: int
    load_ms: float
    eval_ms: float
    llama_cpp_version: str
    busy: float | None = None  # share of all cores busy with other work just before the check

    def summary(self) -> str:
        """The one-line success message (plus a note when the machine was busy)."""
        line = (
            f"llama.cpp decodes on this CPU (model {self.model}, {self.tokens} tokens in "
            f"{self.eval_ms:.0f} ms; load {self.load_ms:.0f} ms; llama-cpp-python {self.llama_cpp_version})"
        )
        if self.busy is not None and self.busy >= BUSY:
            # llama.cpp's threads spin: with other work on the cores, timings mean little.
            line += f"\n  note: the CPU was {self.busy:.0%} busy with other work; the timing is not representative"
        return line


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def check_decode(model_path: Path, model_name: str, *, timeout: float = TIMEOUT) -> BuildCheckResult:
    """Load ``model_path`` with llama-cpp-python in a child process and decode a few tokens.

    Args:
        model_path: a GGUF file.
        model_name: how to name the model in messages.
        timeout: seconds before the child is killed.

    Returns:
        The token count and timings.

    Raises:
        TriageError: the child died by a signal (SIGILL: wrong CPU instructions),
            failed, timed out, or produced non-finite logits.
    """
    cmd = [sys.executable, "-c", _CHILD, str(model_path), PROMPT]
    busy = cpu_busy()
    try:
        proc = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise TriageError(
            f"llama.cpp did not finish decoding {model_name} within {timeout:.0f} s",
            hint="is the machine busy? (see `uptime`)",
        ) from None
    rebuild = "delete the llama-cpp-python wheel in ~/.cache/triage-build and run ./scripts/setup again"
    if proc.returncode < 0:
        sig = -proc.returncode
        if sig == signal.SIGILL:
            raise TriageError(
                "llama.cpp crashed with SIGILL (illegal instruction): this "
                "llama-cpp-python build uses CPU instructions this CPU lacks",
                hint=f"rebuild it for this CPU: {rebuild}",
            )
        raise TriageError(
            f"llama.cpp died with {_signal_name(sig)} while decoding {model_name}", hint=f"if this repeats, {rebuild}"
        )
    if proc.returncode != 0:
        tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-3:]
        if any("No module named 'llama_cpp'" in ln for ln in tail):
            raise TriageError(f"llama-cpp-python is not installed in {sys.executable}", hint="run ./scripts/setup")
        raise TriageError(
            f"llama.cpp failed to load or decode {model_name} (exit "
            f"{proc.returncode}): {' | '.join(tail) or 'no message'}"
        )
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise TriageError(f"the decode check printed nothing usable: {proc.stdout[-200:]!r}") from None
    if not data.get("finite"):
        raise TriageError(f"llama.cpp decoded {model_name} but produced NaN or infinite logits", hint=rebuild)
    return BuildCheckResult(
        model_name, int(data["tokens"]), float(data["load_ms"]), float(data["eval_ms"]), str(data["version"]), busy
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m triage.model.buildcheck [NAME|PATH]``."""
    parser = argparse.ArgumentParser(prog="python -m triage.model.buildcheck", description=__doc__.splitlines()[0])
    parser.add_argument(
        "model", nargs="?", metavar="NAME|PATH", help="model to decode with (default: the one triage would pick)"
    )
    args = parser.parse_args(argv)
    from triage.model.resolve import resolve_model

    try:
        ref = resolve_model(args.model)
        result = check_decode(ref.path, ref.name)
    except TriageError as exc:
        print(f"buildcheck: error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  {exc.hint}", file=sys.stderr)
        return exc.exit_code or 1
    except KeyboardInterrupt:
        print("buildcheck: interrupted", file=sys.stderr)
        return 130
    print(result.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
