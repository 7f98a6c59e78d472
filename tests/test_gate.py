"""The gate's own contract (triage/gate.py): file types, the size bound, TOML's depth bound.

The readers that use it are tested in test_hostile_gate.py (issue 42's cases) and
test_gate_properties.py (Hypothesis); the scan that keeps every reader on it in test_gate_scan.py.
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_gate_properties import PROFILE, guarded

from triage import gate
from triage.bounded import Bounded


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> str:
    """A kind of file bounded at 10 bytes."""
    monkeypatch.setitem(gate.KINDS, "tiny", gate.Kind("tiny file", 10, "for the test"))
    return "tiny"


def test_a_file_at_its_bound_is_read_and_one_byte_more_is_refused_before_reading(tmp_path: Path, tiny: str) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    assert gate.read_bytes(path, tiny) == b"0123456789"
    path.write_bytes(b"0123456789A")
    with pytest.raises(gate.TooLarge, match="it is 11 bytes; a tiny file is at most"):
        gate.read_bytes(path, tiny)
    with pytest.raises(gate.TooLarge):
        gate.open_fd(path, tiny)


@pytest.mark.parametrize("kind", ["fifo", "folder", "device", "socket", "fifo-link"])
def test_what_is_not_a_regular_file_is_refused_by_what_it_is(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "node"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "fifo-link":
        os.mkfifo(tmp_path / "pipe")
        path.symlink_to("pipe")
    elif kind == "folder":
        path.mkdir()
    elif kind == "device":
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs root")
    else:
        import socket

        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    name = {
        "fifo": "a FIFO (named pipe)",
        "fifo-link": "a FIFO (named pipe)",
        "folder": "a folder",
        "device": "a character device",
        "socket": "a socket",
    }[kind]
    with guarded():  # a FIFO must not block the open
        for read in (gate.read_bytes, gate.check_regular):
            with pytest.raises(gate.NotARegularFile) as info:
                read(path, "config")
            assert info.value.strerror.startswith(f"it is {name}, not a regular file")
            assert info.value.filename == str(path)
            assert isinstance(info.value, IsADirectoryError) == (kind == "folder")
    assert not gate.is_regular_or_absent(path)


def test_a_missing_file_is_file_not_found_and_absent(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        gate.read_bytes(tmp_path / "none", "config")
    assert gate.check_regular(tmp_path / "none", "config", missing_ok=True) is None
    assert gate.is_regular_or_absent(tmp_path / "none")
    (tmp_path / "dangling").symlink_to("none")
    assert not gate.is_regular_or_absent(tmp_path / "dangling")  # not ours to write through
    with pytest.raises(FileNotFoundError):
        gate.check_regular(tmp_path / "dangling", "config", missing_ok=True)


def test_not_a_folder_names_the_file_in_the_way(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("x", encoding="utf-8")
    assert gate.not_a_folder(home / "data" / "models" / "m.gguf") == f"{home} is a regular file, not a folder"
    assert gate.not_a_folder(tmp_path / "a" / "b") is None


@pytest.mark.parametrize(
    ("text", "at_least"),
    [
        ("a = 1", 1),
        ("a.b.c = 1", 3),
        ("[a.b]\nc.d = 1", 4),
        ("[[a.b]]\nx = 1", 3),
        ("a = [[1, 2], [3]]", 3),
        ("a = [{}, {b.c = 1}]", 4),
        ('s = "[[[[" # [[[[', 1),
        ('a = """\n[[[\n"""', 1),
        ("a = '''[[[['''", 1),
    ],
)
def test_toml_depth_bounds_what_tomllib_builds(text: str, at_least: int) -> None:
    assert gate.toml_depth(text) >= at_least
    assert gate.toml_depth(text) >= _depth(tomllib.loads(text))


def test_toml_depth_does_not_count_dots_in_values_or_strings() -> None:
    assert gate.toml_depth("x = 0.5\ny = [1.5, 2.5, 3.5]\nz = 'a.b.c.d'\n") == 2


def test_deep_toml_is_refused_before_tomllib_recurses() -> None:
    n = 100_000
    for text in ("a = " + "[" * n + "]" * n, ".".join(["a"] * n) + " = 1", "a = " + "{b = " * n + "1" + "}" * n):
        with pytest.raises(Bounded, match="levels deep"):
            gate.loads_toml(text)
    assert gate.loads_toml("a.b = [1, {c = 2}]") == {"a": {"b": [1, {"c": 2}]}}


def _depth(value: Any) -> int:
    """How deeply ``value`` nests dicts and lists (the document itself is 1), without recursing."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, d = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, d)
            stack.extend((v, d + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


KEYS = st.lists(st.sampled_from(["a", "b", "'q.x'", '"r[s"']), min_size=1, max_size=4).map(".".join)
VALUES = st.recursive(
    st.sampled_from(["1", "0.5", "'x.y'", '"[{"', "true", "1979-05-27"]),
    lambda inner: (
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]")
        | st.lists(st.tuples(KEYS, inner), max_size=3).map(
            lambda kv: "{" + ", ".join(f"{k} = {v}" for k, v in dict(kv).items()) + "}"
        )
    ),
    max_leaves=12,
)
LINES = st.one_of(
    st.tuples(KEYS, VALUES).map(lambda kv: f"{kv[0]} = {kv[1]}"),
    KEYS.map(lambda k: f"[{k}]"),
    KEYS.map(lambda k: f"[[{k}]]"),
    st.just("# [[[ a.b.c"),
)


@PROFILE
@given(st.lists(LINES, max_size=8))
def test_toml_depth_is_never_below_what_tomllib_builds(lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return  # a key given twice, a table defined twice: not TOML
    assert gate.toml_depth(text) >= _depth(data)
