"""The machine a bench ran on, and how busy it was.

On a 2-core machine shared with other processes, a figure measured under load is
noise: llama.cpp's threads spin, and two model processes starve each other. So
bench records the load average at start and end, and, better, the share of CPU
time other processes used *during* the run (from ``/proc/stat`` minus our own
CPU time), and warns when either says the machine was busy.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from triage.model.cpuflags import cmake_options, describe, read_cpu_flags

BUSY_LOAD_PER_CORE = 0.25  # 0.5 on 2 cores: someone else is running something
BUSY_OTHER_SHARE = 0.10  # other processes took over 10% of all cores during the run
QUIET_LOAD = 0.7  # --wait-quiet waits for the 1-minute load average to fall below this


def cores() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def load_average() -> list[float]:
    """1, 5 and 15-minute load averages (zeros where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return [0.0, 0.0, 0.0]


def is_busy(load: list[float], n_cores: int | None = None) -> bool:
    """True when the 1-minute load says other work is running (over 0.25 per core)."""
    return load[0] > BUSY_LOAD_PER_CORE * (n_cores or cores())


@dataclass(frozen=True)
class CpuSnapshot:
    """System-wide busy and total CPU time, and our own, at one moment (seconds)."""

    wall: float
    busy: float | None  # all processes, from /proc/stat; None off Linux
    total: float | None
    own: float


def cpu_snapshot() -> CpuSnapshot:
    """Read ``/proc/stat`` and our own CPU time."""
    t = os.times()
    own = t.user + t.system
    busy = total = None
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        ticks = [int(x) for x in fields]
        hz = os.sysconf("SC_CLK_TCK")
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
        total = sum(ticks[:8]) / hz  # guest time is already inside user
        busy = total - idle / hz
    except (OSError, ValueError, IndexError):
        pass
    return CpuSnapshot(time.perf_counter(), busy, total, own)


def other_cpu_share(start: CpuSnapshot, end: CpuSnapshot) -> float | None:
    """Share of all CPU time that other processes used between two snapshots (0-1)."""
    if start.busy is None or end.busy is None or start.total is None or end.total is None:
        return None
    total = end.total - start.total
    if total <= 0:
        return None
    others = (end.busy - start.busy) - (end.own - start.own)
    return max(0.0, min(1.0, others / total))


def wait_until_quiet(
    max_s: float, *, poll_s: float = 30.0, threshold: float = QUIET_LOAD, say: Callable[[str], None] = print
) -> dict[str, object]:
    """Poll the 1-minute load average until it is below ``threshold`` or ``max_s`` passed.

    Returns:
        what happened: the loads seen, whether it got quiet, and how long it took.
    """
    t0 = time.monotonic()
    seen: list[float] = []
    while True:
        load = load_average()[0]
        seen.append(load)
        waited = time.monotonic() - t0
        if load < threshold:
            return {"quiet": True, "waited_s": round(waited, 1), "threshold": threshold, "loads_seen": seen}
        if waited + poll_s > max_s:
            say(f"load average still {load:.2f} after {waited:.0f} s; running anyway")
            return {"quiet": False, "waited_s": round(waited, 1), "threshold": threshold, "loads_seen": seen}
        say(f"load average {load:.2f} ≥ {threshold}; waiting {poll_s:.0f} s for other runs to finish")
        time.sleep(poll_s)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (or the platform's processor string)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def package_version(name: str) -> str | None:
    """An installed distribution's version, or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def machine_info(threads: int) -> dict[str, object]:
    """Platform, CPU, SIMD flags the build uses, threads and library versions."""
    flags = read_cpu_flags()
    options = cmake_options(flags)
    interesting = sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "f16c", "bmi2", "sse4")))
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "cores": cores(),
        "threads": threads,
        "cpu_flags": interesting,
        "build_flags": describe(options),
        "cmake_options": options,
        "python": sys.version.split()[0],
        "llama_cpp_python": package_version("llama_cpp_python"),
        "numpy": package_version("numpy"),
        "triage": package_version("triage"),
    }
