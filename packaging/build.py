#!/usr/bin/env python3
"""Build the desktop ``triage`` executable (PyInstaller, one folder) for one CPU class.

    python3 packaging/build.py                    # --cpu avx2: the laptop baseline
    python3 packaging/build.py --cpu native-safe  # this machine's detected extensions
    python3 packaging/build.py --cpu avx2 --no-tarball

Steps, each skipped when its result is already there:

1. Choose llama.cpp's CMake flags for the CPU class (never -march=native, never
   AMX; see docs/build.md and triage/model/cpuflags.py).
2. Build the llama-cpp-python wheel for exactly those flags, or reuse it from the
   cache that scripts/setup also uses: ``$TRIAGE_WHEELS/llama-cpp-python/<key>/``
   (default ``~/.cache/triage-build``), so the ~8 minute compile happens once per
   flag set on a machine, whichever script asks first.
3. Make a separate build venv, ``packaging/build/<class>-<key>/venv``, holding that
   wheel, triage (a real, non-editable install of a copy of this checkout, so the
   bundle sees exactly the package data a user's install would) with the ``packaging``
   extra, and PyInstaller.
4. Run PyInstaller on packaging/triage.spec under ``nice -n 10`` (the cores are shared).
5. Write ``packaging/dist/triage-<version>-linux-x86_64-<class>/`` (the one-folder
   app in ``triage/``, plus install.sh) and a .tar.gz of it.

Stdlib only, so that it runs with any Python 3.11+ before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LLAMA_VERSION = "0.3.36"  # the pin in pyproject.toml; scripts/setup builds the same one

sys.path.insert(0, str(ROOT / "triage" / "model"))
import cpuflags  # noqa: E402  (triage/model/cpuflags.py: stdlib only, importable before triage is installed)

# cpuinfo flags of each named class. "avx2" is the x86-64-v3 subset llama.cpp uses:
# every x86 laptop since Intel Haswell (2013) and AMD Excavator/Zen has it.
CPU_CLASSES: dict[str, frozenset[str] | None] = {
    "avx2": frozenset({"avx", "avx2", "fma", "f16c", "bmi2"}),
    "native-safe": None,  # read from /proc/cpuinfo by cpuflags (AMX always off)
}


def say(msg: str) -> None:
    print(f"\033[1mbuild:\033[0m {msg}", flush=True)


def die(msg: str) -> None:
    print(f"build: error: {msg}", file=sys.stderr)
    raise SystemExit(1)


def run(cmd: list[str], *, env: dict[str, str] | None = None, nice: bool = False, cwd: Path | None = None) -> None:
    """Run a command, echoing it; nice it when it is CPU-heavy (other engineers share the cores)."""
    if nice and shutil.which("nice"):
        cmd = ["nice", "-n", "10", *cmd]
    print("+ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, env=env, cwd=cwd, check=False)
    if proc.returncode != 0:
        die(f"command failed with exit status {proc.returncode}: {' '.join(cmd)}")


def class_options(cpu: str) -> tuple[dict[str, str], list[str]]:
    """CMake options for a CPU class, and the cpuinfo flags a CPU needs to run the result."""
    flags = CPU_CLASSES[cpu]
    if flags is None:
        flags = frozenset(cpuflags.read_cpu_flags())
    options = cpuflags.cmake_options(set(flags), "x86_64")
    required = [flag for flag, opt in cpuflags.X86_FEATURES if options.get(opt) == "ON"]
    return options, required


def wheel_cache() -> Path:
    """The same cache root scripts/setup uses."""
    if os.environ.get("TRIAGE_WHEELS"):
        return Path(os.environ["TRIAGE_WHEELS"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "triage-build"


def ensure_wheel(python: str, options: dict[str, str], key: str) -> Path:
    """The llama-cpp-python wheel for these flags: reused from the cache, else compiled once."""
    wheel_dir = wheel_cache() / "llama-cpp-python" / key
    wheels = sorted(wheel_dir.glob("llama_cpp_python-*.whl"))
    if wheels:
        say(f"reusing the llama-cpp-python wheel built for these flags: {wheels[0]}")
        return wheels[0]
    flags = cpuflags.cmake_args(options)
    say(f"building llama-cpp-python {LLAMA_VERSION} from source (about 8 minutes on 2 cores)")
    say(f"CMAKE_ARGS={flags}")
    partial = wheel_dir.with_name(wheel_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    env = dict(os.environ, CMAKE_ARGS=flags)
    # --no-cache-dir: pip's cache keys a built wheel by version only, not by CMAKE_ARGS.
    run(
        [python, "-m", "pip", "wheel", "--disable-pip-version-check", "--no-deps", "--no-cache-dir",
         "--no-binary", "llama-cpp-python", f"llama-cpp-python=={LLAMA_VERSION}", "-w", str(partial)],
        env=env, nice=True,
    )  # fmt: skip
    shutil.rmtree(wheel_dir, ignore_errors=True)
    partial.rename(wheel_dir)
    return sorted(wheel_dir.glob("llama_cpp_python-*.whl"))[0]


# What goes into the copy of the checkout that the build venv installs from. A copy,
# because pip builds a local directory in place and would leave build/ and *.egg-info
# in the lead's work tree; an include list, so a stray .venv or model never rides along.
SOURCE_ITEMS = ("pyproject.toml", "README.md", "LICENSE", "triage", "assets")


def copy_source(dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.gguf")
    for item in SOURCE_ITEMS:
        src = ROOT / item
        if src.is_dir():
            # symlinks=True keeps triage/assets -> ../assets a link, as in the checkout.
            shutil.copytree(src, dest / item, symlinks=True, ignore=ignore)
        elif src.is_file():
            shutil.copy2(src, dest / item)
    if not (dest / "README.md").exists():
        # pyproject.toml names README.md as the long description; setuptools refuses to
        # build without it. The app never reads it, so a stub keeps the build going.
        (dest / "README.md").write_text("triage: offline ticket triage.\n", encoding="utf-8")


def llama_stamp(venv_python: Path) -> str | None:
    """The build key recorded beside the installed llama_cpp (as scripts/setup records it)."""
    code = (
        "import importlib.util, pathlib\n"
        "s = importlib.util.find_spec('llama_cpp')\n"
        "p = pathlib.Path(s.submodule_search_locations[0]) / '.triage-build-key' if s else None\n"
        "print(p.read_text().strip() if p and p.exists() else '')"
    )
    out = subprocess.run([str(venv_python), "-c", code], capture_output=True, text=True, check=False)
    return out.stdout.strip() or None


def ensure_venv(python: str, venv: Path, wheel: Path, key: str, src: Path) -> Path:
    """The build venv: the class's llama-cpp-python, then triage[packaging] (PyInstaller) from ``src``."""
    vpy = venv / "bin" / "python"
    if not vpy.exists():
        say(f"creating the build venv {venv}")
        run([python, "-m", "venv", str(venv)])
    pip = [str(vpy), "-m", "pip", "--disable-pip-version-check", "--quiet"]
    if llama_stamp(vpy) != key:
        run([*pip, "install", "--force-reinstall", "--no-deps", str(wheel)])
        code = (
            "import importlib.util as u, pathlib, sys; "
            "(pathlib.Path(u.find_spec('llama_cpp').submodule_search_locations[0]) "
            "/ '.triage-build-key').write_text(sys.argv[1] + '\\n')"
        )
        run([str(vpy), "-c", code, key])
    # Dependencies (quick when satisfied); --find-links so pip sees our wheel, never the sdist.
    run([*pip, "install", "--find-links", str(wheel.parent), f"{src}[packaging]"])
    # Then triage itself again, always: pip may consider an unchanged version "satisfied".
    run([*pip, "install", "--no-deps", "--force-reinstall", str(src)])
    if llama_stamp(vpy) != key:
        die("llama-cpp-python in the build venv is not the wheel for these flags (did pip replace it?)")
    return vpy


def glibc_floor(folder: Path) -> str:
    """Newest GLIBC_x.y symbol version any bundled ELF file needs: the oldest glibc it runs on."""
    best = (0, 0)
    if not shutil.which("objdump"):
        return "unknown (objdump missing)"
    for path in folder.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        with path.open("rb") as fh:
            if fh.read(4) != b"\x7fELF":
                continue
        out = subprocess.run(["objdump", "-T", str(path)], capture_output=True, text=True, check=False).stdout
        for major, minor in re.findall(r"GLIBC_(\d+)\.(\d+)", out):
            best = max(best, (int(major), int(minor)))
    return f"{best[0]}.{best[1]}"


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cpu",
        choices=sorted(CPU_CLASSES),
        default="avx2",
        help="CPU class llama.cpp is built for (default avx2: runs on any x86-64 laptop since 2013)",
    )
    parser.add_argument(
        "--python",
        default=os.environ.get("PYTHON", sys.executable),
        help="Python 3.11+ (with libpython) for the build venv (default: this one)",
    )
    parser.add_argument("--no-tarball", action="store_true", help="skip the .tar.gz")
    args = parser.parse_args(argv)

    if platform.system() != "Linux" or platform.machine().lower() not in ("x86_64", "amd64"):
        die(f"this build targets Linux x86-64; this is {platform.system()} {platform.machine()}")
    probe = subprocess.run(
        [args.python, "-c", "import sys, sysconfig; "
         "print(sys.version_info >= (3, 11), sysconfig.get_config_var('Py_ENABLE_SHARED'))"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if probe.stdout.split() != ["True", "1"]:
        die(
            f"{args.python} must be Python 3.11+ built with --enable-shared (PyInstaller "
            f"bundles libpython); got {probe.stdout.strip() or probe.stderr.strip()}"
        )

    started = time.monotonic()
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    options, required = class_options(args.cpu)
    key = cpuflags.build_key(options, LLAMA_VERSION)
    say(f"CPU class {args.cpu}: {cpuflags.describe(options)} (build key {key})")
    missing_here = sorted(set(required) - cpuflags.read_cpu_flags())
    if missing_here:
        say(
            f"warning: this machine lacks {', '.join(missing_here)}; "
            "the build works, but the smoke test cannot run here"
        )

    work = HERE / "build" / f"{args.cpu}-{key}"
    work.mkdir(parents=True, exist_ok=True)
    wheel = ensure_wheel(args.python, options, key)
    src = work / "src"
    copy_source(src)
    vpy = ensure_venv(args.python, work / "venv", wheel, key, src)

    info = {
        "triage_version": version,
        "llama_cpp_python": LLAMA_VERSION,
        "cpu_class": args.cpu,
        "build_key": key,
        "cmake_args": cpuflags.cmake_args(options),
        "required_cpu_flags": required,
        "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "built_on": f"{platform.platform()} python {platform.python_version()}",
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    info_file = work / "triage_build.json"
    info_file.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")

    release = f"triage-{version}-linux-x86_64-{args.cpu}"
    dist = HERE / "dist" / release
    shutil.rmtree(dist, ignore_errors=True)
    dist.mkdir(parents=True)
    say("running PyInstaller (nice -n 10)")
    t0 = time.monotonic()
    env = dict(os.environ, TRIAGE_BUILD_INFO=str(info_file), PYTHONNOUSERSITE="1")
    run(
        [str(vpy), "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
         "--distpath", str(dist), "--workpath", str(work / "pyinstaller"), str(HERE / "triage.spec")],
        env=env, nice=True, cwd=work,
    )  # fmt: skip
    pyi_seconds = time.monotonic() - t0
    app = dist / "triage"
    if not (app / "triage").is_file():
        die(f"PyInstaller did not produce {app / 'triage'}")
    shutil.copy2(HERE / "install.sh", dist / "install.sh")
    glibc = glibc_floor(app)
    info.update({"glibc_min": glibc, "app_bytes": du(app)})
    (dist / "BUILD-INFO.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")

    if not args.no_tarball:
        tarball = dist.with_name(release + ".tar.gz")
        say(f"writing {tarball}")
        with tarfile.open(tarball, "w:gz", compresslevel=6) as tar:
            tar.add(dist, arcname=release)
        say(f"tarball: {tarball} ({tarball.stat().st_size / 1e6:.1f} MB)")

    say(f"app: {app} (one folder, {du(app) / 1e6:.1f} MB; executable {app / 'triage'})")
    say(f"needs glibc >= {glibc} and a CPU with {', '.join(required) or 'no SIMD extensions'}")
    say(f"PyInstaller took {pyi_seconds:.0f} s; the whole build {time.monotonic() - started:.0f} s")
    say(f"next: packaging/smoke.sh {app / 'triage'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
