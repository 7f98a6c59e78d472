"""``triage score --ray``: a backlog scored on a Ray cluster, with Ray Data.

The driver reads the input (as ``triage score`` reads it: the same ids, the same
error records), checks the model on every node, drops the tickets the output
already holds (``--resume``), and hands the rest to Ray Data in blocks of
``--batch-size`` tickets. ``map_batches`` runs :class:`~triage.backlog.worker.TicketScorer`
on a fixed pool of actors (``--workers``, each ``--threads`` CPUs): each actor
loads the model once and keeps the pack's stable block resident. The driver
streams the scored blocks back and writes each ticket once.

Exactly once: an actor that dies loses only the block it was scoring; Ray Data
restarts the actor and runs that block again, and only completed blocks reach
the driver. The driver also keeps the key (ticket id and text sha256) of every
record written, so a ticket can never be written twice, whatever Ray retries.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from triage.backlog.output import RunSignature, WriteFailed, Writer, check_output, open_writer, read_existing
from triage.backlog.rows import BacklogRow, read_rows, thread_blocks
from triage.backlog.worker import ModelIdentity, NodeModelError, ScorerConfig, cores, probe, scorer_class
from triage.errors import InputError, TriageError
from triage.scoring.options import DEFAULT_READOUT, ScoreOptions
from triage.session import FitRequest, Session

if TYPE_CHECKING:
    from triage.domain.pack import Pack
    from triage.intake.columns import ColumnMap

DEFAULT_BATCH = 16
_ADDRESS = re.compile(r"^(auto|local|ray://.+|[\w.-]+:\d+)$")


@dataclass
class Summary:
    """What a backlog run did."""

    total: int = 0  # rows in the input
    skipped: int = 0  # already in the output (--resume)
    to_score: int = 0  # tickets sent to the workers
    returned: int = 0  # records the workers returned and that were written (results and failed tickets)
    scored: int = 0  # results written this run
    errors: int = 0  # error records written this run (bad rows and failed tickets)
    duplicates_dropped: int = 0  # records Ray delivered twice (never written twice)
    engine_ms: float = 0.0  # the engine's own time for the tickets scored (timing.total_ms)
    seconds: float = 0.0  # wall time from the first block sent to the last written
    workers: int = 0
    threads: int = 0
    stopped: bool = False

    @property
    def rate(self) -> float:
        """Tickets scored per second of wall time."""
        return self.scored / self.seconds if self.seconds else 0.0


OnBatch = Callable[[Summary], None]


@dataclass(frozen=True)
class RayJob:
    """Everything a backlog run needs, as plain values (the command line builds it; tests may too).

    Attributes:
        source: the input: a JSON Lines or Parquet file, a folder or a glob.
        pack: the criteria pack.
        options: the score options: ``ScoreOptions()``, the product's, with ``--criteria``.
        fits: the explicit head and calibration requests; the policy runs once the nodes
            have reported the model (:meth:`triage.session.Session.fits`).
        address: ``local`` (start a cluster), ``auto``, ``ray://HOST:10001`` or ``HOST:PORT``.
        output: where to write (``.parquet``: a folder of parts; else JSON Lines); None for stdout.
        model: ``--model`` (a catalog name or a path), or None for the config's / the default order.
        prompt_style: ``auto``, ``chat`` or ``plain``.
        n_ctx: the context size asked for, or None for the config's / the default.
        threads: llama.cpp threads per worker.
        workers: scoring actors, or None for the cluster's CPUs / threads.
        batch_size: tickets per batch, or None (see :func:`score_backlog`).
        resume: skip the tickets ``output`` already holds for this run's signature.
        config: the user's config (``load_config()``), for the model's default and n_ctx.
        columns: which columns of an export hold the text and the id (``--text-columns``, ``--id-column``).
    """

    source: str
    pack: Pack
    options: ScoreOptions
    fits: FitRequest = field(default_factory=FitRequest)
    address: str = "local"
    output: Path | None = None
    model: str | None = None
    prompt_style: str = "auto"
    n_ctx: int | None = None
    threads: int = 1
    workers: int | None = None
    batch_size: int | None = None
    resume: bool = False
    config: dict[str, object] = field(default_factory=dict)
    columns: ColumnMap | None = None  # the export's text and id columns (None: text, id)

    def __post_init__(self) -> None:
        for flag, value in (
            ("--workers", self.workers),
            ("--batch-size", self.batch_size),
            ("--threads", self.threads),
        ):
            if value is not None and value < 1:
                raise InputError(f"{flag} must be at least 1")
        if self.resume and self.output is None:
            raise InputError(
                "--resume needs --output", hint="resume continues the file or folder a stopped run was writing"
            )


def run_ray(job: RayJob, *, on_batch: OnBatch | None = None) -> int:
    """Score the backlog of ``job`` on Ray; returns the exit status (1 when a row failed).

    Raises:
        InputError: bad input; an output scored differently (with ``resume``); an explicit
            head or calibration that does not fit the model the nodes run.
        TriageError: Ray is not installed; a node cannot use the model (named).
    """
    if job.output is not None:
        from triage.store.outputs import check_not_inside

        check_not_inside(job.output, job.source, option="--output")  # it would read its own output next time
        check_output(job.output, resume=job.resume)  # before the cluster starts
    with _one_writer(job.output):
        return _run(job, on_batch)


@contextlib.contextmanager
def _one_writer(output: Path | None) -> Generator[None, None, None]:
    """Hold the output's lock for the whole run: a second run on the same output is refused, not merged."""
    if output is None:
        yield
        return
    from triage.store.outputs import OutputLock

    with OutputLock(output):
        yield


def _run(job: RayJob, on_batch: OnBatch | None) -> int:
    from triage.scoring.loader import engine_settings

    rows = read_rows(job.source, job.columns)
    spec, expected = model_spec(job.model, job.config)
    ray = _import_ray()
    owned = connect(ray, job.address)
    try:
        identity = check_nodes(ray, spec, expected, job.prompt_style)
        # The fits are chosen once, here, for what the nodes reported; every node scores with them (fixed fits of
        # its session). The nodes check a learned head's width against their model.
        fits = Session(None, model=identity, request=job.fits).fits(job.pack, job.options)
        for note in fits.notes:
            print(f"triage: {'' if note.applied else 'note: '}{note.text}", file=sys.stderr)
        calibration, head = fits.calibration, fits.head
        prompt_format = identity.format_for(DEFAULT_READOUT).id  # what each result record will say
        signature = RunSignature.of(
            identity.sha256,
            job.pack.hash,
            prompt_format,
            job.options,
            calibration.name if calibration else None,
            head.name if head else None,
        )
        n_ctx = engine_settings(job.n_ctx, None, job.config)["n_ctx"]
        scorer = ScorerConfig(
            spec,
            identity.sha256,
            job.pack,
            job.options,
            fits,
            n_ctx,
            job.threads,
            job.prompt_style,
        )
        summary = score_backlog(
            ray,
            rows,
            scorer,
            output=job.output,
            signature=signature,
            resume=job.resume,
            workers=job.workers,
            batch_size=job.batch_size,
            on_batch=on_batch,
        )
    finally:
        if owned:
            ray.shutdown()
    return 1 if summary.errors else 0


def parse_address(ray_arg: str, source: str | None) -> tuple[str, str]:
    """``--ray [ADDRESS]`` and the input FILE as (address, input).

    ``--ray`` takes an optional ADDRESS, so ``--ray tickets.jsonl`` means the input, not an address.

    Raises:
        InputError: no input file, or an ADDRESS that is not a Ray address.
    """
    address = ray_arg
    if source is None and address != "local" and not _ADDRESS.match(address) and Path(address).exists():
        address, source = "local", address
    if source in (None, "-"):
        raise InputError(
            "--ray reads its tickets from files",
            hint="give a JSON Lines or Parquet file, a folder or a glob: triage score INPUT --ray",
        )
    if not _ADDRESS.match(address):
        raise InputError(
            f"--ray {address}: not a Ray address",
            hint="use --ray alone (a local cluster), --ray auto, --ray ray://HOST:10001 or --ray HOST:PORT",
        )
    return address, source


def _import_ray() -> ModuleType:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise TriageError("--ray needs Ray, which is not installed", hint="pip install 'triage[ray]'") from None
    return ray


def connect(ray: ModuleType, address: str) -> bool:
    """Start a local cluster (one CPU per core) or join ``address``; True when we started it."""
    if ray.is_initialized():
        return False  # the caller's cluster (tests, notebooks)
    quiet = {"log_to_driver": False, "logging_level": logging.ERROR}
    if address == "local":
        ray.init(num_cpus=cores(), include_dashboard=False, **quiet)
        return True
    try:
        ray.init(address=address, **quiet)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:  # nothing answers there
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise TriageError(
            f"--ray {address}: no Ray cluster answers there ({first.split('  ')[0]})",
            hint="start one there (ray start --head), check the address, or use --ray alone for a local cluster",
        ) from None
    return True


def model_spec(requested: str | None, config: dict[str, object]) -> tuple[str, str | None]:
    """The model for every node (a catalog name or an absolute path) and the sha256 it must have.

    The sha256 is the catalog's pin for a catalog model, and the driver's own hash of
    a path model when the driver can read it; None leaves it to the nodes to agree.
    """
    from triage.environment import text
    from triage.model.catalog import load_catalog
    from triage.model.resolve import ENV_VAR, cached_sha256, resolve_model
    from triage.settings import Settings

    spec = next((s for s in (requested, text(ENV_VAR), Settings.of(config).model) if s and s.strip()), None)
    catalog = load_catalog()
    if not spec:
        ref = resolve_model(None, config=config)  # the driver's default model, by the usual order
        return (ref.name if ref.source == "catalog" else str(ref.path)), ref.sha256
    if spec in catalog.entries:
        return spec, catalog.entries[spec].sha256
    path = Path(spec).expanduser()
    if path.is_file():
        return str(path.resolve()), cached_sha256(path)
    return spec, None


def check_nodes(ray: ModuleType, spec: str, expected: str | None, prompt_style: str) -> ModelIdentity:
    """Check the model on every node that can run a worker (one task each, in parallel).

    Each node resolves the model (pulling a catalog model it lacks), hashes the file and
    reads the prompt format.

    Raises:
        NodeModelError: naming every node that cannot use the model or disagrees with the others.
    """
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
    if not nodes:
        raise TriageError("the Ray cluster has no node with a free CPU to run a worker")
    task = ray.remote(num_cpus=1, max_retries=0)(probe)
    refs = [
        task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
            spec, expected, prompt_style
        )
        for n in nodes
    ]
    reports = []
    for node, ref in zip(nodes, refs, strict=True):
        try:
            reports.append(ray.get(ref))
        except Exception as exc:  # the check crashed the worker (e.g. a llama.cpp build this CPU cannot run)
            first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
            reports.append(
                {
                    "ok": False,
                    "error": (
                        f"node {node.get('NodeManagerHostname', '?')} "
                        f"({node.get('NodeManagerAddress', '?')}): the model check failed: {first}"
                    ),
                }
            )
    bad = [r["error"] for r in reports if not r["ok"]]
    if bad:
        raise NodeModelError("; ".join(bad), hint="fix the model on the nodes named; nothing was scored")
    ids: list[ModelIdentity] = [r["identity"] for r in reports]
    one = ids[0]
    for other in ids[1:]:
        for what in ("sha256", "prompt_format", "triage_version"):
            if getattr(other, what) != getattr(one, what):
                raise NodeModelError(
                    f"node {other.node} has {what.replace('_', ' ')} "
                    f"{getattr(other, what)}, node {one.node} {getattr(one, what)}",
                    hint="every node must run the same model file and the same triage version; nothing was scored",
                )
    return one


def score_backlog(
    ray: ModuleType,
    rows: list[BacklogRow],
    scorer: ScorerConfig,
    *,
    output: Path | None,
    signature: RunSignature | None,
    resume: bool,
    workers: int | None,
    batch_size: int | None,
    on_batch: OnBatch | None = None,
) -> Summary:
    """Score ``rows`` on the cluster and write each ticket once; see the module docstring.

    ``batch_size`` None: :data:`DEFAULT_BATCH`, or less when that would leave workers idle.

    ``on_batch`` is called after each block is written (tests stop or disturb a run with it).
    """
    from triage.backlog.progress import BacklogProgress

    done = read_existing(output, signature).keys if (resume and output is not None and signature is not None) else set()
    summary = Summary(total=len(rows), skipped=sum(r.key in done for r in rows), threads=scorer.threads)
    todo = [r for r in rows if r.key not in done and r.error is None]
    bad = [r for r in rows if r.key not in done and r.error is not None]
    summary.to_score = len(todo)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    want = workers or max(1, cpus // scorer.threads)
    batch_size = batch_size or max(1, min(DEFAULT_BATCH, -(-len(todo) // want)))
    n_blocks = -(-len(todo) // batch_size)
    if want * scorer.threads > cpus:  # Ray would wait for CPUs that never come
        raise InputError(
            f"{want} worker(s) × --threads {scorer.threads} need "
            f"{want * scorer.threads} CPUs; the Ray cluster has {cpus}",
            hint=(
                "lower --workers or --threads (llama.cpp threads spin: more threads than cores slow every worker down)"
            ),
        )
    summary.workers = max(1, min(want, n_blocks or 1))
    if summary.skipped:
        print(
            f"triage: resuming {output}: {summary.skipped} of {summary.total} "
            f"rows are already there; {len(todo) + len(bad)} to go",
            file=sys.stderr,
        )
    writer = open_writer(output, signature, resume=resume)
    written = set(done)
    bad_keys = {r.key for r in bad}
    progress = BacklogProgress(len(todo), summary)

    def write(records: list[tuple[str, dict[str, object]]]) -> None:
        try:
            writer.write(records)
        except WriteFailed as exc:  # what is not in the output is not counted as scored
            raise _not_written(exc, summary, bad_keys, output) from None

    try:
        if bad:
            for row in bad:
                print(f"triage: error: {row.error}", file=sys.stderr)
            summary.errors += len(bad)
            write([(r.key, r.error_record()) for r in bad])
            written.update(r.key for r in bad)
        if not todo:
            return summary
        with progress, contextlib.closing(_scored_blocks(ray, todo, scorer, summary.workers, batch_size)) as blocks:
            # closing(): a stopped run shuts Ray Data's executor down now, releasing its actors.
            start = time.monotonic()
            for batch in blocks:
                fresh = []
                for key, text in zip(batch["key"].to_pylist(), batch["record"].to_pylist(), strict=True):
                    if key in written:
                        summary.duplicates_dropped += 1
                        continue
                    written.add(key)
                    record = json.loads(text)
                    fresh.append((key, record))
                    summary.returned += 1
                    _count(record, summary, progress)
                write(fresh)
                summary.seconds = time.monotonic() - start
                progress.advance(len(fresh))
                if on_batch is not None:
                    on_batch(summary)
    except KeyboardInterrupt:
        summary.stopped = True
        raise
    finally:
        try:
            _close(writer, summary, bad_keys, output)
        finally:
            progress.report(output)
    return summary


def _close(writer: Writer, summary: Summary, bad_keys: set[str], output: Path | None) -> None:
    """Close the writer; a last part that cannot be written is uncounted and said (unless an error is on its way)."""
    on_its_way = sys.exc_info()[1]  # called from a finally: the error that stopped the run, if one did
    try:
        writer.close()
    except WriteFailed as exc:
        failure = _not_written(exc, summary, bad_keys, output)
        if on_its_way is None:
            raise failure from None


def _not_written(exc: WriteFailed, summary: Summary, bad_keys: set[str], output: Path | None) -> TriageError:
    """Take the records the output does not hold out of the summary; the error that says what it holds."""
    for key, record in exc.lost:
        if key in bad_keys:
            summary.errors -= 1
            continue
        summary.returned -= 1
        if "schema" in record:
            summary.scored -= 1
            summary.engine_ms -= float((record.get("timing") or {}).get("total_ms") or 0.0)
        else:
            summary.errors -= 1
    where = output if output is not None else "standard output"
    held = f"{where} holds {exc.written} whole record(s) from this run"
    return TriageError(
        f"the output could not be written ({exc.reason}); "
        + (held if exc.whole else f"{held}, and its last record may be cut where it stopped"),
        hint="free some space (or raise the file size limit), then run the same command with --resume",
    )


def _count(record: dict[str, Any], summary: Summary, progress: Any) -> None:
    if "schema" in record:
        summary.scored += 1
        summary.engine_ms += float((record.get("timing") or {}).get("total_ms") or 0.0)
        for w in record.get("warnings") or []:
            progress.say(f"triage: warning: ticket {record.get('ticket_id')}: {w}")
    else:
        summary.errors += 1
        progress.say(f"triage: error: ticket {record.get('ticket_id')}: {record.get('error')}")


def _scored_blocks(
    ray: ModuleType, todo: list[BacklogRow], scorer: ScorerConfig, workers: int, batch_size: int
) -> Generator[Any, None, None]:
    """The scored blocks as Ray Data delivers them (completion order), one per input block."""
    import pyarrow as pa

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # ours is the one progress line
    for name in ("enable_operator_progress_bars", "print_on_execution_start"):
        if hasattr(ctx, name):
            setattr(ctx, name, False)
    for name in ("ray", "ray.data"):
        logging.getLogger(name).setLevel(logging.ERROR)  # errors reach the user as exceptions
    schema = pa.schema(
        [
            ("key", pa.string()),
            ("ticket_id", pa.string()),
            ("text", pa.string()),
            ("messages", pa.string()),
            ("line", pa.int64()),
            ("source", pa.string()),
        ]
    )
    # One block per batch: a task is one batch, so a dead actor loses only that batch. A ticket id's rows
    # (a thread's turns) share a block, in input order, so one worker re-scores them from its kept state.
    blocks = [
        pa.Table.from_pylist(
            [
                {
                    "key": r.key,
                    "ticket_id": r.ticket_id,
                    "text": r.text,
                    "messages": r.messages,
                    "line": r.line,
                    "source": r.source,
                }
                for r in block
            ],
            schema=schema,
        )
        for block in thread_blocks(todo, batch_size)
    ]
    scored = ray.data.from_arrow(blocks).map_batches(
        scorer_class(scorer),
        batch_size=batch_size,
        batch_format="pyarrow",
        # One block at a time per actor: a queued block waits for a free actor, not behind a busy one.
        compute=ray.data.ActorPoolStrategy(size=workers, max_tasks_in_flight_per_actor=1),
        num_cpus=scorer.threads,
    )
    yield from ray_results(iter(scored.iter_batches(batch_size=None, batch_format="pyarrow")))


def ray_results(it: Iterator[Any]) -> Iterator[Any]:
    """Each result of a Ray iterator, a worker's error raised as the user should read it (:func:`_ray_failure`);
    the iterator is closed when this is."""
    try:
        while True:
            try:
                item = next(it)
            except StopIteration:
                return
            except Exception as exc:  # Ray wraps a worker's error in its own types
                raise _ray_failure(exc) from exc
            yield item
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()


def _ray_failure(exc: BaseException) -> TriageError:
    """A Ray error as the user should read it: a node's model problem by name, else its first line."""
    text = str(exc)
    m = re.search(r"NodeModelError: (node .+)", text)
    if m:
        return NodeModelError(m.group(1).strip(), hint="fix the model on that node; the job was stopped")
    first = next((line for line in text.splitlines() if line.strip()), type(exc).__name__)
    return TriageError(
        f"the Ray job failed: {first}",
        hint="see the Ray logs (/tmp/ray/session_latest/logs) for the worker's traceback",
    )
