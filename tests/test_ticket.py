"""Ticket cleaning: escape codes, control characters and bad bytes never reach the model or screen."""

from __future__ import annotations

import pytest

from triage.domain.ticket import clean_text, decode_ticket_bytes, jsonl_lines, make_ticket
from triage.errors import InputError


def test_clean_text_strips_escapes_and_controls() -> None:
    raw = "\x1b[31mRED\x1b[0m alert\x07\r\nline two\x00\x1b]0;title\x07 end\ufffd  "
    assert clean_text(raw) == "RED alert\nline two end"


def test_tabs_newlines_and_unicode_kept() -> None:
    assert clean_text("a\tb\n\nc 🙂 café") == "a\tb\n\nc 🙂 café"


@pytest.mark.parametrize("text", ["", "   \n\t ", "\x1b[2J\x00\x07"])
def test_empty_ticket_is_an_input_error(text: str) -> None:
    with pytest.raises(InputError, match="nothing to score"):
        make_ticket(text)


def test_ids_are_stable_hashes() -> None:
    a, b = make_ticket("Refund me"), make_ticket("  Refund me \n")
    assert a.id == b.id and a.sha256 == b.sha256
    assert make_ticket("x", "T-1").id == "T-1"


def test_invalid_utf8_names_the_offset() -> None:
    with pytest.raises(InputError, match=r"not valid UTF-8 \(bad byte 0xff at offset 3\)"):
        decode_ticket_bytes(b"abc\xffdef", "stdin")
    assert decode_ticket_bytes("\ufeffhello".encode(), "x") == "hello"


def test_jsonl_lines_one_parser_for_every_reader() -> None:
    text = '{"id": 7, "text": "a\u2028b"}\r\n\n  \n[1, 2]\n{"text": "no id"}\n{bad\n'
    items = list(jsonl_lines(text))
    assert [i.line for i in items] == [1, 4, 5, 6]
    assert items[0].obj == {"id": 7, "text": "a\u2028b"} and items[0].row_id() == "7"  # U+2028 stays inside the string
    assert items[1].obj is None and items[1].error == 'expected a JSON object {"id": ..., "text": ...}, got list'
    assert items[2].row_id() == "line-5"
    assert items[3].obj is None and items[3].error.startswith("not valid JSON (")


def test_printable_is_clean_text_without_the_trim() -> None:
    from triage.domain.ticket import clean_text, printable

    raw = " id\x1b[31m red\x1b]0;title\x07\x9b2J\r\nnext\tline "
    assert printable(raw) == " id red2J\nnext\tline "
    assert clean_text(raw) == printable(raw).strip()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"id": "x", "text": "unterminated}', "not valid JSON (Unterminated string starting at column 21)"),
        ('{"id": "x" "text": 1}', "not valid JSON (Expecting ',' delimiter at column 12)"),
    ],
)
def test_json_errors_say_where_once(line: str, expected: str) -> None:
    from triage.domain.ticket import jsonl_lines

    (item,) = jsonl_lines(line)
    assert item.error == expected
