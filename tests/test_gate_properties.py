"""Property-based tests (Hypothesis) over every reader of a file a user or another process can replace.

Each test throws random bytes, deep nesting, sizes at and past the kind's bound (sparse files, so no
disk is used) and odd file types (a FIFO, a device node, a folder, a symlink to a FIFO, nothing) at
one reader, and checks that it answers with its documented error and nothing else: no traceback, no
hang (an alarm fails an example that takes more than :data:`ALARM_S`), and bounded memory (the
peak of Python's allocations during the read, by ``tracemalloc``, stays under :data:`MAX_PEAK` for a
small file and for one past its bound, which is :data:`PAST` bytes larger than the bound, so reading
it at all would cost more: it must be refused on its size, before a read; a file at its bound may
cost a few times the bound: a str of 4-byte characters is 4 bytes a character, beside its bytes).

The profile ``triage-ci`` (registered here) is what CI runs: ``derandomize=True`` (the same examples
every run), ``deadline=None`` (this machine is shared and loaded), no example database, and
``max_examples`` per test chosen so that the whole file runs in well under 3 minutes here
(docs/hardening.md has the measured time). ``HYPOTHESIS_PROFILE=triage-deep`` runs ten times as many.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triage import gate
from triage.bounded import Bounded, json_depth, loads_json

EXAMPLES = 300
settings.register_profile(
    "triage-ci",
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("triage-deep", parent=settings.get_profile("triage-ci"), max_examples=10 * EXAMPLES)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "triage-ci"))

ALARM_S = 20  # one example: a read that takes longer has hung (a FIFO waited on)
MAX_PEAK = 16 << 20  # bytes of Python allocations during one read of a small file or of one past its bound
PAST = 64 << 20  # how far past its bound a too-large file is

KINDS = ["file", "file", "file", "fifo", "device", "folder", "fifo-link", "missing"]


class Hung(Exception):
    """The alarm went off: the reader waited on something."""


@contextlib.contextmanager
def guarded(max_peak: int = MAX_PEAK) -> Iterator[None]:
    """Fail (:class:`Hung`) instead of hanging; fail when the reader's allocations peak past ``max_peak`` bytes."""

    def ring(signum: int, frame: Any) -> None:
        raise Hung(f"the read took more than {ALARM_S} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(ALARM_S)
    tracemalloc.start()
    try:
        yield
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert peak < max_peak, f"the read allocated {peak:,} bytes at its peak (at most {max_peak:,})"


def make(path: Path, kind: str, data: bytes = b"", size: int | None = None) -> Path:
    """Put a node of ``kind`` at ``path``: a file of ``data`` (sparse up to ``size``), a FIFO, a device, ..."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "file":
        with path.open("wb") as fh:
            fh.write(data)
            if size is not None and size > len(data):
                fh.truncate(size)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "fifo-link":
        os.mkfifo(path.with_name(path.name + ".pipe"))
        path.symlink_to(path.name + ".pipe")
    elif kind == "device":
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            os.mkfifo(path)  # not root: a FIFO stands in
    elif kind == "folder":
        path.mkdir()
        (path / "inside").write_bytes(data)
    return path


def node_kind(path: Path) -> int | None:
    try:
        return stat.S_IFMT(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None


def deep(n: int, open_: str = "[", close: str = "]", prefix: str = "") -> bytes:
    return (prefix + open_ * n + close * n).encode()


def contents(extra: list[st.SearchStrategy[bytes]] | None = None) -> st.SearchStrategy[bytes]:
    """Random bytes, text, deep JSON and TOML nesting, and whatever ``extra`` adds."""
    depth = st.integers(min_value=60, max_value=20_000)
    return st.one_of(
        st.binary(max_size=4096),
        st.text(max_size=2048).map(lambda s: s.encode("utf-8", "surrogatepass")),
        depth.map(deep),
        depth.map(lambda n: deep(n, '{"a":', "}")),
        depth.map(lambda n: deep(n, prefix="model = ")),
        depth.map(lambda n: (".".join(["a"] * n) + " = 1\n").encode()),
        depth.map(lambda n: ("a = " + "{b = " * n + "1" + "}" * n).encode()),
        *(extra or []),
    )


# (kind, data, size): a node, its bytes, and (for "file") a sparse size; sizes at the bound and past it.
def nodes(bound: int | None, data: st.SearchStrategy[bytes]) -> st.SearchStrategy[tuple[str, bytes, int | None]]:
    sizes: list[int | None] = [None]
    if bound is not None:
        sizes += [bound, bound + PAST]
    return st.tuples(st.sampled_from(KINDS), data, st.sampled_from(sizes))


def check_reader(
    read: Callable[[Path], Any],
    errors: tuple[type[BaseException], ...],
    name: str,
    node: tuple[str, bytes, int | None],
    bound: int | None = None,
) -> None:
    """``read`` a node made from ``node``: its result or one of ``errors``; a node not a file is left as it is."""
    kind, data, size = node
    at_bound = kind == "file" and size is not None and bound is not None and size <= bound
    with tempfile.TemporaryDirectory() as tmp:
        path = make(Path(tmp) / name, kind, data, size)
        before = node_kind(path)
        with guarded(MAX_PEAK + 8 * size if at_bound and size else MAX_PEAK):  # text of 4-byte characters: 6x
            try:
                read(path)
            except errors:
                pass
        if kind not in ("file", "missing"):
            assert node_kind(path) == before, f"the {kind} at {path} was replaced or removed"


# --- the readers ---------------------------------------------------------------------------------


@PROFILE
@given(nodes(gate.KINDS["config"].limit, contents([st.just(b"n_ctx = 4096\n"), st.just(b"\xef\xbb\xbfmodel = 'x'\n")])))
def test_the_config_reader(node: tuple[str, bytes, int | None]) -> None:
    from triage.store.config import ConfigError, load_config, retired_notes

    def read(path: Path) -> None:
        retired_notes(path)  # never raises
        load_config(path)

    check_reader(read, (ConfigError,), "config.toml", node, gate.KINDS["config"].limit)


def _records(path: Path) -> None:
    from triage.intake.readers import open_export

    export = open_export(path)
    export.columns  # noqa: B018 - reads the header or the first records
    for _ in islice(export.records(), 2000):
        pass


EXPORT_TEXT = [
    st.lists(st.text(max_size=40), min_size=1, max_size=20).map(lambda xs: ("text,id\n" + "\n".join(xs)).encode()),
    st.lists(st.text(max_size=40), max_size=20).map(lambda xs: "\n".join('{"text": %r}' % x for x in xs).encode()),
    st.integers(60, 20_000).map(lambda n: b'[{"text": "a"}, ' + deep(n) + b"]"),
    st.integers(60, 20_000).map(lambda n: b'{"text": "a"}\n' + deep(n) + b"\n"),
    st.binary(max_size=512).map(lambda b: b"PAR1" + b),
]


@PROFILE
@given(
    nodes(None, contents(EXPORT_TEXT)), st.sampled_from(["tickets.csv", "tickets.jsonl", "tickets.json", "t.parquet"])
)
def test_the_export_readers(node: tuple[str, bytes, int | None], name: str) -> None:
    from triage.errors import InputError

    check_reader(_records, (InputError,), name, node)


@PROFILE
@given(
    nodes(
        None,
        contents(
            [
                st.lists(st.text(max_size=30), max_size=20).map(
                    lambda xs: "\n".join('{"id": %r, "labels": {"queue": "billing"}}' % x for x in xs).encode()
                ),
                st.binary(max_size=64).map(lambda b: b"\r".join([b'{"id": "a"}', b])),
            ]
        ),
    )
)
def test_the_label_file_reader(node: tuple[str, bytes, int | None]) -> None:
    from triage.errors import InputError

    def read(path: Path) -> None:
        for _, obj, error in gate.iter_json_lines(path, "label file"):
            assert (obj is None) != (error is None)

    check_reader(read, (InputError,), "labels.jsonl", node)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=30,
)
FIELDS = st.sampled_from(["text", "messages", "pack", "criteria", "id", "labels", "history", "readout", "role"])
BODIES = st.one_of(
    st.dictionaries(FIELDS, JSON_VALUES, max_size=5).map(lambda d: json.dumps(d)),
    JSON_VALUES.map(lambda v: json.dumps(v)),
    st.text(max_size=300),
    st.integers(60, 50_000).map(lambda n: deep(n).decode()),
    st.integers(60, 50_000).map(lambda n: '{"text": ' + "[" * n + "]" * n + "}"),
    st.just('{"text": "a", "\\ud800": 1}'),
    st.integers(4300, 6000).map(lambda n: '{"text": "x", "id": ' + "9" * n + "}"),
    st.integers(1 << 16, 1 << 20).map(lambda n: "[" * 70 + '"' + "a" * n),  # the depth scan meets a long string
)


@PROFILE
@given(BODIES, st.integers(min_value=1, max_value=1 << 16))
def test_the_serve_request_bodies(text: str, max_ticket: int) -> None:
    """A body as ``triage serve`` reads it once the bytes are in: JSON under the bound, keys checked, fields parsed."""
    from triage.serve.requests import Invalid, Malformed, TooLarge, check_keys, parse_label, parse_score

    with guarded():
        try:
            body = loads_json(text)
        except (Bounded, ValueError):
            return
        for parse in (lambda b: parse_score(b, max_ticket_bytes=max_ticket), parse_label):
            try:
                check_keys(body)
                parse(body)
            except (Invalid, Malformed, TooLarge):
                pass


def _kv_file(key: str, tokens: tuple[int, ...], payload: bytes, declared: int | None) -> bytes:
    import hashlib

    from triage.scoring.stable_file import _HEAD, FORMAT, MAGIC, tokens_digest

    kb = key.encode()
    size = len(payload) if declared is None else declared
    return (
        _HEAD.pack(MAGIC, FORMAT, len(kb), len(tokens), tokens_digest(tokens), size, hashlib.sha256(payload).digest())
        + kb
        + payload
    )


KV_CONTENT = contents(
    [
        st.tuples(st.binary(max_size=256), st.one_of(st.none(), st.integers(0, 1 << 40))).map(
            lambda t: _kv_file("k", (1, 2, 3), t[0], t[1])
        ),
        st.binary(max_size=256).map(lambda b: _kv_file("k", (1, 2, 3), b, None)[:-1]),
    ]
)


@PROFILE
@given(nodes(gate.KINDS["stable-state"].limit, KV_CONTENT))
def test_the_stable_cache_state_reader(node: tuple[str, bytes, int | None]) -> None:
    """A ``.kvstate``: a state or a miss, never an error; a node that is not a file is left alone."""
    from triage.scoring.stable_file import StableCache

    def read(path: Path) -> None:
        cache = StableCache(path.parent)
        got = cache.get("k", (1, 2, 3))
        assert got is None or isinstance(got, bytearray)
        cache.put("k", (1, 2, 3), b"fresh")  # replaces triage's own damaged file, never another node

    check_reader(read, (), "k.kvstate", node, gate.KINDS["stable-state"].limit)


@PROFILE
@given(nodes(gate.KINDS["stable-last"].limit, contents([st.just(b'{"pack": "a", "_pid": 1}')])))
def test_the_stable_cache_record_reader(node: tuple[str, bytes, int | None]) -> None:
    """``last.json``: a record or none, never an error; a regular file is replaced by a readable record."""
    from triage.scoring.stable_file import StableCache

    def read(path: Path) -> None:
        prev = StableCache(path.parent).swap_last({"pack": "b"})
        assert prev is None or isinstance(prev, dict)
        if node[0] in ("file", "missing"):
            assert loads_json(path.read_text(encoding="utf-8"))["pack"] == "b"

    check_reader(read, (), "last.json", node, gate.KINDS["stable-last"].limit)


def _zip(members: dict[str, bytes]) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


HEAD_CONTENT = contents(
    [
        st.dictionaries(
            st.sampled_from(["meta.npy", "c0_coef.npy", "c0_intercept.npy", "other.npy"]), st.binary(max_size=300)
        ).map(_zip),
        st.binary(max_size=300).map(lambda b: b"PK\x03\x04" + b),
    ]
)


@PROFILE
@given(nodes(gate.KINDS["head"].limit, HEAD_CONTENT))
def test_the_head_reader(node: tuple[str, bytes, int | None]) -> None:
    from triage.errors import InputError
    from triage.learning.head_file import read_head

    check_reader(read_head, (InputError,), "head.npz", node, gate.KINDS["head"].limit)


@PROFILE
@given(
    nodes(
        gate.KINDS["calibration"].limit,
        contents([JSON_VALUES.map(lambda v: json.dumps({"schema": "triage.calibration/1", "x": v}).encode())]),
    )
)
def test_the_calibration_reader(node: tuple[str, bytes, int | None]) -> None:
    from triage.errors import InputError
    from triage.scoring.calibrate import read_calibration

    check_reader(read_calibration, (InputError,), "cal.json", node, gate.KINDS["calibration"].limit)


@PROFILE
@given(nodes(gate.KINDS["pack"].limit, contents([st.just(b'name = "x"\n[[criteria]]\nid = "q"\n')])))
def test_the_pack_reader(node: tuple[str, bytes, int | None]) -> None:
    from triage.domain.pack import PackError, load_pack

    check_reader(load_pack, (PackError,), "pack.toml", node, gate.KINDS["pack"].limit)


@PROFILE
@given(nodes(None, contents([st.binary(max_size=200).map(lambda b: b"GGUF\x03\x00\x00\x00" + b)])))
def test_the_gguf_header_reader(node: tuple[str, bytes, int | None]) -> None:
    from triage.errors import InputError
    from triage.model.gguf import read_gguf_info

    check_reader(read_gguf_info, (InputError,), "model.gguf", node)


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "fifo-link"])
def test_the_eval_cache_refuses_a_node_that_is_not_a_file_and_leaves_it(kind: str) -> None:
    """SQLite is handed the path only once the gate saw a regular file or nothing (not random bytes: SQLite's own)."""
    from triage.errors import TriageError
    from triage.learning.cache import ReadoutCache

    with tempfile.TemporaryDirectory() as tmp:
        path = make(Path(tmp) / "readouts.sqlite3", kind)
        before = node_kind(path)
        with guarded(), pytest.raises(TriageError, match="cannot be used: it is"):
            ReadoutCache(path)
        assert node_kind(path) == before


@pytest.mark.parametrize(
    "text",
    ["[" * 70 + '"' + "a" * (4 << 20), "[" * 70 + '"' + 'a\\"' * (1 << 20) + '"', "a = [" * 70 + '"' + "a" * (4 << 20)],
    ids=["json-unterminated-string", "json-escapes", "toml-unterminated-string"],
)
def test_the_depth_scans_cost_nothing_per_character_of_a_string(text: str) -> None:
    """Before, the string pattern kept a backtracking mark per character: 153 MB for a 1 MiB string."""
    with guarded(MAX_PEAK + 3 * len(text)):  # the text, and the copies a substitution makes
        (gate.toml_depth if text.startswith("a =") else json_depth)(text)
