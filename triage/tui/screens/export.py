"""The export dialog: JSON (the result schema) or Markdown, and where to write it.

It opens on the format: ↑/↓ choose it (the file name's suffix follows), Enter goes on to the file name,
and Enter there exports (asking once before replacing a file); Tab moves between the fields and the
buttons, Esc cancels. The dialog's own footer shows these keys (not the main screen's, which do not
work here).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, Label, RadioButton, RadioSet

from triage.domain.result import TicketResult
from triage.store.export import SUFFIXES, default_name


@dataclass(frozen=True)
class ExportRequest:
    """What the user asked for."""

    fmt: str
    path: Path


class FormatChoice(RadioSet):
    """The format list: ↑/↓ choose a format at once, Enter goes on to the file name."""

    BINDINGS = [
        Binding("down,right", "step(1)", "Format", key_display="↑↓"),
        Binding("up,left", "step(-1)", "Format", show=False),
        Binding("enter", "screen.focus_path", "File name"),
    ]

    def on_mount(self) -> None:
        self.call_after_refresh(self._highlight_chosen)  # RadioSet highlights the first button when mounted

    def on_focus(self) -> None:
        self._highlight_chosen()

    def _highlight_chosen(self) -> None:
        self._selected = max(0, self.pressed_index)

    def action_step(self, direction: int) -> None:
        """Choose the next (1) or previous (-1) format."""
        buttons = list(self.query(RadioButton))
        buttons[(max(0, self.pressed_index) + direction) % len(buttons)].value = True  # RadioSet.Changed follows


class PathInput(Input):
    """The file name: Enter exports."""

    BINDINGS = [Binding("enter", "submit", "Export")]


class ExportScreen(ModalScreen[ExportRequest | None]):
    """Pick a format, then a file; see the module docstring for the keys."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("tab", "app.focus_next", "Next field"),
        Binding("shift+tab", "app.focus_previous", show=False),
    ]

    def __init__(self, result: TicketResult, fmt: str, folder: Path) -> None:
        super().__init__()
        self.result = result
        self.fmt = fmt
        self.folder = folder
        self._replace: Path | None = None  # an existing file the user has been asked about once

    def compose(self) -> ComposeResult:
        with Vertical(id="export-dialog", classes="dialog"):
            yield Label(f"Export the decisions of ticket [b]{escape(self.result.ticket_id)}[/b]")
            with FormatChoice(id="export-format"):
                yield RadioButton(
                    "JSON: triage.result/3, as `triage score` prints it",
                    value=self.fmt == "json",
                    id="fmt-json",
                )
                yield RadioButton(
                    "Markdown: a report for people, with the ticket", value=self.fmt == "markdown", id="fmt-markdown"
                )
            yield Label("File:")
            yield PathInput(str(self.folder / default_name(self.result, self.fmt)), id="export-path")
            yield Label("", id="export-warning")
            with Horizontal(classes="buttons"):
                yield Button("Export", variant="primary", id="export-ok")
                yield Button("Cancel", id="export-cancel")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#export-format", FormatChoice).focus()

    def action_focus_path(self) -> None:
        """The format is chosen (the highlighted one is the chosen one): on to the file name."""
        self.query_one("#export-path", Input).focus()

    @on(RadioSet.Changed)
    def _format_changed(self, event: RadioSet.Changed) -> None:
        self.fmt = "json" if event.pressed.id == "fmt-json" else "markdown"
        path_input = self.query_one("#export-path", Input)
        path = Path(path_input.value)
        if path.suffix.lower() in (".json", ".md", ".markdown"):
            path_input.value = str(path.with_suffix(SUFFIXES[self.fmt]))

    @on(Input.Submitted, "#export-path")
    @on(Button.Pressed, "#export-ok")
    def _export(self) -> None:
        value = self.query_one("#export-path", Input).value.strip()
        if not value:
            self.notify("Give a file name.", severity="warning")
            return
        path = Path(value).expanduser()
        if path.is_dir():
            self.query_one("#export-warning", Label).update(
                f"[$error]{escape(str(path))} is a folder; give a file name.[/]"
            )
            return
        if path.exists() and self._replace != path:
            self._replace = path  # asked once: a second Enter (or Export) replaces it
            self.query_one("#export-warning", Label).update(
                f"[$warning]{escape(str(path))} exists. Press Enter again to replace it, or change the name.[/]"
            )
            self.query_one("#export-ok", Button).label = "Replace"
            return
        self.dismiss(ExportRequest(self.fmt, path))

    @on(Input.Changed, "#export-path")
    def _path_changed(self) -> None:
        if self._replace is not None:
            self._replace = None
            self.query_one("#export-warning", Label).update("")
            self.query_one("#export-ok", Button).label = "Export"

    @on(Button.Pressed, "#export-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
