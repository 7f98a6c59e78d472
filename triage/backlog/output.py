"""The backlog's output, written so that a ticket is never in it twice, and read back to resume.

Two forms, chosen by the output's name:

* JSON Lines (any name but ``*.parquet``; or standard output): one record a line,
  flushed as each batch arrives. A run stopped mid-line leaves a partial last line,
  which ``--resume`` cuts off (that ticket is scored again).
* Parquet (``*.parquet``): a folder of part files, as Ray and Spark write them. A part
  is written under a temporary name and renamed when complete, so a stopped run
  leaves only whole parts; tickets in the part being filled are scored again.

A write that fails (a full disk, a file size limit) leaves only whole records: a JSON
Lines file is cut back to the end of the last whole batch, a Parquet part's temporary
file is removed. The writer then raises :class:`WriteFailed` with the records that
are not in the output, so that the run reports what the output holds, not what was
scored.

Beside the output, ``run.json`` (``OUT.triage-run.json``, or ``_triage_run.json`` in
a Parquet folder) records what the results were scored with: model sha256, pack
hash, prompt format, every score option and the calibration. ``--resume`` goes on
only when the new run has the same, and otherwise stops, naming what differs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from triage import gate
from triage.backlog.rows import record_key
from triage.bounded import Bounded, loads_json
from triage.errors import InputError, TriageError
from triage.scoring.options import PRODUCT_READ, ScoreOptions
from triage.store.files import write_json_atomic

if TYPE_CHECKING:
    import pyarrow as pa

RUN_SCHEMA = "triage.backlog-run/1"
# Options a run.json written by an earlier triage may hold that ScoreOptions no longer has, with the
# value every such run scored with: with it, the run resumes as the same run (serial's way back to the
# prefix left the options when its restore moved to bench, now triage.lab.restore); any other value differs.
RETIRED_OPTIONS: dict[str, object] = {
    "strategy": "truncate",
    # the lab's options left ScoreOptions (triage.lab.options); every backlog run scored with these
    "mode": "fanout",
    "orderings": "cyclic",
    "prior": False,
    "readout": "label",
}
PART_ROWS = 1000  # rows per Parquet part (and at most a minute between parts)
PART_SECONDS = 60.0
ERROR_COLUMNS = ("ticket_id", "line", "error", "source", "ticket_sha256")  # an error record's fields


@dataclass(frozen=True)
class RunSignature:
    """What a backlog's results were scored with; ``--resume`` needs the same."""

    model_sha256: str
    pack_hash: str
    prompt_format: str
    options: dict[str, object]
    calibration: str | None
    # What a result record of this run says of its options (orderings as asked, readout...).
    record_options: dict[str, object] = field(default_factory=dict, compare=False)
    head: str | None = None  # the learned head's name (absent from run.json files written before heads)

    @classmethod
    def of(
        cls,
        model_sha256: str,
        pack_hash: str,
        prompt_format: str,
        options: ScoreOptions,
        calibration: str | None,
        head: str | None = None,
    ) -> RunSignature:
        """The signature of these scoring options (every field of ``ScoreOptions``, whatever they are)."""
        opts = json.loads(json.dumps(dataclasses.asdict(options), default=list))
        read = PRODUCT_READ  # the product's reading, as every result record says it
        in_record: dict[str, object] = {"orderings": read.orderings, "prior": read.prior, "readout": read.readout}
        return cls(model_sha256, pack_hash, prompt_format, opts, calibration, in_record, head)

    def to_dict(self) -> dict[str, object]:
        """The ``run.json`` form."""
        d = dataclasses.asdict(self)
        d.pop("record_options")
        return {"schema": RUN_SCHEMA, **d}

    def differences(self, other: Mapping[str, object]) -> list[str]:
        """What ``other`` (a ``run.json``) has that differs from this signature."""
        mine = self.to_dict()
        mine.pop("schema")
        diffs = []
        for k, v in mine.items():
            if k == "options":
                v = self.options
                given = other.get("options") or {}
                if not isinstance(given, dict):
                    raise TypeError(f"its options are {type(given).__name__}, not an object")
                theirs = {
                    o: x for o, x in given.items() if o in v or o not in RETIRED_OPTIONS or RETIRED_OPTIONS[o] != x
                }
                diffs += [
                    f"option {o}: {theirs.get(o)!r} → {v.get(o)!r}"
                    for o in sorted(set(v) | set(theirs))
                    if theirs.get(o) != v.get(o)
                ]
            elif k == "head" and v is None and "head" not in other:
                continue  # a run.json from before learned heads: none was applied
            elif other.get(k) != v:
                diffs.append(f"{k.replace('_', ' ')}: {other.get(k)} → {v}")
        return diffs

    def record_differences(self, record: Mapping[str, object]) -> list[str]:
        """How a result record differs from this signature in the fields it carries."""
        diffs = []
        if _inner(record, "model", "sha256") != self.model_sha256:
            diffs.append(f"model sha256 {str(_inner(record, 'model', 'sha256'))[:12]}… → {self.model_sha256[:12]}…")
        if _inner(record, "pack", "hash") != self.pack_hash:
            diffs.append(f"pack hash {_inner(record, 'pack', 'hash')} → {self.pack_hash}")
        if record.get("prompt_format") != self.prompt_format:
            diffs.append(f"prompt format {record.get('prompt_format')} → {self.prompt_format}")
        for opt, want in self.record_options.items():
            if opt in record and record[opt] != want:
                diffs.append(f"option {opt}: {record[opt]!r} → {want!r}")
        if record.get("calibration") != self.calibration:
            diffs.append(f"calibration {record.get('calibration')} → {self.calibration}")
        if self.head is not None and record.get("head") not in (None, self.head):
            diffs.append(f"learned head {record.get('head')} → {self.head}")
        return diffs


def _inner(record: Mapping[str, object], key: str, name: str) -> object:
    """``record[key][name]``, None where ``record[key]`` is missing or empty.

    Raises:
        AttributeError: ``record[key]`` is set but not an object (as ``.get`` on it would).
    """
    outer = record.get(key) or {}
    if not isinstance(outer, dict):
        raise AttributeError(f"{key} is {type(outer).__name__}, not an object")
    return outer.get(name)


class WriteFailed(TriageError):
    """The output could not be written; ``lost`` are the records (key, record) that are not in it.

    Everything the writer had written before is whole (``written`` records this run).
    """

    def __init__(self, reason: str, lost: list[tuple[str, dict[str, Any]]], written: int, whole: bool) -> None:
        super().__init__(f"the output could not be written ({reason})")
        self.reason = reason
        self.lost = lost
        self.written = written
        self.whole = whole  # False: a pipe or a file that could not be cut back may end in a partial record


class Writer(Protocol):
    """Where records go; ``write`` is called once per batch."""

    def write(self, records: Iterable[tuple[str, dict[str, object]]]) -> None: ...

    def close(self) -> None: ...


def is_parquet(path: str | None) -> bool:
    """True when ``path`` names a Parquet output (a folder of parts)."""
    return bool(path) and str(path).lower().rstrip("/").endswith(".parquet")


def run_file(path: Path) -> Path:
    """Where ``run.json`` of output ``path`` lives."""
    return path / "_triage_run.json" if is_parquet(str(path)) else path.with_name(path.name + ".triage-run.json")


@dataclass
class Existing:
    """What an output already holds."""

    keys: set[str] = field(default_factory=set)
    results: int = 0
    errors: int = 0


def read_existing(path: Path, signature: RunSignature) -> Existing:
    """The keys an output already holds, after checking that it was scored like this run.

    Also repairs a JSON Lines file whose last line a stopped run left incomplete.

    Raises:
        InputError: the output was scored with another model, pack, prompt format or
            options (naming what differs), or it cannot be read.
    """
    found = Existing()
    if not path.exists():
        return found
    recorded = run_file(path)
    if recorded.exists():
        try:
            run = gate.load_json(recorded, "run-record")
            if not isinstance(run, dict):
                raise TypeError(f"it holds a JSON {type(run).__name__}, not an object")
            diffs = signature.differences(run)
        except OSError as exc:
            raise InputError(
                f"cannot read {recorded}: {exc.strerror or exc}", hint="move it away to start afresh"
            ) from None
        except (ValueError, AttributeError, TypeError) as exc:  # not JSON, nested too deep, not a run record
            raise InputError(
                f"cannot read {recorded}: {exc}",
                hint="it is not the run record triage wrote; move it away to start afresh",
            ) from None
        if diffs:
            raise _mismatch(path, diffs)
    for n, record in enumerate(_parquet_records(path) if is_parquet(str(path)) else _jsonl_records(path), 1):
        if "schema" in record:
            diffs = signature.record_differences(record)
            if diffs:
                raise _mismatch(path, diffs, f"record {n} (ticket {record.get('ticket_id')})")
            found.results += 1
        else:
            found.errors += 1
        key = record_key(record)
        if key is not None:
            found.keys.add(key)
    return found


def _mismatch(path: Path, diffs: list[str], where: str = "") -> InputError:
    return InputError(
        f"{path} {where + ' ' if where else ''}was scored differently, so --resume cannot continue it: "
        + "; ".join(diffs),
        hint="resume with the options of that run, or write to a new --output",
    )


def _jsonl_records(path: Path) -> Iterable[dict[str, object]]:
    try:
        data = gate.read_bytes(path, "run-output")  # a FIFO, device or folder is refused, never waited on
    except OSError as exc:
        raise InputError(f"cannot resume {path}: {exc.strerror or exc}", hint="write to a new --output") from None
    end = data.rfind(b"\n") + 1
    if end < len(data):  # a stopped run's half line: cut it off, that ticket is scored again
        with path.open("r+b") as fh:
            fh.truncate(end)
        print(
            f"triage: note: {path} ended in an incomplete line (a stopped "
            "run); it was removed and that ticket will be scored again",
            file=sys.stderr,
        )
    for n, raw in enumerate(data[:end].split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            record = loads_json(raw.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, Bounded) as exc:
            raise InputError(f"{path} line {n} is not a JSON record ({exc}); cannot resume it safely") from None
        if isinstance(record, dict):
            yield record


def _parquet_records(path: Path) -> Iterable[dict[str, object]]:
    import pyarrow.parquet as pq

    for part in sorted(path.glob("part-*.parquet")):
        try:
            with gate.open_binary(part, "run-output") as fh:  # the descriptor the gate checked
                table = pq.read_table(fh)
        except OSError as exc:
            raise InputError(f"cannot resume {path}: {part.name}: {exc.strerror or exc}") from None
        for record in table.to_pylist():
            yield _from_parquet(record)


def _from_parquet(record: dict[str, object]) -> dict[str, object]:
    # Every part carries the error columns; a result's are null, and an error row's result columns.
    if record.get("schema"):
        return {k: v for k, v in record.items() if v is not None or k not in ERROR_COLUMNS}
    return {k: record.get(k) for k in ERROR_COLUMNS if record.get(k) is not None or k in ("ticket_id", "line")}


def check_output(path: Path, *, resume: bool) -> None:
    """Refuse to write over an output that holds records, unless resuming it.

    Raises:
        InputError: ``path`` holds something and ``resume`` is off.
    """
    if (
        path.exists()
        and not resume
        and (path.is_dir() and any(path.iterdir()) or path.is_file() and path.stat().st_size)
    ):
        raise InputError(f"{path} already exists", hint="pass --resume to continue it, or choose a new --output")


def open_writer(path: Path | None, signature: RunSignature | None, *, resume: bool) -> Writer:
    """A writer for ``path`` (None: standard output, JSON Lines).

    Raises:
        InputError: the output exists and ``resume`` is off.
    """
    if path is None:
        return JsonlWriter(sys.stdout)
    check_output(path, resume=resume)
    if signature is not None:
        write_json_atomic(run_file(path), {**signature.to_dict(), "updated_at": time.time()})  # creates the folder
    if is_parquet(str(path)):
        return ParquetWriter(path)
    return JsonlWriter(path.open("a", encoding="utf-8"), own=True)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (a short write is followed by the rest, or its error)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class JsonlWriter:
    """One JSON record a line, flushed per batch; a failed batch is taken back whole (see the module)."""

    def __init__(self, fh: IO[str], *, own: bool = False) -> None:
        self._fh = fh
        self._own = own
        self.written = 0  # records this writer wrote, all whole
        self.failed: str | None = None

    def write(self, records: Iterable[tuple[str, dict[str, object]]]) -> None:
        """Append records and flush them.

        Raises:
            WriteFailed: the batch could not be written; a regular file was cut back to before it.
        """
        batch = list(records)
        if not batch:
            return
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for _, r in batch)
        start = self._regular_end()
        try:
            if start is None:  # a pipe or a terminal
                self._fh.write(text)
                self._fh.flush()
            else:  # a regular file: our own writes, so that a short write is seen, never left buffered
                self._fh.flush()
                write_all(self._fh.fileno(), text.encode("utf-8"))
        except BrokenPipeError:
            raise
        except OSError as exc:
            self.failed = exc.strerror or str(exc)
            raise WriteFailed(self.failed, batch, self.written, self._cut_back(start)) from None
        self.written += len(batch)

    def _regular_end(self) -> int | None:
        try:
            st = os.fstat(self._fh.fileno())
        except (OSError, ValueError, AttributeError):
            return None
        import stat

        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def _cut_back(self, start: int | None) -> bool:
        if start is None:
            return False
        try:
            os.ftruncate(self._fh.fileno(), start)
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Flush (and close a file this writer opened)."""
        if self.failed is not None:
            if self._own:
                try:
                    self._fh.close()
                except OSError:
                    pass
            return
        self._fh.flush()
        if self._own:
            os.fsync(self._fh.fileno())
            self._fh.close()


class ParquetWriter:
    """Parts of up to :data:`PART_ROWS` rows, each renamed into place when complete."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._run = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self._n = 0
        self._buffer: list[tuple[str, dict[str, object]]] = []
        self._since = time.monotonic()
        self.written = 0  # records in the parts this writer completed
        self.failed: str | None = None

    def write(self, records: Iterable[tuple[str, dict[str, object]]]) -> None:
        """Buffer records; write a part when it is full or a minute old.

        Raises:
            WriteFailed: a part could not be written; its temporary file is removed, and
                ``lost`` holds every record it had buffered.
        """
        self._buffer.extend(records)
        if len(self._buffer) >= PART_ROWS or time.monotonic() - self._since >= PART_SECONDS:
            self._flush()

    def close(self) -> None:
        """Write what is buffered (those tickets are scored; a stop keeps them)."""
        if self.failed is None:
            self._flush()

    def _flush(self) -> None:
        if not self._buffer:
            return
        import pyarrow.parquet as pq

        self._n += 1
        final = self.folder / f"part-{self._run}-{self._n:05d}.parquet"
        tmp = self.folder / f".{final.name}.tmp"
        try:
            pq.write_table(records_table([r for _, r in self._buffer]), tmp)
            os.replace(tmp, final)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            lost, self._buffer = self._buffer, []
            self.failed = exc.strerror or str(exc)
            raise WriteFailed(self.failed, lost, self.written, True) from None
        self.written += len(self._buffer)
        self._buffer = []
        self._since = time.monotonic()


def records_table(records: list[dict[str, object]]) -> pa.Table:
    """Records as an Arrow table: nested columns as structs and lists; error columns always present.

    A column with no value in a part (``calibration`` unset, no warnings) is typed as
    text rather than null, so that every part of an output has the same schema.
    """
    import pyarrow as pa

    rows = [{**r, **{k: r.get(k) for k in ERROR_COLUMNS}} for r in records]
    table = pa.Table.from_struct_array(pa.array(rows))
    schema = pa.schema([pa.field(f.name, _no_null(f.type) if f.name != "line" else pa.int64()) for f in table.schema])
    return table.cast(schema)


def _no_null(t: pa.DataType) -> pa.DataType:
    import pyarrow as pa

    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_list(t):
        return pa.list_(_no_null(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _no_null(f.type)) for f in t])
    return t
