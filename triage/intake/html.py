"""HTML in a ticket description (Freshdesk and Zendesk exports have it) as plain text.

One pass over the value, in time linear in its length (a 2.5 MB description of paragraphs
converts in well under a second; Beautiful Soup's tree edits took time quadratic in the number
of blocks, and the standard library's ``html.parser`` is quadratic on unclosed tags): block
elements and ``<br>`` become line breaks, entities are decoded, comments, scripts, styles and
the head are dropped. Every search moves forward only: an unclosed comment, tag or script ends
the text there, as a browser shows it. A value with no known HTML element (or comment) in it is
returned as it was, so plain text that merely contains ``<``, ``&`` or a placeholder such as
``<name>`` is never changed.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

# Only a known HTML element makes a value HTML: an export's placeholders such as "<name>" or
# "<order id>" are text, and a real HTML export escapes such text as "&lt;name&gt;".
ELEMENTS = (
    "a",
    "b",
    "i",
    "u",
    "em",
    "strong",
    "span",
    "font",
    "small",
    "sub",
    "sup",
    "code",
    "br",
    "hr",
    "img",
    "p",
    "div",
    "li",
    "ul",
    "ol",
    "table",
    "thead",
    "tbody",
    "tr",
    "td",
    "th",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "pre",
    "html",
    "body",
    "head",
    "style",
    "script",
    "section",
    "article",
    "center",
    "wbr",
)
_TAG = re.compile(r"</?(?:" + "|".join(ELEMENTS) + r")(?:\s[^<>]*)?/?>|<!--", re.IGNORECASE)
LINE_BLOCKS = ("div", "li", "tr", "pre", "section", "article", "center", "dt", "dd")
PARAGRAPHS = ("p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "table", "ul", "ol", "hr")
_SOFT = "\x1e"  # a block boundary: a run of them is one line break
_BR = "\x1f"  # a <br>: one line break of its own
_CELLS = ("td", "th")  # table cells: a space between them


def looks_like_html(value: str) -> bool:
    """True when ``value`` holds a known HTML element's tag or a comment (only then is it parsed)."""
    return "<" in value and _TAG.search(value) is not None


_SKIPPED = ("script", "style", "head", "title")  # their content is no text of the ticket
_RAW = ("script", "style", "title", "textarea")  # their content is not parsed for tags
_VOID = ("br", "hr", "img", "wbr")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9:_-]*")
_TAG_END = re.compile(r"[>\"']")
_RAW_END = {name: re.compile(rf"</{name}(?=[\s/>])", re.IGNORECASE) for name in _RAW}


def _tag_end(value: str, i: int) -> int:
    """The index just past the ``>`` that closes the tag begun before ``i`` (quotes respected), or -1."""
    while True:
        m = _TAG_END.search(value, i)
        if m is None:
            return -1
        if m.group() == ">":
            return m.end()
        close = value.find(m.group(), m.end())
        if close < 0:
            return -1
        i = close + 1


def _events(value: str) -> Iterator[tuple[str, str]]:
    """``("text", s)``, ``("start", name)``, ``("end", name)`` in order; comments and declarations dropped."""
    n, i = len(value), 0
    while i < n:
        lt = value.find("<", i)
        if lt < 0:
            yield "text", value[i:]
            return
        if lt > i:
            yield "text", value[i:lt]
        if value.startswith("<!--", lt):
            close = value.find("-->", lt + 4)
            if close < 0:
                return  # an unclosed comment runs to the end
            i = close + 3
            continue
        if value.startswith("<![CDATA[", lt):
            close = value.find("]]>", lt + 9)
            yield "text", value[lt + 9 : close if close >= 0 else n]
            if close < 0:
                return
            i = close + 3
            continue
        end = lt + 1 < n and value[lt + 1] == "/"
        m = _NAME.match(value, lt + (2 if end else 1))
        if m is None:
            if value.startswith(("<!", "<?", "</"), lt):  # a declaration or a bogus comment, to the next ">"
                close = value.find(">", lt + 2)
                if close < 0:
                    return
                i = close + 1
                continue
            yield "text", "<"  # "3 < 4": a plain less-than
            i = lt + 1
            continue
        close = _tag_end(value, m.end())
        if close < 0:
            return  # an unclosed tag runs to the end
        name = m.group().lower()
        i = close
        if end:
            yield "end", name
            continue
        yield "start", name
        if name in _RAW:
            found = _RAW_END[name].search(value, i)
            if found is None:
                yield "text" if name == "textarea" else "raw", value[i:]
                return
            yield "text" if name == "textarea" else "raw", value[i : found.start()]
            yield "end", name
            after = _tag_end(value, found.end())
            if after < 0:
                return
            i = after


def html_to_text(value: str) -> str:
    """Plain text of an HTML fragment: one line per block, blank lines collapsed; non-HTML unchanged."""
    if not looks_like_html(value):
        return value
    value = value.replace(_SOFT, " ").replace(_BR, " ")
    out: list[str] = []
    skipping = dict.fromkeys(_SKIPPED, 0)  # how many of each skipped element are open now
    skipped = 0
    for kind, data in _events(value):
        if kind == "text":
            if not skipped:
                out.append(html.unescape(data) if "&" in data else data)
            continue
        if kind == "raw":
            continue
        if data in skipping:
            before = skipping[data]
            skipping[data] = before + 1 if kind == "start" else max(0, before - 1)
            skipped += skipping[data] - before
            continue
        if skipped:
            continue
        if data == "br":
            out.append(_BR)
        elif data in _CELLS:
            out.append(" ")
        elif data in LINE_BLOCKS or data in PARAGRAPHS:
            if kind == "start":
                out.append(_SOFT)
            if kind == "end" or data in _VOID:
                out.append(_SOFT + _BR + _SOFT if data in PARAGRAPHS else _SOFT)
    # source line breaks are spaces, as a browser shows them; then <br> and blocks are the line breaks
    text = re.sub(_SOFT + "+", "\n", "".join(out).replace("\n", " ").replace(_BR, "\n"))
    lines: list[str] = []
    for line in (" ".join(part.split()) for part in text.split("\n")):
        if line or (lines and lines[-1]):  # at most one blank line in a row
            lines.append(line)
    return "\n".join(lines).strip()
