"""Tickets: the text an agent pastes, made safe to show and to score.

A pasted ticket may carry terminal escape sequences, control characters or
binary junk. :func:`clean_text` removes them (keeping newlines and tabs) so the
model sees only text and the screen is never driven by the ticket's bytes.

Files and streams of tickets are read with bounds (:data:`MAX_INPUT_BYTES`, JSON
nesting and digits: :mod:`triage.bounded`), and one bad row is that row's
error, never the batch's. A file in a format triage does not read as tickets
(CSV, Parquet, UTF-16, a spreadsheet) gets a message that names the format.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from triage.bounded import Bounded, loads_json, mib, read_bounded
from triage.domain.thread import Message, messages_from, render
from triage.errors import InputError

# CSI / OSC / other ESC sequences, then stray C0/C1 controls except \t and \n.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# A lone UTF-16 surrogate (from a JSON "\\ud800" escape) is no character: it cannot be written as UTF-8.
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Characters that are letters or symbols to Unicode but draw nothing (fillers, the blank braille cell).
_BLANK_GLYPHS = frozenset("\u115f\u1160\u2800\u3164\uffa0")
MAX_INPUT_BYTES = 256 << 20  # a file or stream of tickets; 100,000 tickets of 2 KB are 200 MB


def printable(text: object) -> str:
    """``text`` safe to write to a terminal: escape sequences and control characters removed.

    Newlines and tabs are kept; a carriage return becomes a newline, so nothing can
    overwrite what is already on the line. Every user string the CLI prints (ticket
    ids, file names, messages that quote input) goes through this, as ticket text
    does through :func:`clean_text`.
    """
    text = str(text).replace("\r\n", "\n").replace("\r", "\n")
    text = _ANSI.sub("", text)
    return _SURROGATE.sub("\ufffd", _CONTROL.sub("", text))


def clean_text(text: str) -> str:
    """Strip escape sequences and control characters (:func:`printable`); normalise newlines; trim."""
    text = printable(text)
    text = text.replace("\ufffd", "")  # undecodable bytes carry no meaning for the model
    return text.strip()


@dataclass(frozen=True)
class Ticket:
    """A ticket to score. ``text`` is already cleaned; ``raw`` is what was given.

    A thread (:mod:`triage.domain.thread`) also has its ``messages``; its ``text`` is
    the messages as the ticket block writes them. A plain ticket is one customer message.
    """

    id: str
    text: str
    raw: str
    messages: tuple[Message, ...] = ()

    @property
    def thread(self) -> tuple[Message, ...]:
        """The ticket's messages (a plain ticket: its text as one customer message)."""
        return self.messages or (Message("customer", self.text),)

    @property
    def sha256(self) -> str:
        """Hash of the cleaned text: identifies the ticket in caches."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def visible(text: str) -> bool:
    """Whether ``text`` has a character that draws something (not a space, a control, a
    zero-width or format character, a lone combining mark, or a blank filler)."""
    return any(unicodedata.category(ch)[0] not in "ZCM" and ch not in _BLANK_GLYPHS for ch in text)


# An HTML tag (<p>, </div>, <br/>) or comment: for the emptiness rule only, the text itself is kept.
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")


def _without_markup(text: str) -> str:
    """``text`` with its HTML comments and tags spaced out, in linear time (an unclosed ``<!--`` ends the scan:
    the rest stays text, so thousands of them cost one pass)."""
    parts, i = [], 0
    while (start := text.find("<!--", i)) >= 0 and (end := text.find("-->", start + 4)) >= 0:
        parts += [text[i:start], " "]
        i = end + 3
    parts.append(text[i:])
    return _HTML_TAG.sub(" ", "".join(parts))


def has_content(text: str) -> bool:
    """Whether ``text`` has something to score: a visible character (:func:`visible`) once HTML's ways of
    writing nothing are taken out (``&nbsp;``, ``&#8203;``, ``<p></p>``, ``<br>``). The one emptiness rule of
    every ticket (:func:`make_ticket`: ``score``, ``learn``, ``eval``, ``serve``); the text itself is kept."""
    if not visible(text):
        return False
    if "&" not in text and "<" not in text:
        return True
    return visible(html.unescape(_without_markup(text)))  # &nbsp; is U+00A0, &#8203; U+200B: no glyph


def surrogate_problem(value: str, what: str) -> str | None:
    """Why ``value`` is no text (a lone UTF-16 surrogate, from a JSON ``"\\ud800"`` escape or a cut pair), or None.

    Such a half character cannot be written, shown or scored; replacing it would score a text nobody
    wrote, so the row is refused, naming ``what`` and where the surrogate is."""
    found = _SURROGATE.search(value)
    if found is None:
        return None
    return (
        f"{what} holds a lone surrogate (\\u{ord(found.group()):04x} at character {found.start() + 1}), half of a "
        "UTF-16 pair and no character; the exporter cut or mis-encoded it: fix that row"
    )


def safe_id(ticket_id: str) -> str:
    """A ticket id that can be written as UTF-8: lone surrogates become U+FFFD."""
    return _SURROGATE.sub("\ufffd", ticket_id)


def make_ticket(text: str | None, ticket_id: str | None = None, messages: object = None) -> Ticket:
    """Clean ``text`` (or a thread's ``messages``, a list of ``{"role", "text"}``) and wrap it as a :class:`Ticket`.

    Raises:
        InputError: the ticket is empty once cleaned, or has nothing to score (:func:`has_content`); a text
            with a lone surrogate (:func:`surrogate_problem`); a ``messages`` list that is empty or has a bad
            message (named); both or neither given.
    """
    label = f"ticket {printable(safe_id(ticket_id))}" if ticket_id else "ticket"
    if messages is not None:
        if text is not None:
            raise InputError(f"{label} has both 'text' and 'messages'; give one (a thread's text is its messages)")
        if isinstance(messages, list):
            for i, m in enumerate(messages, 1):
                raw = m.get("text") if isinstance(m, dict) else None
                problem = surrogate_problem(raw, f"message {i}'s text") if isinstance(raw, str) else None
                if problem:
                    raise InputError(f"{label}: {problem}")
        try:
            thread = messages_from(messages, clean_text)
        except InputError as exc:
            raise InputError(f"{label}: {exc.message}") from None
        if not all(has_content(m.text) for m in thread):
            raise InputError(
                f"{label}: a message has no visible characters (only spaces, HTML spaces such as &nbsp; or "
                "empty tags); there is nothing to score in it"
            )
        body = render(thread)
        tid = safe_id(ticket_id) if ticket_id else hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]
        return Ticket(tid, body, body, thread if len(thread) > 1 or thread[0].role != "customer" else ())
    if text is None:
        raise InputError(f"{label} has no text")
    problem = surrogate_problem(text, "its text")
    if problem:
        raise InputError(f"{label}: {problem}")
    cleaned = clean_text(text)
    if not cleaned:
        what = "empty" if not text.strip() else "only control characters or escape codes"
        raise InputError(f"{label} is {what}; there is nothing to score")
    if not has_content(cleaned):
        raise InputError(
            f"{label} has no visible characters (only spaces, zero-width or blank characters, HTML spaces such "
            "as &nbsp; or empty tags); there is nothing to score"
        )
    tid = safe_id(ticket_id) if ticket_id else hashlib.sha256(cleaned.encode("utf-8")).hexdigest()[:12]
    return Ticket(tid, cleaned, text)


def read_text_file(path: str | Path, what: str, *, limit: int = MAX_INPUT_BYTES) -> str:
    """Read a user's UTF-8 text file, with a specific message for each way it can fail.

    Args:
        path: the file (a pipe or a device too: at most ``limit`` bytes are read).
        what: what the file is, for messages (e.g. "ticket file").
        limit: the most bytes read (``/dev/zero`` never ends).

    Raises:
        InputError: missing, a directory, unreadable, too large, not UTF-8, or in a
            format triage does not read as tickets (CSV, Parquet, UTF-16...).
    """
    path = Path(path)
    try:
        data = read_bounded(path, limit)
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory; pass the {what} itself") from None
    except Bounded:
        raise InputError(
            f"{what} {path} is larger than {mib(limit)}; triage reads at most that much from one file",
            hint="split it into parts (e.g. split -l 100000 FILE part-) and score each,"
            " or check that it is the right file",
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    if path.suffix.lower() in (".csv", ".tsv"):
        raise _table_error(str(path), "CSV" if path.suffix.lower() == ".csv" else "TSV")
    return decode_ticket_bytes(data, str(path))


class _Reads(Protocol):
    """A binary stream (standard input's buffer)."""

    def read(self, n: int, /) -> bytes: ...


def read_stream(stream: _Reads, source: str = "standard input", *, limit: int = MAX_INPUT_BYTES) -> str:
    """Read a binary stream (stdin) as :func:`read_text_file` reads a file: at most ``limit`` bytes.

    Raises:
        InputError: as :func:`read_text_file`.
    """
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise InputError(
            f"{source} holds more than {mib(limit)}; triage reads at most that much at once",
            hint="split the input into parts and score each",
        )
    return decode_ticket_bytes(data, source)


# Binary formats someone may pass as tickets, by their first bytes.
_MAGIC = (
    (b"PAR1", "a Parquet file"),
    (b"PK\x03\x04", "a zip archive (an .xlsx or .docx is one)"),
    (b"\x1f\x8b", "gzip-compressed"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"%PDF", "a PDF document"),
    (b"\xd0\xcf\x11\xe0", "an old Office document (.xls, .doc)"),
)
_CONVERT = 'convert it to JSON Lines, one {"id": ..., "text": ...} object per line (see `triage score --help`)'


def _table_error(source: str, kind: str) -> InputError:
    return InputError(
        f"{source} is a {kind} file; triage reads tickets as text or JSON Lines, and would score the whole table"
        " as one ticket",
        hint="convert it, e.g. python3 -c 'import csv,json,sys; [print(json.dumps(r)) "
        "for r in csv.DictReader(sys.stdin)]' < FILE.csv > FILE.jsonl (the column with the ticket must be called text)",
    )


def _looks_like_table(text: str) -> str | None:
    """ "CSV" or "TSV" when ``text`` is plainly a table with a ``text`` column, else None."""
    lines = [ln for ln in text.split("\n", 6)[:6] if ln.strip()]
    if len(lines) < 3:
        return None
    for sep, kind in ((",", "CSV"), ("\t", "TSV")):
        header = [h.strip().strip('"').casefold() for h in lines[0].split(sep)]
        if len(header) >= 2 and {"text", "body", "description", "message"} & set(header) and len(lines[0]) < 500:
            if all(ln.count(sep) >= len(header) - 1 for ln in lines[1:]):
                return kind
    return None


def decode_ticket_bytes(data: bytes, source: str) -> str:
    """Decode input bytes as UTF-8 (a BOM is allowed), after ruling out formats that are not text.

    Raises:
        InputError: UTF-16, a binary format (Parquet, zip, gzip...), a CSV table, or
            bytes that are not UTF-8 (naming the byte offset).
    """
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            hint = _CONVERT + (", or score it with --ray, which reads Parquet" if magic == b"PAR1" else "")
            raise InputError(f"{source} is {kind}, not text; triage reads tickets as text or JSON Lines", hint=hint)
    head = data[:4096]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(head) >= 4 and head.count(0) * 3 >= len(head)):
        raise InputError(
            f"{source} is UTF-16 text (or other text with NUL bytes); triage reads UTF-8",
            hint="convert it first, e.g. iconv -f utf-16 -t utf-8 FILE > FILE.utf8",
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{source} is not valid UTF-8 (bad byte 0x{data[exc.start]:02x} at offset {exc.start})",
            hint="if it is Latin-1 or Windows-1252 text, convert it first, e.g. iconv -f cp1252 -t utf-8",
        ) from None
    table = _looks_like_table(text)
    if table:
        raise _table_error(source, table)
    return text


@dataclass(frozen=True)
class JsonLine:
    """One non-blank line of a JSON Lines file: an object, or why it is not one."""

    line: int  # 1-based
    obj: dict[str, object] | None
    error: str | None = None  # without the location; callers prefix "<file> line N: "

    def row_id(self) -> str:
        """The line's ``id`` field as text (writable as UTF-8), or ``line-N`` when it has none."""
        rid = (self.obj or {}).get("id")
        return safe_id(str(rid)) if rid is not None and str(rid).strip() else f"line-{self.line}"


def jsonl_lines(text: str, expected: str = '{"id": ..., "text": ...}') -> Iterator[JsonLine]:
    """Parse JSON Lines text: every non-blank line as an object or an error.

    Lines are split on "\\n" only (a trailing "\\r" is dropped): ``str.splitlines()``
    would also break inside JSON strings at U+2028/U+2029/U+0085, which JSON allows
    raw (real GitHub issues contain them). A file with carriage returns and no "\\n"
    at all (old Mac line ends) is split on "\\r": JSON never holds a raw carriage
    return inside a string. Line numbers of other files stay what ``wc -l`` counts
    (resume keys depend on them). A line nested deeper than
    :data:`triage.bounded.MAX_DEPTH` or holding a number of thousands of digits
    is that line's error.
    """
    ending = "\r" if "\r" in text and "\n" not in text else "\n"
    for n, raw in enumerate(text.split(ending), 1):
        raw = raw.removesuffix("\r")
        if not raw.strip():
            continue
        try:
            obj = loads_json(raw)
        except json.JSONDecodeError as exc:
            # Some messages end in "at" already ("Unterminated string starting at"): one "at" only.
            where = f"column {exc.colno}" if exc.msg.endswith(" at") else f"at column {exc.colno}"
            yield JsonLine(n, None, f"not valid JSON ({exc.msg} {where})")
            continue
        except Bounded as exc:
            yield JsonLine(n, None, f"not read: {exc}")
            continue
        if not isinstance(obj, dict):
            yield JsonLine(n, None, f"expected a JSON object {expected}, got {type(obj).__name__}")
            continue
        yield JsonLine(n, obj)
