"""HTML in a ticket description (Freshdesk and Zendesk exports have it) as plain text.

Parsed with Beautiful Soup on the standard library's ``html.parser`` (no compiled parser
needed): block elements and ``<br>`` become line breaks, entities are decoded, scripts and
styles are dropped. A value with no known HTML element in it is returned as it was, so
plain text that merely contains ``<``, ``&`` or a placeholder such as ``<name>`` is never
changed.
"""

from __future__ import annotations

import re

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


def looks_like_html(value: str) -> bool:
    """True when ``value`` holds a known HTML element's tag or a comment (only then is it parsed)."""
    return "<" in value and _TAG.search(value) is not None


def html_to_text(value: str) -> str:
    """Plain text of an HTML fragment: one line per block, blank lines collapsed; non-HTML unchanged."""
    if not looks_like_html(value):
        return value
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(value, "html.parser")
    if soup.find() is None:
        return value
    for tag in soup(["script", "style", "head", "title"]):
        tag.decompose()
    for node in soup.find_all(string=True):  # source line breaks inside text are spaces, as a browser shows them
        node.replace_with(re.sub(r"\s+", " ", str(node)))
    for br in soup.find_all("br"):
        br.replace_with("\n")
    for block in soup.find_all(LINE_BLOCKS + PARAGRAPHS):
        block.insert_before(_SOFT)
        block.insert_after(_SOFT + "\n" + _SOFT if block.name in PARAGRAPHS else _SOFT)
    text = re.sub(_SOFT + "+", "\n", soup.get_text())
    out: list[str] = []
    for line in (" ".join(part.split()) for part in text.split("\n")):
        if line or (out and out[-1]):  # at most one blank line in a row
            out.append(line)
    return "\n".join(out).strip()
