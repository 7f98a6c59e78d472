"""The one output guard: never an input, never over a file without --force, one writer, a kept backup."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from triage.errors import InputError
from triage.store.outputs import OutputLock, check_not_inside, check_output, replace_keeping_backup


def test_refuses_an_input_however_it_is_named(tmp_path: Path) -> None:
    src = tmp_path / "train.jsonl"
    src.write_text("{}\n", encoding="utf-8")
    link = tmp_path / "link.jsonl"
    link.symlink_to(src)
    hard = tmp_path / "hard.jsonl"
    os.link(src, hard)
    for name in (src, link, hard, tmp_path / "." / "train.jsonl"):
        with pytest.raises(InputError, match="never writes over a file it reads"):
            check_output(name, inputs=[src], force=True)
    assert src.read_text(encoding="utf-8") == "{}\n"


def test_existing_file_needs_force_and_a_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "cal.json"
    assert check_output(out) == out  # new: fine
    out.write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match="exists") as info:
        check_output(out, what="calibration")
    assert "--force" in (info.value.hint or "")
    assert check_output(out, force=True) == out
    with pytest.raises(InputError, match="is a folder"):
        check_output(tmp_path, force=True)


def test_output_inside_the_input_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "backlog").mkdir()
    with pytest.raises(InputError, match="inside the input"):
        check_not_inside(tmp_path / "backlog" / "s.jsonl", tmp_path / "backlog")
    with pytest.raises(InputError, match="inside the input"):
        check_not_inside(tmp_path / "backlog" / "s.jsonl", str(tmp_path / "backlog" / "*.jsonl"))
    check_not_inside(tmp_path / "s.jsonl", tmp_path / "backlog")
    check_not_inside(tmp_path / "backlog" / "s.parquet", str(tmp_path / "backlog" / "*.jsonl"))


def test_backup_of_the_replaced_file(tmp_path: Path) -> None:
    path = tmp_path / "head.npz"
    tmp = tmp_path / ".head.tmp"
    tmp.write_bytes(b"one")
    assert replace_keeping_backup(tmp, path) is None
    tmp.write_bytes(b"two")
    backup = replace_keeping_backup(tmp, path)
    assert path.read_bytes() == b"two" and backup is not None and backup.read_bytes() == b"one"


def test_second_writer_is_refused_while_the_first_holds_the_lock(tmp_path: Path) -> None:
    out = tmp_path / "same.jsonl"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom triage.store.outputs import OutputLock\n"
            f"with OutputLock({str(out)!r}):\n    print('held', flush=True)\n    time.sleep(30)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(InputError, match="another triage is writing"):
            with OutputLock(out):
                pass
    finally:
        holder.kill()
        holder.wait(timeout=30)
    with OutputLock(out):  # free again once the holder is gone
        pass
