"""``triage model``: list, pull and locate the models of the catalog.

Only the standard library and light triage modules are imported at module
level; Rich is imported inside the functions that draw, so ``triage --help``
stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from pathlib import Path

    from rich.progress import Progress, TaskID

    from triage.model.catalog import Catalog

NAME = "model"
HELP = "list, download (pull), verify and locate models"
ORDER = 60
DESCRIPTION = """\
Manage the models triage runs.

  triage model list [--json]     the catalog, and what is installed
  triage model pull NAME         download NAME, verify its sha256, install it
  triage model verify [NAME|PATH]  hash installed models (or a file) again;
                                 exit 1 when one does not match
  triage model path NAME         print the installed file's path
  triage model starter NAME|PATH fit the built-in pack's starter head for a
                                 model triage ships none for, now (its first
                                 `score` fits it in the background)

A model whose file changed since it was hashed (another size or modification
time) is not listed as verified until it is hashed again: `model verify` does
that, and so does loading it.

Models live in the user data folder (see docs/models.md). Any other GGUF
file can be used without installing it: triage --model PATH."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``list``, ``pull`` and ``path`` actions."""
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser("list", help="the catalog and what is installed")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p = sub.add_parser("pull", help="download a model, verify it, install it")
    p.add_argument("name", metavar="NAME", help="catalog name (see `triage model list`)")
    p.add_argument("--force", action="store_true", help="download again even if a verified copy is installed")
    p.add_argument(
        "--no-starter",
        action="store_true",
        help="do not fit the built-in pack's starter head for this model now (it is fitted on first use instead)",
    )
    p.add_argument("--threads", type=int, metavar="N", help="CPU threads for the starter head's fit (default: all)")
    p = sub.add_parser("verify", help="hash installed models (or a .gguf file) again and compare")
    p.add_argument(
        "name",
        nargs="?",
        metavar="NAME|PATH",
        help="a catalog name or a .gguf path (default: every installed catalog model)",
    )
    p = sub.add_parser("path", help="print the installed model file's path")
    p.add_argument("name", metavar="NAME", help="catalog name")
    p = sub.add_parser("starter", help="fit the built-in pack's starter head for a model now")
    p.add_argument("name", metavar="NAME|PATH", help="a catalog name or a .gguf path")
    p.add_argument("--threads", type=int, metavar="N", help="CPU threads for the fit (default: all)")
    p.add_argument("--background", action="store_true", help=argparse.SUPPRESS)  # score's detached fit


def run(args: argparse.Namespace) -> int:
    """Run the chosen action; returns the exit status."""
    action = {"list": _list, "pull": _pull, "verify": _verify, "path": _path, "starter": _starter}[args.action]
    return action(args)


class ModelRow(TypedDict):
    """One model of ``triage model list --json``: its catalog facts and its installed state."""

    name: str
    title: str
    default: bool
    stand_in: bool
    stand_in_rank: int
    installed: bool
    state: str
    verified: bool
    problem: str | None
    path: str | None
    size: int | None
    installed_size: int | None
    sha256: str | None
    installed_sha256: str | None
    hash_origin: str
    licence: str
    source: str
    short_source: str
    pulled_at: str | None


def model_rows() -> list[ModelRow]:
    """One dict per catalog entry: catalog facts plus its installed state."""
    from triage.model.catalog import load_catalog
    from triage.model.installed import inspect_installed

    catalog = load_catalog()
    rows: list[ModelRow] = []
    for entry in catalog.entries.values():
        inst = inspect_installed(entry)
        rows.append(
            {
                "name": entry.name,
                "title": entry.title,
                "default": entry.name == catalog.default,
                "stand_in": entry.stand_in,
                "stand_in_rank": entry.stand_in_rank,
                "installed": inst.present,
                "state": inst.state,
                "verified": inst.verified,
                "problem": inst.problem,
                "path": str(inst.path) if inst.present else None,
                "size": entry.size,
                "installed_size": inst.size,
                "sha256": entry.sha256,
                "installed_sha256": inst.sha256,
                "hash_origin": entry.hash_origin,
                "licence": entry.licence,
                "source": entry.source_description,
                "short_source": entry.short_source,
                "pulled_at": inst.pulled_at,
            }
        )
    return rows


def _mb(n: int | None) -> str:
    return "?" if n is None else f"{n / 1e6:,.0f} MB"


def _list(args: argparse.Namespace) -> int:
    rows = model_rows()
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    from triage.model.installed import models_dir

    table = Table(
        title=f"Models in {models_dir()}",
        title_justify="left",
        caption="sha256: the first 8 hex digits; `--json` prints all of it",
        caption_justify="left",
    )
    table.add_column("name", no_wrap=True)
    table.add_column("installed", min_width=8)
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("licence", no_wrap=True)
    table.add_column("source", overflow="fold")
    table.add_column("sha256", overflow="fold")
    for r in rows:
        if r["state"] == "ok":
            installed = "[green]verified[/]"
        elif r["state"] == "changed":
            installed = "[yellow]changed[/] (verify)"
        elif r["installed"]:
            installed = f"[red]re-pull[/] ({r['state']})"
        else:
            installed = "no"
        role = "default" if r["default"] else f"stand-in {r['stand_in_rank']}"
        sha = (r["sha256"] or "unknown")[:8]
        table.add_row(f"{r['name']}\n[dim]{role}[/]", installed, _mb(r["size"]), r["licence"], r["short_source"], sha)
    console = Console()
    console.print(table)
    for r in rows:
        if r["state"] == "changed":
            console.print(f"[yellow]{r['name']}[/]: {r['problem']}", highlight=False)
        elif r["problem"]:
            console.print(f"[red]{r['name']}[/]: {r['problem']}: `triage model pull {r['name']}`", highlight=False)
    return 0


class _RichProgress:
    """Draws :class:`triage.model.installed.PullProgress` events on stderr with Rich."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def note(self, message: str) -> None:
        self.console.print(f"[bold]pull:[/] {message}", highlight=False)

    def start(self, description: str, total: int | None) -> None:
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

        self._bar = Progress(
            "{task.description}",
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self._bar.start()
        self._task = self._bar.add_task(description, total=total)

    def advance(self, nbytes: int) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, nbytes)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _pull(args: argparse.Namespace) -> int:
    from triage.model.modelstore import pull

    result = pull(args.name, force=args.force, progress=_RichProgress())
    if result.already_installed:
        print(f"{result.name} is already installed and verified: {result.path}")
    else:
        print(
            f"installed {result.name}: {result.path} ({result.size:,} bytes, "
            f"sha256 {result.sha256} verified) in {result.seconds:.1f} s"
        )
    if not args.no_starter:
        _starter_for(result.name, args.threads)
    return 0


def _starter(args: argparse.Namespace) -> int:
    """``model starter``: fit the starter head now (``--background``: as ``score``'s detached fit, at low
    priority, its output in the log)."""
    if args.background:
        from triage.commands._starter import background_child

        background_child()
    _starter_for(args.name, args.threads)
    return 0


def _starter_for(model: str, threads: int | None) -> None:
    """Fit the built-in pack's starter head for the model just pulled, unless one is stored or the setting is off."""
    from triage.commands._starter import fit_starter
    from triage.domain.pack import default_pack
    from triage.scoring.loader import load_engine
    from triage.session import FitRequest, Session
    from triage.store.config import load_config

    request = FitRequest.of(config=load_config())
    if not request.starter:
        print("starter head: off (the starter setting); not fitted")
        return
    with load_engine(model, threads=threads, notice=lambda m: None) as engine:
        if fit_starter(Session(engine, request=request), default_pack()):
            return
        from triage.learning.fitstore import auto_head, shipped_dir

        found = auto_head(engine, default_pack(), starter=True)  # what `score` will apply, said as it will say it
        if (
            found.head is not None
            and found.head.kind == "starter"
            and found.path
            and found.path.parent == shipped_dir()
        ):
            print(f"starter head for {engine.name}: ships with triage (nothing to fit)")
        elif found.head is not None and found.head.kind == "starter":
            print(f"starter head for {engine.name}: already fitted")
        elif found.head is not None:
            print(f"starter head for {engine.name}: not needed, the team's learned head {found.path} applies")
        else:
            print(f"starter head for {engine.name}: not fitted: {found.skipped or 'nothing to apply'}")


def _verify(args: argparse.Namespace) -> int:
    """Hash models again: every installed catalog model, one by name, or a file."""
    from pathlib import Path

    from triage.domain.ticket import printable
    from triage.errors import InputError
    from triage.model.catalog import load_catalog
    from triage.model.installed import VerifyMismatch, inspect_installed, model_file, verify_installed

    catalog = load_catalog()
    if args.name and args.name not in catalog.entries:
        path = Path(args.name).expanduser()
        if not path.is_file():
            raise InputError(f"{args.name} is neither a catalog model ({', '.join(catalog.names)}) nor a file")
        named = [
            e for e in catalog.entries.values() if model_file(e.name).exists() and model_file(e.name).samefile(path)
        ]
        if not named:
            return _verify_file(path, catalog)
        entries = named
    elif args.name:
        entries = [catalog.entries[args.name]]
    else:
        entries = [e for e in catalog.entries.values() if inspect_installed(e).present]
        if not entries:
            print("no catalog model is installed; nothing to verify")
            return 0
    bad = 0
    for entry in entries:
        try:
            state = verify_installed(entry, progress=_RichProgress())
        except VerifyMismatch as exc:
            bad += 1
            print(f"{entry.name}: MISMATCH: {printable(exc.message)}")
            print(f"  {exc.hint}")
            continue
        if state.state == "missing":
            if args.name:
                bad += 1
            print(f"{entry.name}: not installed")
            continue
        print(f"{entry.name}: verified (sha256 {state.sha256}, {state.size:,} bytes): {state.path}")
    return 1 if bad else 0


def _verify_file(path: Path, catalog: Catalog) -> int:
    """A .gguf that is no installed catalog model: hash it, and name the catalog entry it is, if any."""
    from triage.domain.ticket import printable
    from triage.model.resolve import cached_sha256

    sha = cached_sha256(path, refresh=True)
    same = [e.name for e in catalog.entries.values() if e.sha256 == sha]
    where = printable(str(path))
    if same:
        print(f"{where}: verified: sha256 {sha} is catalog model {same[0]}'s")
        return 0
    print(f"{where}: sha256 {sha}; no catalog model has it, so there is nothing to compare it with")
    return 0


def _path(args: argparse.Namespace) -> int:
    from triage.errors import TriageError
    from triage.model.catalog import get_entry
    from triage.model.installed import inspect_installed, pull_command, verify_installed

    entry = get_entry(args.name)  # unknown name: InputError listing the known ones
    inst = inspect_installed(entry)
    if inst.state == "missing":
        raise TriageError(f"model {entry.name} is not installed", hint=f"install it with: {pull_command(entry.name)}")
    if inst.state == "changed":
        inst = verify_installed(entry)  # modified since it was hashed: hash it again (a mismatch raises)
    if not inst.ok:
        raise TriageError(
            f"model {entry.name} needs a re-pull: {inst.problem}", hint=f"run: {pull_command(entry.name)}"
        )
    print(inst.path)
    return 0
