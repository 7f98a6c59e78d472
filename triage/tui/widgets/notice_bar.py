"""A band for things the user must see: a stand-in model, a missing model, a moved history."""

from __future__ import annotations

from typing import Literal

from textual.widgets import Static

Severity = Literal["information", "warning", "error"]


class NoticeBar(Static):
    """Hidden while empty; one notice at a time per key, shown together."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self._notices: dict[str, tuple[str, Severity]] = {}
        self.display = False

    def put(self, key: str, text: str, severity: Severity = "warning") -> None:
        """Show (or replace) the notice called ``key``."""
        self._notices[key] = (text, severity)
        self._sync()

    def drop(self, key: str) -> None:
        """Remove the notice called ``key``."""
        if self._notices.pop(key, None) is not None:
            self._sync()

    def has(self, key: str) -> bool:
        """Whether the notice called ``key`` is shown."""
        return key in self._notices

    def text_of(self, key: str) -> str:
        """The text of the notice called ``key`` ("" when none)."""
        return self._notices.get(key, ("", "information"))[0]

    @property
    def text(self) -> str:
        """All notices, one per line."""
        return "\n".join(t for t, _ in self._notices.values())

    def _sync(self) -> None:
        severities = {s for _, s in self._notices.values()}
        self.set_class("error" in severities, "-error")
        self.set_class("warning" in severities and "error" not in severities, "-warning")
        self.update(self.text)
        self.display = bool(self._notices)
