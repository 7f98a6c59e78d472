"""The top line: which model is running (or loading, or missing), the pack and how options are read."""

from __future__ import annotations

from typing import Literal

from textual.markup import escape
from textual.timer import Timer
from textual.widgets import Static

from triage.domain.pack import Pack

ModelState = Literal["loading", "ready", "failed"]
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class ModelStatus(Static):
    """One line; a spinner turns while the model loads (unless animation is off)."""

    def __init__(self, *, animate: bool = True, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.spins = animate  # not `animate`: that is Widget's method
        self.state: ModelState = "loading"
        self.model = ""
        self.requested: str | None = None
        self.stand_in = False
        self.n_ctx = 0
        self.pack_label = ""
        self.how = "by name"
        self.auto_score = False
        self._frame = 0
        self._spin: Timer | None = None

    def on_mount(self) -> None:
        if self.spins:
            self._spin = self.set_interval(0.1, self._tick, pause=self.state != "loading")
        self._draw()

    def _tick(self) -> None:
        self._frame = (self._frame + 1) % len(SPINNER)
        self._draw()

    def loading_model(self, requested: str | None) -> None:
        """A model is being loaded."""
        self.state, self.requested = "loading", requested
        if self._spin is not None:
            self._spin.resume()
        self._draw()

    def ready(self, name: str, *, stand_in: bool, n_ctx: int) -> None:
        """The model is up."""
        self.state, self.model, self.stand_in, self.n_ctx = "ready", name, stand_in, n_ctx
        self._stop()

    def failed(self) -> None:
        """No model could be loaded."""
        self.state = "failed"
        self._stop()

    def settings(self, pack: Pack, how: str, auto_score: bool) -> None:
        """The active pack and scoring settings (``how``: the readout, e.g. ``by name`` or ``letters, cyclic``)."""
        self.pack_label = f"{pack.name} v{pack.version}"
        self.how, self.auto_score = how, auto_score
        self._draw()

    def _stop(self) -> None:
        if self._spin is not None:
            self._spin.pause()
        self._draw()

    def _draw(self) -> None:
        if self.state == "loading":
            spin = SPINNER[self._frame] if self.spins else "…"
            what = f"model [b]{escape(self.requested)}[/b]" if self.requested else "the default model"
            left = f"[$accent]{spin}[/] loading {what}…"
        elif self.state == "ready":
            tag = " [$warning]stand-in[/]" if self.stand_in else ""
            left = f"[$success]●[/] [b]{escape(self.model)}[/b]{tag} [dim]ctx {self.n_ctx}[/dim]"
        else:
            left = "[$error]✖ no model[/]"
        right = f"pack [b]{escape(self.pack_label)}[/b]"
        if self.how != "by name":  # how every ticket is read is no news; a reopened older result's way is
            right += f" · {escape(self.how)}"
        if self.auto_score:
            right += " · auto-score"
        self.update(f"{left}  [dim]│[/dim] {right}")
