"""Choose llama.cpp build flags from the CPU this runs on.

Stdlib only: ``scripts/setup`` runs this file directly, before the package is
installed, and the packaging script uses it to name the target CPU class.

A native (``GGML_NATIVE=ON``) build turns on llama.cpp's AMX tile kernels on
CPUs that advertise AMX, and those fault with SIGILL on the machines we run on
(see docs/build.md). So we never build natively: we read the CPU's feature
flags and switch on exactly the x86 extensions it has, AMX never among them.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from pathlib import Path

# (cpuinfo flag, CMake option). Order is the order printed to the user.
X86_FEATURES: tuple[tuple[str, str], ...] = (
    ("avx", "GGML_AVX"),
    ("avx2", "GGML_AVX2"),
    ("fma", "GGML_FMA"),
    ("f16c", "GGML_F16C"),
    ("bmi2", "GGML_BMI2"),
    ("avx_vnni", "GGML_AVX_VNNI"),
    ("avx512f", "GGML_AVX512"),
    ("avx512vbmi", "GGML_AVX512_VBMI"),
    ("avx512_vnni", "GGML_AVX512_VNNI"),
    ("avx512_bf16", "GGML_AVX512_BF16"),
)
# Switched off explicitly, whatever the CPU says.
ALWAYS_OFF: tuple[str, ...] = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")


def read_cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """Return the feature flags of the first CPU listed in ``cpuinfo``."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def cmake_options(flags: set[str], machine: str | None = None) -> dict[str, str]:
    """Map CPU feature flags to llama.cpp CMake options (all ON/OFF)."""
    machine = (machine or platform.machine()).lower()
    options: dict[str, str] = {"GGML_NATIVE": "OFF"}
    if machine in ("x86_64", "amd64"):
        for flag, option in X86_FEATURES:
            options[option] = "ON" if flag in flags else "OFF"
        # llama.cpp's AVX-512 paths assume the AVX2/FMA base exists.
        if options["GGML_AVX512"] == "ON" and options["GGML_AVX2"] == "OFF":
            options["GGML_AVX512"] = "OFF"
    for option in ALWAYS_OFF:
        options[option] = "OFF"
    return options


def cmake_args(options: dict[str, str]) -> str:
    """Render options as a ``CMAKE_ARGS`` string."""
    return " ".join(f"-D{k}={v}" for k, v in options.items())


def build_key(options: dict[str, str], version: str) -> str:
    """A short stable key naming one (version, flags) build of llama-cpp-python."""
    blob = json.dumps({"version": version, "options": options}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def describe(options: dict[str, str]) -> str:
    """Human summary: the extensions switched on."""
    on = [k.removeprefix("GGML_") for k, v in options.items() if v == "ON"]
    return ", ".join(on) if on else "baseline (no SIMD extensions selected)"


def main(argv: list[str]) -> int:
    """CLI: ``python cpuflags.py [cmake-args|key VERSION|describe|json]``."""
    options = cmake_options(read_cpu_flags())
    what = argv[1] if len(argv) > 1 else "json"
    if what == "cmake-args":
        print(cmake_args(options))
    elif what == "key":
        print(build_key(options, argv[2] if len(argv) > 2 else ""))
    elif what == "describe":
        print(describe(options))
    elif what == "json":
        print(json.dumps(options, indent=2))
    else:
        print(f"unknown request {what!r}; use cmake-args, key VERSION, describe or json", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
