"""The command palette's app commands (ctrl+p): pack, model, export, clear, learn, auto-score…

The app imports this module; this module never imports the app. What it needs
from the app is :class:`PaletteApp`, a protocol, so the import graph is
app -> commands -> screens.main and has no circle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from textual.app import SystemCommand
from textual.command import CommandListItem, SimpleCommand

from triage.domain.pack import Pack, default_pack, load_pack
from triage.errors import TriageError

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel
    from textual.screen import Screen
    from textual.widget import AwaitMount

    from triage.tui.options import UIOptions
    from triage.tui.screens.main import MainScreen


class PaletteApp(Protocol):
    """What the palette's commands use of the app (``TriageApp`` has all of it)."""

    options: UIOptions

    def notify(
        self,
        message: str,
        *,
        title: str = ...,
        severity: SeverityLevel = ...,
        timeout: float | None = ...,
        markup: bool = ...,
    ) -> None: ...

    def push_screen(
        self, screen: Screen[str | None], callback: Callable[[str | None], None] | None = ...
    ) -> AwaitMount: ...

    def search_commands(self, commands: Sequence[CommandListItem], placeholder: str = ...) -> AwaitMount: ...

    def action_history(self) -> None: ...

    def action_help(self) -> None: ...

    def action_agreement(self) -> None: ...


def app_commands(app: PaletteApp, main: MainScreen) -> Iterator[SystemCommand]:
    """Commands for the main screen."""
    pack = main.pack
    yield SystemCommand("Score ticket", "Score the ticket in the box (F5)", main.action_score)
    if main.scoring:
        yield SystemCommand("Cancel scoring", "Stop the running score (Esc)", main.action_cancel)
    yield SystemCommand(
        "Switch pack", f"Choose the criteria pack (now {pack.name} v{pack.version})", lambda: choose_pack(app, main)
    )
    now = main.status.model if main.model_state == "ready" else main.model_state
    yield SystemCommand("Switch model", f"Load another model (now {now})", lambda: choose_model(app, main))
    yield SystemCommand(
        "Export JSON", "Write the decisions as triage.result/3 JSON (F3)", lambda: main.action_export("json")
    )
    yield SystemCommand(
        "Export Markdown", "Write the decisions as a Markdown report", lambda: main.action_export("markdown")
    )
    yield SystemCommand("Copy summary", "Copy a one-line summary of the decisions (F4)", main.action_copy_summary)
    if main.open_ticket is not None:
        for role, key in (("customer", "F8"), ("agent", "F9"), ("note", "F10")):
            what = {"customer": "customer reply", "agent": "agent reply", "note": "internal note"}[role]
            article = "an" if what[0] in "aeiou" else "a"
            yield SystemCommand(
                f"Add {what}",
                f"Add the box's text to the ticket on screen as {article} {what} and score again ({key})",
                lambda role=role: main.action_reply(role),
            )
        yield SystemCommand(
            "Timeline", "How each choice and its confidence moved over the thread (ctrl+t)", main.action_timeline
        )
    if main.result is not None:
        yield SystemCommand(
            "Details", "Show or hide the engine's figures of the decisions (ctrl+o)", main.action_details
        )
    yield SystemCommand("Clear", "Empty the ticket box and the cards (ctrl+l)", main.action_clear)
    yield SystemCommand("History", "Search past tickets and reopen one (F2)", app.action_history)
    yield SystemCommand("Label this ticket", "Confirm or correct its decisions, card by card (F6)", main.action_label)
    yield SystemCommand(
        "Agreement", "How often the decisions agreed with your labels, and the trend (F7)", app.action_agreement
    )
    yield SystemCommand(
        "Learn from labels now",
        "Re-fit the learned read-out from the history's labels, in the "
        "background (it also runs by itself after every 20 new labels)",
        main.action_learn,
    )
    state = "on" if main.auto_score else "off"
    yield SystemCommand(
        "Toggle auto-score", f"Score as soon as a ticket is pasted (now {state})", main.action_toggle_auto_score
    )
    if main.model_state == "failed":
        yield SystemCommand(
            "Retry loading the model", "Try to load the model again", lambda: main.load_model(app.options.model)
        )
    yield SystemCommand("Help", "Keys and what the screen shows (F1)", app.action_help)


def known_packs(app: PaletteApp) -> list[tuple[str, Path | None]]:
    """Packs to offer: the built-in one, the one given at start, and ``<config>/packs/*.toml``."""
    from triage.store.paths import user_dirs

    found: list[tuple[str, Path | None]] = [("support (built-in)", None)]
    start = app.options.pack or app.options.settings.pack
    if start:
        found.append((f"{Path(start).name} (from start-up)", Path(start)))
    folder = user_dirs().config / "packs"
    if folder.is_dir():
        found += [(f"{p.stem} ({p})", p) for p in sorted(folder.glob("*.toml"))]
    return found


def choose_pack(app: PaletteApp, main: MainScreen) -> None:
    """A palette of packs, plus "load a pack file…"."""

    def use(path: Path | None) -> None:
        try:
            pack: Pack = default_pack() if path is None else load_pack(path)
        except TriageError as exc:
            app.notify(exc.message, severity="error", timeout=10, markup=False)
            return
        main.set_pack(pack)

    def ask_path() -> None:
        from triage.tui.screens.prompt import PromptScreen

        app.push_screen(
            PromptScreen("Criteria pack file (TOML):", placeholder="path/to/pack.toml"),
            lambda v: use(Path(v).expanduser()) if v else None,
        )

    commands = [
        SimpleCommand(name, (lambda p=path: use(p)), str(path) if path else "the support pack shipped with triage")
        for name, path in known_packs(app)
    ]
    commands.append(SimpleCommand("Load a pack file…", ask_path, "type the path of a criteria TOML file"))
    app.search_commands(commands, placeholder="Pick a criteria pack…")


def choose_model(app: PaletteApp, main: MainScreen) -> None:
    """A palette of installed models, plus "a .gguf file…"."""
    from triage.model.catalog import load_catalog
    from triage.model.installed import inspect_installed

    commands = []
    catalog = load_catalog()
    for entry in catalog.entries.values():
        state = inspect_installed(entry)
        if state.ok or state.state == "changed":  # a changed file is hashed again when it loads
            tag = "the product model" if entry.name == catalog.default else "stand-in"
            commands.append(
                SimpleCommand(entry.name, (lambda n=entry.name: main.load_model(n)), f"{entry.title} ({tag})")
            )

    def ask_path() -> None:
        from triage.tui.screens.prompt import PromptScreen

        app.push_screen(
            PromptScreen("Model file (.gguf):", placeholder="path/to/model.gguf"),
            lambda v: main.load_model(v) if v else None,
        )

    commands.append(SimpleCommand("A .gguf file…", ask_path, "type the path of a GGUF model"))
    app.search_commands(commands, placeholder="Pick a model to load…")
