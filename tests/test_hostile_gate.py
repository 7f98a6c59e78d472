"""Issue 42's cases, each through the gate (triage/gate.py): FIFOs, devices, folders, deep nesting and sizes.

Every FIFO, device node, folder and file here is the test's own, made under tmp_path (a FIFO with
``os.mkfifo``, a device node with ``os.mknod`` as root). Where a regression would hang, the case runs in
a subprocess with a timeout, so it fails instead. A FIFO or device triage did not make is never renamed,
replaced or deleted: each test checks it is still there, still a FIFO.
"""

from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import TRACEBACK, assert_clean, home_env, run_triage

HANG = 60  # seconds: a case that takes longer has hung (each takes well under a second of its own work)
DEEP = 100_000


def run_py(code: str, home: Path, *, timeout: float = HANG, **env: str) -> subprocess.CompletedProcess[str]:
    """Run Python ``code`` in a child with ``TRIAGE_HOME=home``; a hang fails as ``TimeoutExpired``."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=home_env(home, **env), timeout=timeout
    )


# The child's peak resident memory in KB: VmHWM is its own since exec (ru_maxrss is not: Linux keeps
# the forking parent's high-water mark across exec, and the pytest process may be large).
PEAK_KB = """
def peak_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
"""


def is_fifo(path: Path) -> bool:
    return stat.S_ISFIFO(os.lstat(path).st_mode)


def make_device(path: Path) -> bool:
    """A private character device node (the null device's numbers) at ``path``; False when not permitted."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        return False
    return True


def config_file(home: Path) -> Path:
    path = home / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


# --- the config ----------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["stats"], ["model", "list"], ["score", "-"]], ids=["stats", "model-list", "score"])
def test_a_fifo_as_the_config_never_hangs_a_command(tmp_path: Path, args: list[str]) -> None:
    home = tmp_path / "home"
    cfg = config_file(home)
    os.mkfifo(cfg)
    proc = run_triage(args, home, stdin="I was charged twice", timeout=HANG)
    assert_clean(proc)
    if args[0] == "score":  # the one that needs its settings says why it cannot have them
        assert proc.returncode == 2 or proc.returncode == 1
        assert f"config file {cfg}" in proc.stderr and "FIFO (named pipe), not a regular file" in proc.stderr
    assert is_fifo(cfg)


def test_a_device_as_the_config_is_refused_by_name(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cfg = config_file(home)
    if not make_device(cfg):
        pytest.skip("making a device node needs root")
    proc = run_triage(["score", "-"], home, stdin="I was charged twice", timeout=HANG)
    assert_clean(proc)
    assert proc.returncode != 0 and "a character device, not a regular file" in proc.stderr, proc.stderr
    assert stat.S_ISCHR(os.lstat(cfg).st_mode)


def test_a_config_nested_100000_deep_is_a_message_not_a_recursion_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cfg = config_file(home)
    cfg.write_text("model = " + "[" * DEEP + "]" * DEEP + "\n", encoding="utf-8")
    for args in (["score", "-"], ["model", "list"], ["stats"]):
        proc = run_triage(args, home, stdin="I was charged twice", timeout=HANG)
        assert_clean(proc)
        assert "RecursionError" not in proc.stderr
    proc = run_triage(["score", "-"], home, stdin="I was charged twice", timeout=HANG)
    assert proc.returncode == 1 and f"config file {cfg} is not read: it is nested 100,001 levels deep" in proc.stderr
    assert cfg.stat().st_size == len("model = ") + 2 * DEEP + 1  # left as it is


def test_a_config_of_dotted_keys_100000_deep_is_refused_too(tmp_path: Path) -> None:
    """tomllib builds ``a.a.a...`` without recursing, but the dict it makes is as deep (repr, == recurse)."""
    home = tmp_path / "home"
    cfg = config_file(home)
    cfg.write_text(".".join(["a"] * DEEP) + " = 1\n", encoding="utf-8")
    proc = run_triage(["score", "-"], home, stdin="I was charged twice", timeout=HANG)
    assert_clean(proc)
    assert "nested 100,000 levels deep" in proc.stderr, proc.stderr


def test_a_config_past_its_bound_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """600 MB cost 1.25 GB; now the size is checked first (a sparse file: no disk, no read)."""
    home = tmp_path / "home"
    cfg = config_file(home)
    with cfg.open("wb") as fh:
        fh.write(b"n_ctx = 4096\n")
        fh.truncate(600 << 20)
    code = PEAK_KB + (
        "from triage.store.config import load_config, ConfigError\n"
        "try:\n    load_config()\nexcept ConfigError as exc:\n    print(exc)\n"
        "print(peak_kb())\n"
    )
    proc = run_py(code, home)
    assert proc.returncode == 0, proc.stderr
    message, peak_kb = proc.stdout.rsplit("\n", 2)[-3], int(proc.stdout.split()[-1])
    assert "is not read: it is 629,145,600 bytes; a config file is at most 1 MiB" in message
    assert peak_kb < 200 << 10  # KB: far below the 600 MB a whole read costs
    assert cfg.stat().st_size == 600 << 20


def test_a_config_that_is_a_fifo_is_never_set_aside_by_a_save(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cfg = config_file(home)
    os.mkfifo(cfg)
    code = (
        "from triage.store.config import save_config, ConfigError\n"
        "try:\n    save_config({'n_ctx': 2048})\nexcept ConfigError as exc:\n    print('refused:', exc.message)\n"
    )
    proc = run_py(code, home)
    assert "refused:" in proc.stdout and "FIFO" in proc.stdout, proc.stdout + proc.stderr
    assert is_fifo(cfg) and sorted(p.name for p in cfg.parent.iterdir()) == ["config.toml"]


def test_as_nobody_a_fifo_or_an_unreadable_config_is_a_message(tmp_path: Path) -> None:
    """The unprivileged user opens the FIFO too (mode 0666) and cannot read a 0600 file of root's."""
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to the unprivileged user nobody")
    folder = Path(tempfile.mkdtemp(prefix="triage-gate-"))  # tmp_path's parents are root's only
    try:
        folder.chmod(0o755)
        home = folder / "home"
        cfg = config_file(home)
        for p in (home, cfg.parent):
            p.chmod(0o777)
        code = (
            "import contextlib, io, os, sys\n"
            "from triage.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            "    main(['score', '-'])  # as root first: every module is imported (the interpreter lives under /root)\n"
            "os.setgid(65534)\nos.setuid(65534)\nassert os.geteuid() == 65534\n"
            "sys.stdin = io.TextIOWrapper(io.BytesIO(b'I was charged twice'))\n"
            "sys.exit(main(['score', '-']))\n"
        )
        os.mkfifo(cfg, 0o666)
        proc = run_py(code, home)
        assert_clean(proc)
        assert proc.returncode != 0 and "FIFO (named pipe), not a regular file" in proc.stderr, proc.stderr
        cfg.unlink()
        cfg.write_text("n_ctx = 4096\n", encoding="utf-8")
        cfg.chmod(0o600)
        proc = run_py(code, home)
        assert_clean(proc)
        assert proc.returncode != 0 and f"cannot read config file {cfg}: Permission denied" in proc.stderr
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=False)


# --- the stable-prefix cache ----------------------------------------------------------------------

CACHE = """
import json, logging, sys
from pathlib import Path
from triage.scoring.stable_file import StableCache
logging.basicConfig(level=logging.WARNING, format="LOG %(message)s", stream=sys.stdout)
cache = StableCache(Path(sys.argv[1]))
"""


def test_a_fifo_as_a_kvstate_is_a_miss_said_once_and_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "stable"
    folder.mkdir()
    code = CACHE + (
        "key, tokens = 'k1', (1, 2, 3)\n"
        "print('GOT', cache.get(key, tokens), cache.get(key, tokens))\n"
        "cache.put(key, tokens, b'state')\n"
        "cache._memory.clear()\n"
        "print('AGAIN', cache.get(key, tokens))\n"
        "cache.prune()\n"
    )
    fifo = folder / "k1.kvstate"
    os.mkfifo(fifo)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=HANG, env=home_env(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr
    assert "GOT None None" in proc.stdout and "AGAIN None" in proc.stdout
    logs = [line for line in proc.stdout.splitlines() if line.startswith("LOG")]
    assert len(logs) == 1 and str(fifo) in logs[0] and "FIFO" in logs[0], logs
    assert is_fifo(fifo) and sorted(p.name for p in folder.iterdir()) == ["k1.kvstate"]


def test_an_old_fifo_in_the_cache_folder_is_not_pruned(tmp_path: Path) -> None:
    folder = tmp_path / "stable"
    folder.mkdir()
    fifo = folder / "old.kvstate"
    os.mkfifo(fifo)
    os.utime(fifo, (0, 0))  # older than any TTL
    code = CACHE.replace("StableCache(Path(sys.argv[1]))", "StableCache(Path(sys.argv[1]), ttl_s=1, max_bytes=1)") + (
        "cache.put('k', (1,), b'x' * 100)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=HANG, env=home_env(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr
    assert is_fifo(fifo) and (folder / "k.kvstate").is_file()


def _kv_header(key: str, tokens: tuple[int, ...], payload_size: int) -> bytes:
    from triage.scoring.stable_file import _HEAD, FORMAT, MAGIC, tokens_digest

    kb = key.encode()
    return _HEAD.pack(MAGIC, FORMAT, len(kb), len(tokens), tokens_digest(tokens), payload_size, b"\0" * 32) + kb


@pytest.mark.parametrize("declared", ["small", "whole"], ids=["header-says-small", "header-says-3-GB"])
def test_a_3_gb_kvstate_with_a_real_header_costs_one_header(tmp_path: Path, declared: str) -> None:
    """Before, the 3 GB were read whole (27 s, 3.4 GB) before the payload size was checked."""
    folder = tmp_path / "stable"
    folder.mkdir()
    path = folder / "k.kvstate"
    size = 3 << 30
    head = _kv_header("k", (1, 2, 3), 1000 if declared == "small" else size - len(_kv_header("k", (1, 2, 3), 0)))
    with path.open("wb") as fh:  # sparse: no disk is used
        fh.write(head)
        fh.truncate(size)
    code = CACHE + PEAK_KB + ("print('GOT', cache.get('k', (1, 2, 3)))\nprint('PEAK', peak_kb())\n")
    proc = subprocess.run(
        [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=HANG, env=home_env(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr
    assert "GOT None" in proc.stdout
    peak_kb = int(proc.stdout.split("PEAK")[1])
    assert peak_kb < 300 << 10, peak_kb  # KB; the file is 3 GB
    assert not path.exists()  # triage's own cache file, damaged: dropped, recomputed next time


def test_a_fifo_as_last_json_is_a_miss_and_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "stable"
    folder.mkdir()
    fifo = folder / "last.json"
    os.mkfifo(fifo)
    code = CACHE + "print('PREV', cache.swap_last({'pack': 'a'}), cache.swap_last({'pack': 'b'}))\n"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=HANG, env=home_env(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr
    assert "PREV None None" in proc.stdout
    logs = [line for line in proc.stdout.splitlines() if line.startswith("LOG")]
    assert len(logs) == 1 and "FIFO" in logs[0], logs
    assert is_fifo(fifo)


def test_a_last_json_nested_100000_deep_is_replaced_on_the_next_write(tmp_path: Path) -> None:
    """Before, it killed every score with RecursionError, again and again (it was never replaced)."""
    from triage.scoring.stable_file import StableCache

    folder = tmp_path / "stable"
    folder.mkdir()
    last = folder / "last.json"
    last.write_text("[" * DEEP + "]" * DEEP, encoding="utf-8")
    cache = StableCache(folder)
    assert cache.swap_last({"pack": "a"}) is None
    assert json.loads(last.read_text(encoding="utf-8"))["pack"] == "a"
    assert StableCache(folder).note_change({"pack": "b"}) == (  # the record read back: scoring goes on
        "stable prefix changed, so its prefill is paid again once (pack: a → b)"
    )


def test_last_json_past_its_bound_is_a_miss(tmp_path: Path) -> None:
    from triage.scoring.stable_file import StableCache

    folder = tmp_path / "stable"
    folder.mkdir()
    last = folder / "last.json"
    last.write_text(json.dumps({"pack": "x" * (1 << 20)}), encoding="utf-8")
    assert StableCache(folder).swap_last({"pack": "a"}) is None
    assert json.loads(last.read_text(encoding="utf-8"))["pack"] == "a"


# --- models ----------------------------------------------------------------------------------------


def test_triage_model_naming_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    env = home_env(tmp_path / "home", TRIAGE_MODEL=str(fifo), COLUMNS="200")
    proc = subprocess.run(
        [sys.executable, "-m", "triage.cli", "score", "-"],
        input="I was charged twice",
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG,
    )
    assert_clean(proc)
    assert proc.returncode == 2, proc.stderr
    assert f"cannot read model file {fifo}: it is a FIFO (named pipe), not a regular file" in proc.stderr
    assert is_fifo(fifo)


def test_the_model_path_handed_to_llama_cpp_is_checked_first(tmp_path: Path) -> None:
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    code = (
        "import sys\nfrom pathlib import Path\n"
        "from triage.model.native import check_model_file, NativeVocab\n"
        "from triage.errors import TriageError\n"
        "for make in (check_model_file, NativeVocab):\n"
        "    try:\n        make(Path(sys.argv[1]))\n"
        "    except TriageError as exc:\n        print('REFUSED', exc.message)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=HANG, env=home_env(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("REFUSED") == 2 and "FIFO" in proc.stdout, proc.stdout
    assert is_fifo(fifo)


def test_a_fifo_as_an_installed_model_is_listed_as_such(tmp_path: Path) -> None:
    home = tmp_path / "home"
    models = home / "data" / "models"
    models.mkdir(parents=True)
    fifo = models / "smollm2-135m.gguf"
    os.mkfifo(fifo)
    proc = run_triage(["model", "list", "--json"], home, timeout=HANG)
    assert_clean(proc)
    assert proc.returncode == 0, proc.stderr
    (row,) = [m for m in json.loads(proc.stdout) if m["name"] == "smollm2-135m"]
    assert row["state"] == "not-a-file" and f"{fifo} is a FIFO (named pipe), not a model file" in row["problem"]
    assert is_fifo(fifo)


def test_triage_home_naming_a_regular_file_is_a_message(tmp_path: Path) -> None:
    """Before, ``model list`` died with NotADirectoryError."""
    home = tmp_path / "home"
    home.write_text("not a folder\n", encoding="utf-8")
    proc = run_triage(["model", "list"], home, timeout=HANG)
    assert_clean(proc)
    assert proc.returncode in (1, 2), proc.stderr
    # refused at start, when the environment is read (triage/environment.py), naming the variable and the file
    assert f"TRIAGE_HOME='{home}' is not a folder (it is a file)" in proc.stderr, proc.stderr
    assert home.read_text(encoding="utf-8") == "not a folder\n"


# --- heads, calibrations, exports, label files, run.json, the eval cache ---------------------------

READERS = """
import sys
from pathlib import Path
from triage.errors import TriageError
what, path = sys.argv[1], Path(sys.argv[2])
try:
    if what == "head":
        from triage.learning.head_file import read_head
        read_head(path)
    elif what == "calibration":
        from triage.scoring.calibrate import read_calibration
        read_calibration(path)
    elif what == "export":
        from triage.intake.readers import open_export
        open_export(path)
    elif what == "pack":
        from triage.domain.pack import load_pack
        load_pack(path)
    elif what == "eval-cache":
        from triage.learning.cache import ReadoutCache
        ReadoutCache(path)
    elif what == "labels":
        from triage.gate import iter_json_lines
        list(iter_json_lines(path, "label file"))
    elif what == "gguf":
        from triage.model.gguf import read_gguf_info
        read_gguf_info(path)
    print("READ")
except TriageError as exc:
    print("REFUSED", exc.message)
"""


@pytest.mark.parametrize("what", ["head", "calibration", "export", "pack", "eval-cache", "labels", "gguf"])
@pytest.mark.parametrize("node", ["fifo", "device"])
def test_every_reader_refuses_a_fifo_or_a_device_by_name(tmp_path: Path, what: str, node: str) -> None:
    path = tmp_path / {"export": "tickets.csv", "eval-cache": "readouts.sqlite3"}.get(what, f"x.{what}")
    if node == "fifo":
        os.mkfifo(path)
    elif not make_device(path):
        pytest.skip("making a device node needs root")
    proc = subprocess.run(
        [sys.executable, "-c", READERS, what, str(path)],
        capture_output=True,
        text=True,
        timeout=HANG,
        env=home_env(tmp_path),
    )
    assert TRACEBACK not in proc.stderr, proc.stderr
    kind = "a FIFO (named pipe)" if node == "fifo" else "a character device"
    assert proc.stdout.startswith("REFUSED") and str(path) in proc.stdout and kind in proc.stdout, proc.stdout
    assert os.lstat(path).st_mode & 0o170000 == (stat.S_IFIFO if node == "fifo" else stat.S_IFCHR)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [path.name]


def test_label_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "labels.jsonl"
    os.mkfifo(fifo)
    proc = run_triage(["label", "--file", str(fifo)], tmp_path / "home", timeout=HANG)
    assert_clean(proc)
    assert proc.returncode == 2 and "FIFO (named pipe)" in proc.stderr, proc.stderr


def _signature() -> object:
    from triage.backlog.output import RunSignature
    from triage.domain.pack import default_pack
    from triage.scoring.options import ScoreOptions

    return RunSignature.of("m" * 64, default_pack().hash, "fmt", ScoreOptions(), None)


def test_a_run_json_nested_100000_deep_is_a_message_for_resume(tmp_path: Path) -> None:
    """Before, ``score --ray --resume`` died with RecursionError."""
    from triage.backlog.output import read_existing, run_file
    from triage.errors import InputError

    out = tmp_path / "out.jsonl"
    out.write_text("", encoding="utf-8")
    run_file(out).write_text("[" * DEEP + "]" * DEEP, encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_existing(out, _signature())
    assert "nested 100,000 levels deep" in info.value.message and str(run_file(out)) in info.value.message


def test_a_run_json_or_output_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom pathlib import Path\n"
        "from triage.backlog.output import read_existing, RunSignature, run_file\n"
        "from triage.domain.pack import default_pack\nfrom triage.scoring.options import ScoreOptions\n"
        "from triage.errors import InputError\n"
        "sig = RunSignature.of('m' * 64, default_pack().hash, 'fmt', ScoreOptions(), None)\n"
        "try:\n    read_existing(Path(sys.argv[1]), sig)\n"
        "except InputError as exc:\n    print('REFUSED', exc.message)\n"
    )
    out = tmp_path / "out.jsonl"
    os.mkfifo(out)
    run = tmp_path / "b.jsonl.triage-run.json"
    (tmp_path / "b.jsonl").write_text("", encoding="utf-8")
    os.mkfifo(run)
    for target in (out, tmp_path / "b.jsonl"):
        proc = subprocess.run(
            [sys.executable, "-c", code, str(target)],
            capture_output=True,
            text=True,
            timeout=HANG,
            env=home_env(tmp_path),
        )
        assert proc.stdout.startswith("REFUSED") and "FIFO" in proc.stdout, proc.stdout + proc.stderr
    assert is_fifo(out) and is_fifo(run)


def test_a_kvstate_header_struct_is_what_the_test_builds() -> None:
    """The helper above builds the real header (so the 3 GB case is a real header)."""
    from triage.scoring.stable_file import _HEAD

    assert _HEAD.size == struct.calcsize("<8sIHI32sQ32s")


def test_a_pull_never_replaces_a_fifo_in_the_models_folder(tmp_path: Path) -> None:
    """The check comes before any download: no network is needed to see it."""
    home = tmp_path / "home"
    models = home / "data" / "models"
    models.mkdir(parents=True)
    fifo = models / "smollm2-135m.gguf"
    os.mkfifo(fifo)
    code = (
        "from triage.model.modelstore import pull\nfrom triage.errors import TriageError\n"
        "try:\n    pull('smollm2-135m')\nexcept TriageError as exc:\n    print('REFUSED', exc)\n"
    )
    proc = run_py(code, home)
    assert proc.stdout.startswith("REFUSED") and f"{fifo} is a FIFO (named pipe)" in proc.stdout, proc.stdout
    assert is_fifo(fifo)
