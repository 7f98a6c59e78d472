"""What runs on each node of a backlog run: the model check, and the scoring actor.

Nothing here imports Ray: the driver (``ray_score``) hands these to Ray. A worker
scores with the same engine, options and calibration as ``triage score``: it loads
the model once, holds the pack's stable block resident, and scores each batch of
tickets in order, so the stable block and the prefix are reused as on one machine.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage.errors import TriageError
from triage.scoring.options import ScoreOptions

if TYPE_CHECKING:
    from triage.domain.pack import Pack
    from triage.scoring.prompt import PromptFormat
    from triage.session import Fits

PROBE_N_CTX = 512  # enough to read the prompt format; the probe scores nothing


class NodeModelError(TriageError):
    """A node cannot use the model: missing and not pullable, or a sha256 mismatch."""


def node_name() -> str:
    """This node, as a person would look for it: host name and address."""
    host = socket.gethostname()
    if "ray" not in sys.modules:  # not in a Ray worker: never import Ray for this
        return host
    try:
        return f"{host} ({sys.modules['ray'].util.get_node_ip_address()})"
    except Exception:  # no address known
        return host


@dataclass(frozen=True)
class ModelIdentity:
    """What a node reported about the model it runs: enough to pick a calibration and to resume.

    It answers ``sha256`` and ``format_for(readout)`` as an :class:`~triage.scoring.engine.Engine`
    does, which is all that calibration lookups read.
    """

    node: str
    name: str
    sha256: str
    fmt: PromptFormat
    triage_version: str

    @property
    def prompt_format(self) -> str:
        """The prompt format's id (with its default readout): what nodes must agree on."""
        return str(self.fmt.id)

    def format_for(self, kind: str) -> PromptFormat:
        """The prompt format with readout ``kind``, as ``Engine.format_for``."""
        return self.fmt.with_readout(kind)


@contextlib.contextmanager
def _node_lock(folder: Path) -> Iterator[None]:
    """One pull per node at a time: workers of one node share its models folder."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".backlog-pull.lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_model(spec: str, expected_sha256: str | None) -> Any:
    """Resolve ``spec`` on this node, pulling a catalog model that is missing, and verify it.

    Args:
        spec: a catalog name or a path every node can read.
        expected_sha256: what the driver expects; None accepts what this node has.

    Returns:
        The resolved ``ModelRef``.

    Raises:
        NodeModelError: the model cannot be had here, or its sha256 is not the expected one
            (the message names this node).
    """
    from triage.model.catalog import load_catalog
    from triage.model.installed import inspect_installed, models_dir
    from triage.model.modelstore import pull
    from triage.model.resolve import cached_sha256, resolve_model

    node = node_name()
    catalog = load_catalog()
    try:
        if spec in catalog.entries:
            entry = catalog.entries[spec]
            with _node_lock(models_dir()):
                if not inspect_installed(entry).ok:
                    pull(entry)  # verifies size and sha256 against the catalog
        ref = resolve_model(spec, config={})
        actual = cached_sha256(ref.path)  # the file itself, hashed once per node (cached by size and mtime)
    except TriageError as exc:
        raise NodeModelError(f"node {node}: model {spec}: {exc.message}", hint=exc.hint) from None
    except OSError as exc:
        raise NodeModelError(f"node {node}: model {spec}: {exc}") from None
    for what, want in (("the catalog or sidecar says", ref.sha256), ("the driver expects", expected_sha256)):
        if want is not None and actual != want:
            raise NodeModelError(
                f"node {node}: model {spec} at {ref.path} has sha256 {actual}, but {what} {want}",
                hint="re-pull or replace the model on that node; the job was stopped",
            )
    return ref


def probe(spec: str, expected_sha256: str | None, prompt_style: str) -> dict[str, object]:
    """Check the model on this node and read its prompt format (one Ray task per node).

    Returns:
        ``{"ok": True, "identity": ModelIdentity}`` or ``{"ok": False, "node", "error"}``:
        a failure is returned, not raised, so the driver can name every bad node at once.
    """
    from triage import __version__
    from triage.scoring.engine import Engine

    try:
        ref = ensure_model(spec, expected_sha256)
        engine = Engine.from_ref(ref, n_ctx=PROBE_N_CTX, threads=1, prompt_style=prompt_style)
        try:
            identity = ModelIdentity(node_name(), engine.name, engine.sha256, engine.fmt, __version__)
        finally:
            engine.close()
    except TriageError as exc:
        node = node_name()
        return {
            "ok": False,
            "node": node,
            "error": exc.message if exc.message.startswith("node ") else f"node {node}: {exc.message}",
        }
    return {"ok": True, "identity": identity}


@dataclass(frozen=True)
class ScorerConfig:
    """Everything a worker needs to score exactly as ``triage score`` would."""

    model: str  # catalog name or path
    expected_sha256: str
    pack: Pack
    options: ScoreOptions  # passed through unchanged: ``triage score``'s (the product's, with --criteria)
    fits: Fits  # the head and calibration the driver's session chose for the nodes' model
    n_ctx: int | None
    threads: int
    prompt_style: str


class TicketScorer:
    """A Ray Data callable class: one engine per actor, a batch of tickets per call.

    The batch has columns ``key``, ``ticket_id``, ``text``, ``line``, ``source``;
    the output has ``key`` and ``record`` (the record as JSON text: a ``triage.domain.result``
    result, or an error record as ``triage score`` writes).
    """

    config: ScorerConfig  # bound by :func:`scorer_class`

    def __init__(self) -> None:
        from triage.scoring.loader import load_engine

        config = self.config
        ensure_model(config.model, config.expected_sha256)
        self.engine = load_engine(
            config.model, n_ctx=config.n_ctx, threads=config.threads, prompt_style=config.prompt_style
        )
        if self.engine.sha256 != config.expected_sha256:
            raise NodeModelError(
                f"node {node_name()}: model {config.model} loaded with sha256 "
                f"{self.engine.sha256}, expected {config.expected_sha256}"
            )
        self.engine.hold_stable(config.pack)  # computed (or restored) once; stays resident between tickets
        from triage.session import Session

        # The driver chose the fits for the nodes' model; nothing is kept in a history on a node.
        self.session = Session(self.engine, fits=config.fits)

    def __call__(self, batch: Any) -> dict[str, list[object]]:
        """Score one batch (a ``pyarrow.Table``), in order, one ticket per decode as ``triage score`` does."""
        import json

        from triage.domain.ticket import make_ticket

        cfg = self.config
        rows = batch.to_pylist()
        made: list[tuple[dict[str, object], Any]] = []  # (row, its ticket or the error that stops it)
        for row in rows:
            messages = row.get("messages")
            try:
                text = row["text"] if messages is None else None
                made.append((row, make_ticket(text, row["ticket_id"], _loads(messages))))
            except TriageError as exc:  # the driver checked every row; a bad one still gets its record
                made.append((row, exc))
        tickets = [t for _, t in made if not isinstance(t, TriageError)]
        scored = iter(self.session.score_many(tickets, cfg.pack, cfg.options))
        records = []
        for row, ticket in made:
            done = ticket if isinstance(ticket, TriageError) else next(scored)[2]
            if isinstance(done, TriageError):
                record = {"ticket_id": row["ticket_id"], "line": row["line"], "error": done.message}
                if not isinstance(ticket, TriageError):
                    record["ticket_sha256"] = ticket.sha256
                if row.get("source") is not None:
                    record["source"] = row["source"]
            else:
                record = done.result.to_dict()
            records.append(json.dumps(record, ensure_ascii=False))
        return {"key": [row["key"] for row in rows], "record": records}


def _loads(messages: str | None) -> Any:
    import json

    return None if messages is None else json.loads(messages)


def scorer_class(config: ScorerConfig) -> type[TicketScorer]:
    """:class:`TicketScorer` with ``config`` bound to the class.

    Ray pickles the class itself with the job, so an actor that Ray restarts after a
    crash finds its configuration there, not in the object store, where a
    constructor argument could have been released by then.
    """
    return type("TicketScorer", (TicketScorer,), {"config": config})


def default_threads() -> int:
    """Threads per worker when ``--threads`` is not given: one (workers fill the cores)."""
    return 1


def cores() -> int:
    """CPU cores of this machine (for the local cluster)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
