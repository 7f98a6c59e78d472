"""PyInstaller runtime hook: refuse to start on a CPU the bundled llama.cpp was not built for.

The bundle's llama.cpp is compiled for one CPU class (see packaging/build.py).
On a CPU without, say, AVX2 it would die with SIGILL ("Illegal instruction") at
the first decode, or even at load, with no word of why. This hook runs before
triage itself, reads the flags the build needs from ``triage_build.json``, and
exits with a message naming the missing extensions and the fixes instead.

``TRIAGE_SKIP_CPU_CHECK=1`` bypasses it (e.g. under an emulator that runs the
instructions but does not list them in /proc/cpuinfo).
"""

from __future__ import annotations

import json
import os
import sys


def _check() -> None:
    if os.environ.get("TRIAGE_SKIP_CPU_CHECK") == "1":
        return
    base = getattr(sys, "_MEIPASS", None)
    if base is None:
        return
    try:
        with open(os.path.join(base, "triage_build.json"), encoding="utf-8") as fh:
            info = json.load(fh)
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            flags: set[str] = set()
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    flags = set(value.split())
                    break
    except (OSError, ValueError):
        return  # no build info or no /proc: nothing to compare, so do not stand in the way
    if not flags:
        return
    missing = [f for f in info.get("required_cpu_flags", []) if f not in flags]
    if missing:
        cpu_class = info.get("cpu_class", "?")
        sys.stderr.write(
            f"triage: error: this build of triage is for CPUs with {', '.join(info['required_cpu_flags'])} "
            f"(class {cpu_class!r}); this CPU lacks {', '.join(missing)}, and llama.cpp would crash with "
            "'Illegal instruction'.\n"
            "  Install triage with pipx instead (it compiles llama.cpp for this CPU; see docs/packaging.md), "
            "or build the app here with `python3 packaging/build.py --cpu native-safe`.\n"
        )
        raise SystemExit(3)


_check()
