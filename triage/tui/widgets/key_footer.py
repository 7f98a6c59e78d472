"""The main screen's footer, fitted to the terminal's width: every key it shows is shown whole.

Textual's footer lays its keys out in one row and cuts whatever does not fit (at 80 columns the reply keys,
the timeline and cancel were lost mid-word). This one first draws the three reply keys as one
(``f8·f9·f10 Reply``), then leaves keys out, least needed first, until the rest fits: the palette's ``^p``
(ctrl+p still opens it), the keys that do nothing right now (shown dimmed), then :data:`DROP_ORDER`, then
from the end. F1 (help, which lists every key) always stays. The function keys are shown in their order
(F1 first), after the focused widget's own keys.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

DROP_ORDER = (
    "details",
    "timeline",
    "quit",
    "copy_summary",
    "export('json')",
    "app.history",
    "cancel",
    "undo_paste",
    "app.agreement",
    "reply('note')",
)  # actions, least needed first, left out while the footer is too narrow for them (F1 lists them all)
KEEP = "app.help"
REPLIES = ("reply('customer')", "reply('agent')", "reply('note')")
REPLY_TOOLTIP = "F8 adds the box's text as a customer reply, F9 as an agent reply, F10 as an internal note"


def merge_replies(keys: Sequence[Key]) -> list[Key]:
    """``keys`` with the three reply keys drawn as one (``f8·f9·f10 Reply``, where the first of them was)."""
    replies = [k for k in keys if k.action in REPLIES]
    if len(replies) < len(REPLIES):
        return list(keys)
    out: list[Key] = []
    for k in keys:
        if k.action == REPLIES[0]:
            out.append(Key(k.action, "·".join(r.label for r in replies), "Reply", k.enabled))
        elif k.action not in REPLIES:
            out.append(k)
    return out


@dataclass(frozen=True)
class Key:
    """A key as the footer shows it."""

    action: str
    label: str  # the key as shown (``f5``, ``^t``)
    description: str
    enabled: bool = True
    palette: bool = False

    @property
    def width(self) -> int:
        """Cells it takes in a compact footer: key, a space, the description, and the gap after it (the
        palette's key: a separator bar before it instead)."""
        return cell_len(self.label) + (1 + cell_len(self.description) if self.description else 0) + 1


def _is_action(action: str, key: Key) -> bool:
    return key.action == action


def fit(keys: Sequence[Key], width: int) -> list[int]:
    """Which of ``keys`` to show in ``width`` cells (their indexes, in order); see the module docstring for
    what is left out first."""
    kept = list(range(len(keys)))

    def fits() -> bool:
        return sum(keys[i].width for i in kept) <= width

    steps: list[Callable[[Key], bool]] = [lambda k: k.palette, lambda k: not k.enabled and k.action != KEEP]
    steps += [partial(_is_action, action) for action in DROP_ORDER]
    for drop in steps:
        if fits():
            return kept
        kept = [i for i in kept if not drop(keys[i])]
    while not fits() and any(keys[i].action != KEEP for i in kept):
        kept.remove(max(i for i in kept if keys[i].action != KEEP))
    return kept


def in_order(keys: Sequence[Key]) -> list[int]:
    """The keys' indexes in the order to show them: the keys before the first function key (the focused
    widget's own), then the function keys by number, then the rest, each group in its given order."""
    numbers = [int(m.group(1)) if (m := re.fullmatch(r"[fF](\d+)(?:·.*)?", k.label)) else None for k in keys]
    first = next((i for i, n in enumerate(numbers) if n is not None), len(keys))

    def rank(i: int) -> tuple[int, int]:
        n = numbers[i]
        if n is not None:
            return (1, n)
        return (0, i) if i < first else (2, i)

    return sorted(range(len(keys)), key=rank)


class KeyFooter(Footer):
    """A compact footer that shows only what fits, each key whole (see :func:`fit`)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(compact=True, id=id)
        self._fitted_for = 0

    def compose(self) -> ComposeResult:
        widgets = [w for w in super().compose() if isinstance(w, FooterKey)]  # no binding groups are used
        keys = [
            Key(
                w.action,
                w.key_display,
                w.description,
                enabled=not w.has_class("-disabled"),
                palette=w.has_class("-command-palette"),
            )
            for w in widgets
        ]
        self._fitted_for = width = self.size.width or self.app.size.width
        if sum(k.width for k in keys) > width and len(merged := merge_replies(keys)) < len(keys):
            first = next(i for i, k in enumerate(keys) if k.action == REPLIES[0])
            m = merged[first]
            one = FooterKey(
                "f8", m.label, m.description, m.action, disabled=not m.enabled, tooltip=REPLY_TOOLTIP
            ).data_bind(compact=Footer.compact)
            widgets = [one if w is widgets[first] else w for w in widgets if w.action not in REPLIES[1:]]
            keys = merged
        kept = set(fit(keys, width))
        for i in in_order(keys):
            if i in kept:
                yield widgets[i]

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._fitted_for:
            self.call_after_refresh(self.recompose)
