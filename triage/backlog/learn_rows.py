"""``triage learn --ray``: the training rows scored on a Ray cluster; the fit stays on this machine.

A head fitted on numbers computed one way and applied to numbers computed another way loses
accuracy, so the workers compute exactly what ``triage learn`` computes locally: each actor
loads the model with the driver's context size and prompt format and scores every ticket
through :class:`triage.learning.scorer.Scorer` (the code local scoring runs: the label
readout, fanout, the answer-position features, the same cut rule), with no cache of its own.
Before any ticket is sent, each actor's cache key (model sha256, pack hash, prompt format,
context size, mode, read position and attention kernels) must equal the driver's, or the run
stops and says what differs.

The driver keeps the readout cache: rows it already holds (or the history kept) are not sent
to Ray, and every scored ticket is stored in the cache as its batch comes back, so a stopped
run resumes without scoring them again. The model check on every node, the cluster start or
join and the error messages are ``triage score --ray``'s (:mod:`triage.backlog.ray_score`).

Nothing here imports Ray at module level; :func:`sets_scorer` imports it only with ``--ray``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from triage.errors import InputError, TriageError

if TYPE_CHECKING:
    from ray.actor import ActorHandle
    from rich.console import Console

    from triage.domain.pack import Pack
    from triage.domain.ticket import Ticket
    from triage.evaluation.labelled_runs import ScoringRun
    from triage.learning.cache import CacheKey, Outcome
    from triage.learning.labelled import LabelledRow
    from triage.learning.scorer import Scorer
    from triage.scoring.engine import Engine


class SetsScorer(Protocol):
    """Scores named row sets as :func:`triage.evaluation.labelled_runs.score_sets` does (its arguments, its result)."""

    def __call__(
        self,
        engine: Engine,
        pack: Pack,
        parts: Sequence[tuple[str, Sequence[LabelledRow]]],
        console: Console,
        readout: str = ...,
        *,
        features: bool = ...,
        known: dict[str, Outcome] | None = ...,
        prior: bool = ...,
        read: str = ...,
    ) -> ScoringRun: ...


DEFAULT_BATCH = 16  # tickets per batch (what a dead worker loses), fewer when that would leave workers idle


def sets_scorer(args: argparse.Namespace, *, calls: int = 1) -> SetsScorer:
    """What ``triage learn`` scores its row sets with: :func:`triage.evaluation.labelled_runs.score_sets`, or,
    with ``--ray``, the same on a Ray cluster (:class:`RaySets`).

    ``calls``: how many times learn will score (two with ``--read auto``); the cluster this
    starts is shut down after the last. Checked here, before the model loads: the flags, and
    that Ray is installed. ``--ray FILE`` (an existing file that is no Ray address) is read as
    ``--ray`` and a labelled file, as ``triage score --ray FILE`` is.

    Raises:
        InputError: ``--workers`` or ``--batch-size`` without ``--ray``, or below 1; an ADDRESS
            that is not a Ray address.
        TriageError: Ray is not installed.
    """
    ray_arg = getattr(args, "ray", None)
    if ray_arg is None:
        for flag, given in (("--workers", args.workers), ("--batch-size", args.batch_size)):
            if given is not None:
                raise InputError(
                    f"{flag} works only with --ray", hint="add --ray to score the training rows on a Ray cluster"
                )
        from triage.evaluation.labelled_runs import score_sets

        return score_sets
    from triage.backlog.ray_score import _ADDRESS, _import_ray

    address = ray_arg
    if address != "local" and not _ADDRESS.match(address):
        if not Path(address).exists():
            raise InputError(
                f"--ray {address}: not a Ray address",
                hint="use --ray alone (a local cluster), --ray auto, --ray ray://HOST:10001 or --ray HOST:PORT",
            )
        args.labelled = [address, *args.labelled]  # `learn --ray FILE`: the file is the input
        address = "local"
    for flag, value in (("--workers", args.workers), ("--batch-size", args.batch_size), ("--threads", args.threads)):
        if value is not None and value < 1:
            raise InputError(f"{flag} must be at least 1")
    _import_ray()  # now, not after the model has loaded
    return RaySets(
        address=address,
        model=args.model,
        prompt_style=args.prompt,
        threads=1 if args.threads is None else args.threads,
        workers=args.workers,
        batch_size=args.batch_size,
        calls=calls,
    )


class _NoCache:
    """What a worker's :class:`~triage.learning.scorer.Scorer` reads from and writes to: nothing.

    The driver holds the readout cache; a worker only computes."""

    hits = 0
    misses = 0

    def get(self, *args: object, **kw: object) -> None:
        return None

    def put(self, *args: object) -> None:
        pass

    def put_features(self, *args: object) -> None:
        pass


class RowScorer:
    """A Ray actor: one engine, tickets scored one by one as ``triage learn`` scores them locally.

    Args:
        model: a catalog name or a path every node can read.
        expected_sha256: the driver's model sha256.
        n_ctx: the driver's context size (it decides where a long ticket is cut).
        threads: llama.cpp threads.
        prompt_style: ``auto``, ``chat`` or ``plain`` (``--prompt``).
        pack: the criteria pack.
    """

    def __init__(
        self, model: str, expected_sha256: str, n_ctx: int, threads: int, prompt_style: str, pack: Pack
    ) -> None:
        from triage.backlog.worker import NodeModelError, ensure_model, node_name
        from triage.scoring.loader import load_engine

        ensure_model(model, expected_sha256)
        self.engine = load_engine(model, n_ctx=n_ctx, threads=threads, prompt_style=prompt_style)
        if self.engine.sha256 != expected_sha256:
            raise NodeModelError(
                f"node {node_name()}: model {model} loaded with sha256 {self.engine.sha256}, expected {expected_sha256}"
            )
        self.pack = pack
        self._scorers: dict[tuple[str, str, bool], Scorer] = {}

    def _scorer(self, readout: str, read: str, features: bool) -> Scorer:
        from triage.lab.scorer import LabScorer

        key = (readout, read, features)
        if key not in self._scorers:
            scorer = LabScorer(self.engine, self.pack, _NoCache(), readout, read)  # type: ignore[arg-type]
            scorer.features = features and readout == "label"
            self._scorers[key] = scorer
        return self._scorers[key]

    def key(self, readout: str, read: str, features: bool) -> tuple[str, CacheKey]:
        """(this node, the cache key its outcomes would be stored under): the driver compares it with its own."""
        from triage.backlog.worker import node_name

        return node_name(), self._scorer(readout, read, features).key

    def score(self, tickets: list[Ticket], readout: str, read: str, features: bool) -> list[tuple[str, Outcome | str]]:
        """``[(ticket sha256, Outcome or the error message)]`` for ``tickets``, in order."""
        scorer = self._scorer(readout, read, features)
        out: list[tuple[str, Outcome | str]] = []
        for ticket in tickets:
            try:
                outcome, _ = scorer.outcome(ticket)
            except TriageError as exc:
                out.append((ticket.sha256, exc.message))
            else:
                out.append((ticket.sha256, outcome))
        return out


def _differences(mine: CacheKey, theirs: CacheKey) -> str:
    """What differs between two cache keys, in words."""
    names = {
        "model_sha256": "model sha256",
        "pack_hash": "pack hash",
        "prompt_format": "prompt format",
        "n_ctx": "context size",
        "orderings": "mode, read position and attention",
    }
    return "; ".join(
        f"{label} {getattr(theirs, f)!r} against this machine's {getattr(mine, f)!r}"
        for f, label in names.items()
        if getattr(mine, f) != getattr(theirs, f)
    )


@dataclass(frozen=True)
class _Returned:
    """What the Ray workers returned (by ticket sha256: an outcome, or the message of a ticket that failed), asked
    as :func:`triage.learning.scorer.score_rows` asks a scorer: so rows are assembled as a local run's are."""

    have: dict[str, Outcome | str]

    def outcome(self, ticket: Ticket) -> tuple[Outcome, bool]:
        out = self.have[ticket.sha256]
        if isinstance(out, str):
            raise TriageError(out)
        return out, False


@dataclass
class RaySets:
    """:func:`triage.evaluation.labelled_runs.score_sets` with the misses scored on Ray (see the module docstring).

    Called as ``score_sets`` is. The first call starts (``local``) or joins the cluster, checks
    the model on every node and starts the actors; they stay for the next call and are
    released after the ``calls``-th, or at the first failure.
    """

    address: str = "local"
    model: str | None = None
    prompt_style: str = "auto"
    threads: int = 1
    workers: int | None = None
    batch_size: int | None = None
    calls: int = 1
    done: int = 0  # calls made
    sent: int = 0  # tickets sent to the workers, over every call
    _ray: ModuleType | None = None  # the ray module, once the cluster is joined
    _owned: bool = False
    _actors: list[ActorHandle[RowScorer]] = field(default_factory=list)

    def __call__(
        self,
        engine: Engine,
        pack: Pack,
        parts: Sequence[tuple[str, Sequence[LabelledRow]]],
        console: Console,
        readout: str = "label",
        *,
        features: bool = False,
        known: dict[str, Outcome] | None = None,
        prior: bool = True,
        read: str = "tail",
    ) -> ScoringRun:
        self.done += 1
        try:
            return self._score(engine, pack, parts, console, readout, features, known, prior, read)
        except BaseException:
            self.close()
            raise
        finally:
            if self.done >= self.calls:
                self.close()

    def close(self) -> None:
        """Release the actors, and the cluster when this started it."""
        ray, self._ray = self._ray, None
        if ray is None:
            return
        for actor in self._actors:
            try:
                ray.kill(actor)
            except Exception:  # already gone
                pass
        self._actors = []
        if self._owned:
            ray.shutdown()

    def _start(self, engine: Engine, pack: Pack, todo: int) -> ModuleType:
        """Join or start the cluster, check the model on every node, start the actors; returns the ray module."""
        from triage.backlog.ray_score import _import_ray, check_nodes, connect, model_spec
        from triage.store.config import load_config

        ray: ModuleType = _import_ray()
        spec, expected = model_spec(self.model, load_config())
        self._owned = connect(ray, self.address)  # a cluster that does not answer is said in one line
        self._ray = ray
        identity = check_nodes(ray, spec, expected, self.prompt_style)
        if identity.sha256 != engine.sha256:
            raise TriageError(
                f"the Ray nodes run model {spec} with sha256 {identity.sha256}, this machine's model is "
                f"{engine.sha256}: a head must be fitted on the numbers of the model it is applied with",
                hint="give --model a file or catalog name that is the same on every node",
            )
        cpus = int(ray.cluster_resources().get("CPU", 1))
        want = self.workers or max(1, cpus // self.threads)
        if want * self.threads > cpus:  # Ray would wait for CPUs that never come
            raise InputError(
                f"{want} worker(s) × --threads {self.threads} need {want * self.threads} CPUs; the Ray cluster has "
                f"{cpus}",
                hint="lower --workers or --threads (llama.cpp threads spin: more threads than cores slow every worker "
                "down)",
            )
        batch = self.batch_size or DEFAULT_BATCH
        want = max(1, min(want, -(-todo // batch)))  # no actor that would get no batch
        actor = ray.remote(num_cpus=self.threads, max_restarts=2, max_task_retries=2)(RowScorer)
        self._actors = [
            actor.remote(spec, engine.sha256, engine.n_ctx, self.threads, self.prompt_style, pack) for _ in range(want)
        ]
        return ray

    def _check_keys(self, ray: ModuleType, mine: CacheKey, readout: str, read: str, features: bool) -> None:
        from triage.backlog.ray_score import _ray_failure

        try:
            keys = ray.get([a.key.remote(readout, read, features) for a in self._actors])
        except Exception as exc:
            raise _ray_failure(exc) from exc
        for node, theirs in keys:
            if theirs != mine:
                raise TriageError(
                    f"a worker on node {node} would score with other numbers than this machine: "
                    f"{_differences(mine, theirs)}",
                    hint="run the same triage version and model on every node; nothing was scored on Ray",
                )

    def _score(
        self,
        engine: Engine,
        pack: Pack,
        parts: Sequence[tuple[str, Sequence[LabelledRow]]],
        console: Console,
        readout: str,
        features: bool,
        known: dict[str, Outcome] | None,
        prior: bool,
        read: str,
    ) -> ScoringRun:
        from triage.domain.ticket import make_ticket, printable
        from triage.evaluation.labelled_runs import ScoringRun
        from triage.evaluation.progress import scoring_progress
        from triage.evaluation.variants import prior_from
        from triage.lab.prior import PRIOR_TEXT
        from triage.lab.scorer import LabScorer
        from triage.learning.cache import ReadoutCache
        from triage.learning.scorer import score_rows

        with ReadoutCache() as cache:
            said = cache.notice
            if said:
                console.print(f"triage: {said}", style="yellow", markup=False, highlight=False)
            scorer = LabScorer(engine, pack, cache, readout, read)  # the key the outcomes are stored under
            scorer.features = features and readout == "label"
            prior_ticket = make_ticket(PRIOR_TEXT, "prior") if prior else None
            tickets = [prior_ticket] if prior_ticket is not None else []
            tickets += [r.ticket for _, rows in parts for r in rows if known is None or r.ticket.sha256 not in known]
            have: dict[str, Outcome | str] = {}  # sha256 -> Outcome, or the message of a ticket that failed
            todo: dict[str, Ticket] = {}  # sha256 -> Ticket, each text once
            for t in tickets:
                if t.sha256 in have or t.sha256 in todo:
                    continue
                hit = scorer.cached(scorer.text_key(t))
                if hit is not None:
                    have[t.sha256] = hit
                else:
                    todo[t.sha256] = t
            hits = cache.hits
            scoring_s = 0.0
            if todo:
                ray = self._ray if self._ray is not None else self._start(engine, pack, len(todo))
                self._check_keys(ray, scorer.key, readout, read, scorer.features)
                from ray.util import ActorPool

                from triage.backlog.ray_score import ray_results

                batch = self.batch_size or max(1, min(DEFAULT_BATCH, -(-len(todo) // len(self._actors))))
                items = list(todo.values())
                batches = [items[i : i + batch] for i in range(0, len(items), batch)]
                pool = ActorPool(self._actors)
                what = f"{parts[0][0] if parts else 'rows'} on Ray ({len(self._actors)} worker(s))"
                with scoring_progress(console) as progress:
                    task = progress.add_task(what, total=len(todo), hits=hits)
                    results = pool.map_unordered(
                        lambda a, b: a.score.remote(b, readout, read, scorer.features), batches
                    )
                    for scored in ray_results(results):
                        for sha, out in scored:
                            have[sha] = out
                            if isinstance(out, str):
                                continue
                            scorer.store(scorer.text_key(todo[sha]), out)  # as Scorer.outcome stores it
                            scoring_s += out.ms / 1000
                        self.sent += len(scored)
                        progress.update(task, advance=len(scored))
            sets = [score_rows(_Returned(have), rows, None, known) for _, rows in parts]
            content_free = {}
            if prior_ticket is not None:
                out = have[prior_ticket.sha256]
                if isinstance(out, str):
                    raise TriageError(f"the content-free prior was not scored: {out}")
                content_free = prior_from(out)
            if cache.notice != said:  # damage found while reading or writing
                console.print(f"triage: {cache.notice}", style="yellow", markup=False, highlight=False)
            for got in sets:
                for f in got.failed:
                    console.print(f"triage: skipped {printable(f.message)}", style="yellow", markup=False)
            return ScoringRun(sets, content_free, cache.hits, len(todo), scoring_s, str(cache.path))
