"""Tickets: the text an agent pastes, made safe to show and to score.

A pasted ticket may carry terminal escape sequences, control characters or
binary junk. :func:`clean_text` removes them (keeping newlines and tabs) so the
model sees only text and the screen is never driven by the ticket's bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triage.errors import InputError

# CSI / OSC / other ESC sequences, then stray C0/C1 controls except \t and \n.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def printable(text: object) -> str:
    """``text`` safe to write to a terminal: escape sequences and control characters removed.

    Newlines and tabs are kept; a carriage return becomes a newline, so nothing can
    overwrite what is already on the line. Every user string the CLI prints (ticket
    ids, file names, messages that quote input) goes through this, as ticket text
    does through :func:`clean_text`.
    """
    text = str(text).replace("\r\n", "\n").replace("\r", "\n")
    text = _ANSI.sub("", text)
    return _CONTROL.sub("", text)


def clean_text(text: str) -> str:
    """Strip escape sequences and control characters (:func:`printable`); normalise newlines; trim."""
    text = printable(text)
    text = text.replace("\ufffd", "")  # undecodable bytes carry no meaning for the model
    return text.strip()


@dataclass(frozen=True)
class Ticket:
    """A ticket to score. ``text`` is already cleaned; ``raw`` is what was given."""

    id: str
    text: str
    raw: str

    @property
    def sha256(self) -> str:
        """Hash of the cleaned text: identifies the ticket in caches."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def make_ticket(text: str, ticket_id: str | None = None) -> Ticket:
    """Clean ``text`` and wrap it as a :class:`Ticket`.

    Raises:
        InputError: the ticket is empty once cleaned.
    """
    cleaned = clean_text(text)
    if not cleaned:
        what = "empty" if not text.strip() else "only control characters or escape codes"
        raise InputError(f"ticket {ticket_id or ''} is {what}; there is nothing to score".replace("ticket  is", "ticket is"))
    tid = ticket_id or hashlib.sha256(cleaned.encode("utf-8")).hexdigest()[:12]
    return Ticket(tid, cleaned, text)


def read_text_file(path: str | Path, what: str) -> str:
    """Read a user's UTF-8 text file, with a specific message for each way it can fail.

    Args:
        path: the file.
        what: what the file is, for messages (e.g. "ticket file").

    Raises:
        InputError: missing, a directory, unreadable, or not UTF-8.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory; pass the {what} itself") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    return decode_ticket_bytes(data, str(path))


def decode_ticket_bytes(data: bytes, source: str) -> str:
    """Decode input bytes as UTF-8 (a BOM is allowed).

    Raises:
        InputError: the bytes are not UTF-8, naming the byte offset.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{source} is not valid UTF-8 (bad byte 0x{data[exc.start]:02x} at offset {exc.start})",
            hint="convert it first, e.g. iconv -f latin1 -t utf-8",
        ) from None


@dataclass(frozen=True)
class JsonLine:
    """One non-blank line of a JSON Lines file: an object, or why it is not one."""

    line: int  # 1-based
    obj: dict[str, Any] | None
    error: str | None = None  # without the location; callers prefix "<file> line N: "

    def row_id(self) -> str:
        """The line's ``id`` field as text, or ``line-N`` when it has none."""
        rid = (self.obj or {}).get("id")
        return str(rid) if rid is not None and str(rid).strip() else f"line-{self.line}"


def jsonl_lines(text: str, expected: str = '{"id": ..., "text": ...}') -> Iterator[JsonLine]:
    """Parse JSON Lines text: every non-blank line as an object or an error.

    Lines are split on "\\n" only: ``str.splitlines()`` would also break inside
    JSON strings at U+2028/U+2029/U+0085, which JSON allows raw (real GitHub
    issues contain them). A trailing "\\r" is dropped.
    """
    for n, raw in enumerate(text.split("\n"), 1):
        raw = raw.removesuffix("\r")
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            # Some messages end in "at" already ("Unterminated string starting at"): one "at" only.
            where = f"column {exc.colno}" if exc.msg.endswith(" at") else f"at column {exc.colno}"
            yield JsonLine(n, None, f"not valid JSON ({exc.msg} {where})")
            continue
        if not isinstance(obj, dict):
            yield JsonLine(n, None, f"expected a JSON object {expected}, got {type(obj).__name__}")
            continue
        yield JsonLine(n, obj)
