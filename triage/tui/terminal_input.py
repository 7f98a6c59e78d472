"""The terminal-input layer: a bracketed paste is one paste, whatever bytes it holds.

Textual's input parser handles an escape sequence *inside* a bracketed paste as it
would a typed one: the ESC goes into the paste, the rest of the sequence does not,
and an unknown sequence is re-issued as key presses. So pasting ANSI-coloured log
text left ``^[`` in the ticket and typed the colour codes in elsewhere, out of
order, and pasted control bytes acted as keys (one paste quit the app).

:class:`PasteSafeParser` takes everything between the terminal's paste markers
(``ESC [200~`` ... ``ESC [201~``) verbatim, across reads, and hands it on as one
:class:`textual.events.Paste`; only what is outside a paste reaches Textual's
parser. The ticket box then cleans the text (:func:`triage.domain.ticket.clean_text`).
:class:`PasteSafeDriver` is Textual's Linux driver with this parser.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from textual import events
from textual._xterm_parser import XTermParser
from textual.message import Message

PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"
HOLD_S = 0.05  # a possible marker's first bytes wait this long for the rest (an Esc key press goes on after it)


def _partial(data: str, marker: str) -> int:
    """Length of the longest proper prefix of ``marker`` that ``data`` ends with (0 if none)."""
    for n in range(min(len(marker) - 1, len(data)), 0, -1):
        if data.endswith(marker[:n]):
            return n
    return 0


class PasteSafeParser(XTermParser):
    """Textual's xterm parser, with bracketed pastes taken whole (see the module doc)."""

    def __init__(self, debug: bool = False) -> None:
        super().__init__(debug)
        self._pasting = False
        self._paste: list[str] = []
        self._held = ""  # the start of what may be a marker, split across two reads
        self._held_at = 0.0

    def feed(self, data: str) -> Iterable[Message]:
        if not data:  # end of input: what is held goes on as it is
            held = list(self._release())
            return held + list(super().feed(""))
        data, self._held = self._held + data, ""
        out: list[Message] = []
        while data:
            if self._pasting:
                end = data.find(PASTE_END)
                if end < 0:
                    keep = _partial(data, PASTE_END)
                    self._paste.append(data[: len(data) - keep])
                    self._hold(data[len(data) - keep :])
                    break
                self._paste.append(data[:end])
                out.append(events.Paste("".join(self._paste).replace("\x00", "")))
                self._paste, self._pasting = [], False
                data = data[end + len(PASTE_END) :]
            else:
                start = data.find(PASTE_START)
                if start < 0:
                    keep = _partial(data, PASTE_START)
                    out += super().feed(data[: len(data) - keep]) if keep < len(data) else []
                    self._hold(data[len(data) - keep :])
                    break
                if start:
                    out += super().feed(data[:start])
                self._pasting = True
                data = data[start + len(PASTE_START) :]
        return out

    def tick(self) -> Iterable[Message]:
        out = list(super().tick())
        if self._held and not self._pasting and time.monotonic() - self._held_at >= HOLD_S:
            out += self._release()
        return out

    def _hold(self, part: str) -> None:
        self._held = part
        if part:
            self._held_at = time.monotonic()

    def _release(self) -> list[Message]:
        held, self._held = self._held, ""
        if self._pasting:  # the input ended inside a paste: the paste is what arrived
            self._paste.append(held)
            text, self._paste, self._pasting = "".join(self._paste), [], False
            return [events.Paste(text.replace("\x00", ""))] if text else []
        return list(super().feed(held)) if held else []


try:
    from textual.drivers import linux_driver as _linux
except ImportError:  # not a POSIX terminal (Windows): Textual's own driver is used
    PasteSafeDriver = None
else:

    class PasteSafeDriver(_linux.LinuxDriver):  # type: ignore[no-redef]
        """Textual's Linux driver, reading input with :class:`PasteSafeParser`."""

        def run_input_thread(self) -> None:
            # LinuxDriver.run_input_thread makes its parser from this module-level
            # name; the app is the only Textual user in its process.
            _linux.XTermParser = PasteSafeParser  # type: ignore[misc]
            super().run_input_thread()
