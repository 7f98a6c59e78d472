"""The app object, kept thin: wiring, app-wide keys, theme, and the palette's commands.

:func:`make_app` builds it for the CLI and for the tests alike; tests inject
a scripted engine factory and fixed display options.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.driver import Driver
from textual.screen import Screen
from textual.theme import Theme

from triage.domain.pack import Pack, resolve_pack
from triage.settings import DEFAULTS
from triage.store.history import History
from triage.store.paths import user_dirs
from triage.tui.commands import app_commands
from triage.tui.engine_host import EngineFactory, EngineHost, default_engine_factory
from triage.tui.messages import ModelLoadFailed
from triage.tui.options import UIOptions
from triage.tui.screens.main import MainScreen

log = logging.getLogger(__name__)


class TriageApp(App[None]):
    """Offline ticket triage in the terminal."""

    CSS_PATH = "app.tcss"
    TITLE = "triage"
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("f1,question_mark", "help", "Help", show=False),
        Binding("f2", "history", "History", show=False),
        Binding("f7", "agreement", "Agreement", show=False),
    ]

    def __init__(self, options: UIOptions, *, engine_factory: EngineFactory, history: History, pack: Pack) -> None:
        super().__init__()
        self.options = options
        self.host = EngineHost(engine_factory)
        self.history = history
        self.pack = pack
        self._main: MainScreen | None = None  # made by get_default_screen

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver for this terminal; on Linux, one whose input parser takes a
        bracketed paste whole (:mod:`triage.tui.terminal_input`)."""
        from triage.tui.terminal_input import PasteSafeDriver

        base = super().get_driver_class()
        if PasteSafeDriver is not None and base is PasteSafeDriver.__bases__[0]:
            return PasteSafeDriver
        return base

    def get_default_screen(self) -> Screen[None]:
        self._main = MainScreen(self.host, self.history, self.options, self.pack)
        return self._main

    @property
    def main(self) -> MainScreen:
        """The main screen (always at the bottom of the stack; kept after the stack is gone, at exit)."""
        assert self._main is not None
        return self._main

    def on_mount(self) -> None:
        wanted = self.options.theme or self.options.settings.theme
        self.theme = wanted if wanted in self.available_themes else DEFAULTS.theme
        self.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, theme: Theme) -> None:
        if not self.options.remember_theme or self.options.settings.theme == theme.name:
            return
        from triage.errors import TriageError
        from triage.store.config import save_config

        self.options.config["theme"] = theme.name
        try:
            save_config({"theme": theme.name})
        except (OSError, TriageError) as exc:
            log.warning("could not save the theme: %s", exc)

    def on_unmount(self) -> None:
        if self._main is None:  # never started
            self.host.close()
            self.history.close()
            return
        try:
            self.main.stop_all()  # the stack is empty by now; the screen object is still ours
        except Exception:
            log.exception("could not stop the running work")
        self.host.close()  # waits (at most 3 s) for a running score: the abort callback stops a decode at once
        try:
            self.main.end_unfinished()
        except Exception:
            log.exception("could not end the unfinished scores in history")
        self.history.close()

    # -- hooks ------------------------------------------------------------------------
    def model_unavailable(self, failure: ModelLoadFailed) -> None:
        """Called when no model could be loaded.

        The main screen already shows the message and the command that installs
        a model. When nothing is installed at all, the first-run screen explains
        the choice (pull Qwen3-0.6B, pull a stand-in, or point to a file) and
        pulls with a progress bar; the chosen model then loads, and a file the
        user pointed to is remembered in the config.
        """
        if not failure.first_run:
            return
        from triage.store.config import save_config
        from triage.tui.screens.first_run import FirstRunScreen

        def chosen(path: Path | None) -> None:
            if path is None:
                return
            if path.parent != user_dirs().models:  # a pulled model resolves by itself next time
                save_config({"model": str(path)})
            self.main.load_model(str(path))

        self.push_screen(FirstRunScreen(reason=failure.message), chosen)

    # -- actions ----------------------------------------------------------------------
    def action_help(self) -> None:
        """Show the help screen."""
        from triage.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_agreement(self) -> None:
        """Show how often the decisions agreed with the agents' labels."""
        from triage.tui.screens.stats import AgreementScreen

        if not isinstance(self.screen, AgreementScreen):
            self.push_screen(AgreementScreen(self.history))

    def action_history(self) -> None:
        """Show the history; the chosen ticket reopens on the main screen."""
        from triage.tui.screens.history import HistoryScreen, Reopen

        if isinstance(self.screen, HistoryScreen):
            return

        def reopen(choice: Reopen | None) -> None:
            if choice is None:
                return
            try:
                saved = (
                    self.history.load(choice.score_id)
                    if choice.score_id is not None
                    else self.history.load_ticket(choice.ticket_row)
                )
            except KeyError:
                self.notify("That history entry is gone.", severity="warning")
                return
            self.main.reopen(saved)

        self.push_screen(HistoryScreen(self.history, cursor_blink=self.options.cursor_blink), reopen)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if isinstance(screen, MainScreen):
            yield from app_commands(self, screen)


def make_app(
    options: UIOptions | None = None,
    *,
    engine_factory: EngineFactory | None = None,
    history: Callable[[], History] | None = None,
    pack: Pack | None = None,
) -> TriageApp:
    """Build the app: the one factory the CLI and the tests share.

    Args:
        options: start-up settings (default: nothing from the command line, empty config).
        engine_factory: loads the engine; default resolves and loads a GGUF like ``triage score``.
        history: opens the history; default the user's ``history.sqlite3``.
        pack: the criteria pack; default from ``options.pack``, the config, or the built-in one.

    Raises:
        TriageError: the pack cannot be loaded.
    """
    options = options or UIOptions()
    factory = engine_factory or default_engine_factory(options.n_ctx, options.threads)
    active = pack or resolve_pack(options.pack or options.settings.pack)
    return TriageApp(options, engine_factory=factory, history=(history or History.open)(), pack=active)
