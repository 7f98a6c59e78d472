"""Issue 33, exports and label files: HTML in linear time, one bad record costs only itself, bytes decoded or named.

No model: the readers (:mod:`triage.intake`) and `triage pack init` in a subprocess.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import assert_clean, run_triage

from triage.domain.pack import load_pack
from triage.errors import InputError
from triage.intake.columns import ColumnMap, export_tickets
from triage.intake.html import html_to_text
from triage.intake.readers import open_export
from triage.learning.labelled import read_labelled

PACK_TOML = """
[pack]
name = "q"
[[criterion]]
id = "queue"
question = "Which queue?"
options = [ { id = "billing", label = "Billing" }, { id = "shipping", label = "Shipping" } ]
"""


@pytest.fixture
def pack(tmp_path: Path):
    (tmp_path / "q.toml").write_text(PACK_TOML, encoding="utf-8")
    return load_pack(tmp_path / "q.toml")


# -- HTML ---------------------------------------------------------------------------------------


def _paragraphs(n: int) -> str:
    return "".join(f"<p>Paragraph {i}: the parcel is <b>late</b> &amp; the invoice is wrong.</p>\n" for i in range(n))


def _cpu(value: str) -> float:
    t = time.process_time()  # this process's CPU time: other work on a shared machine does not count
    html_to_text(value)
    return time.process_time() - t


def _best_pair(small: str, large: str, repeats: int = 4) -> tuple[float, float]:
    """The least CPU time of each over ``repeats`` runs, small and large interleaved (a slow moment hits both)."""
    t_small = t_large = float("inf")
    for _ in range(repeats):
        t_small = min(t_small, _cpu(small))
        t_large = min(t_large, _cpu(large))
    return t_small, t_large


@pytest.mark.slow  # sized to time above the noise: seconds of CPU by design
def test_html_to_text_scales_linearly_with_the_paragraphs() -> None:
    """32,000 paragraphs cost at most three times as much per paragraph as 4,000 (a quadratic pass costs 8 times).

    Measured side by side in one run: CPU time, best of four each, interleaved. Linear is a ratio of 8; on a
    busy shared machine (load 15 on 2 cores) it was measured between 6.7 and 11; quadratic is 64.
    """
    small, large = _paragraphs(4000), _paragraphs(32000)
    t_small, t_large = _best_pair(small, large)
    ratio = t_large / t_small
    print(f"html_to_text: 4,000 paragraphs {t_small:.3f} s, 32,000 {t_large:.3f} s, ratio {ratio:.1f} (linear: 8)")
    assert ratio <= 3 * 8, f"32,000 paragraphs took {ratio:.1f} times 4,000's time"
    text = html_to_text(large)
    assert text.count("\n\n") == 31999 and "&amp;" not in text and "<b>" not in text


def test_html_of_two_and_a_half_megabytes_ends() -> None:
    value = _paragraphs(36000)  # about 2.5 MB
    assert len(value) > 2_500_000
    t = time.perf_counter()
    text = html_to_text(value)
    assert time.perf_counter() - t < 60 and text.startswith("Paragraph 0:")


@pytest.mark.slow  # sized to time above the noise: seconds of CPU by design
@pytest.mark.parametrize(
    "unit",
    ['<a title="x ', "<p x ", "<p><!-- x ", "</ x ", "<div>", "<head>", "<script>"],
    ids=["open-quote", "open-tag", "open-comment", "bogus-end", "deep", "head", "script"],
)
def test_unclosed_constructs_stay_linear(unit: str) -> None:
    """The standard library's parser is quadratic on some of these (an unclosed tag: 5 s for 4,000 of them)."""
    small, large = "<p>a</p>" + unit * 16000, "<p>a</p>" + unit * 128000  # large enough to time above the noise
    t_small, t_large = _best_pair(small, large, repeats=3)
    ratio = t_large / max(t_small, 0.01)  # below 10 ms a timing is noise
    assert ratio <= 3 * 8, ratio


def test_html_comments_are_dropped_and_text_stays() -> None:
    assert html_to_text("Hello<!-- internal: customer is VIP -->, world<br>bye") == "Hello, world\nbye"
    assert html_to_text("<p>one</p><!-- x\ny --><p>two</p>") == "one\n\ntwo"
    assert html_to_text("<p>kept</p><!-- never closed <p>gone</p>") == "kept"
    assert html_to_text("<table><tr><td>a</td><td>b</td></tr></table>") == "a b"
    assert html_to_text("Dear <name>, 3 < 4 & so on") == "Dear <name>, 3 < 4 & so on"


# -- one record costs only itself -------------------------------------------------------------


def test_a_deeply_nested_json_array_element_is_one_rows_error(tmp_path: Path, pack) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    elements = [json.dumps({"id": f"t{i}", "text": f"ticket {i}", "queue": "billing"}) for i in range(4)]
    elements.insert(2, '{"id": "deep", "text": "x", "queue": ' + deep + "}")
    elements.insert(3, '{"id": "big", "text": "x", "queue": ' + "9" * 5000 + "}")
    f = tmp_path / "export.json"
    f.write_text("[\n" + ",\n".join(elements) + "\n]\n", encoding="utf-8")
    got = list(export_tickets(str(f), ColumnMap()))
    assert [t.id for t in got if t.error is None] == ["t0", "t1", "t2", "t3"]
    errors = [t.error for t in got if t.error]
    assert len(errors) == 2
    assert "element 3 (line 4)" in errors[0] and "nested 100,001 levels deep" in errors[0]
    assert "element 4 (line 5)" in errors[1] and "more than 4,300 digits" in errors[1]
    rows = read_labelled(f, pack, columns=ColumnMap.parse(labels=["queue=queue"]))
    assert len(rows.rows) == 4 and len(rows.bad) == 2


def test_pack_init_on_a_json_array_with_a_deep_element_skips_it(tmp_path: Path) -> None:
    elements = [json.dumps({"text": f"ticket {i}", "group": ["billing", "shipping"][i % 2]}) for i in range(12)]
    elements.insert(5, '{"text": "x", "group": ' + "[" * 50_000 + "]" * 50_000 + "}")
    f = tmp_path / "export.json"
    f.write_text("[" + ",".join(elements) + "]", encoding="utf-8")
    proc = run_triage(
        ["pack", "init", str(f), "--text", "text", "--criteria", "queue=group", "-o", str(tmp_path / "p.toml")],
        tmp_path / "home",
    )
    assert_clean(proc)
    assert proc.returncode == 0, proc.stderr
    assert "1 unreadable record(s) skipped" in proc.stdout


def test_a_deep_jsonl_export_line_is_that_lines_error(tmp_path: Path) -> None:
    f = tmp_path / "export.jsonl"
    f.write_text(
        '{"id": "a", "text": "fine"}\n{"id": "b", "text": '
        + "[" * 100_000
        + "]" * 100_000
        + '}\n{"id": "c", "text": "ok"}\n',
        encoding="utf-8",
    )
    got = list(export_tickets(str(f), ColumnMap(explicit=True)))
    assert [t.id for t in got if t.error is None] == ["a", "c"]
    assert "line 2" in got[1].error and "nested" in got[1].error


def test_nul_bytes_are_named_with_their_line(tmp_path: Path, pack) -> None:
    csv_file = tmp_path / "e.csv"
    csv_file.write_bytes(b"id,text,queue\nt1,fine,billing\nt2,bro\x00ken,billing\nt3,also fine,shipping\n")
    rows = read_labelled(csv_file, pack, columns=ColumnMap.parse("text", "id", ["queue=queue"]))
    assert [r.id for r in rows.rows] == ["t1", "t3"]
    [bad] = rows.bad
    assert "row 2 (line 3)" in bad.message and "NUL byte" in bad.message and "'text'" in bad.message
    jsonl = tmp_path / "e.jsonl"
    jsonl.write_bytes(
        b'{"id": "a", "text": "x", "queue": "billing"}\n{"id": "b", "text": "y\x00", "queue": "billing"}\n'
    )
    rows = read_labelled(jsonl, pack, columns=ColumnMap.parse(labels=["queue=queue"]))
    assert "line 2" in rows.bad[0].message and "NUL byte" in rows.bad[0].message
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"id,text\n" + b"\x00" * 4000)
    with pytest.raises(Exception, match="binary data: NUL bytes from line 2"):
        open_export(binary)


def test_one_cp1252_byte_does_not_turn_utf8_rows_into_mojibake(tmp_path: Path, pack) -> None:
    f = tmp_path / "mixed.csv"
    lines = [
        "id,text,queue".encode(),
        "t1,Café order is late — où est-il ?,shipping".encode("utf-8"),
        "t2,Naïve question about my invoice,billing".encode("utf-8"),
        "t3,R\xe9sum\xe9 of the refund,billing".encode("latin-1"),  # one row in Windows-1252
        "t4,Zürich warehouse ✓,shipping".encode("utf-8"),
    ]
    f.write_bytes(b"\n".join(lines) + b"\n")
    rows = read_labelled(f, pack, columns=ColumnMap.parse("text", "id", ["queue=queue"]))
    texts = {r.id: r.ticket.text for r in rows.rows}
    assert texts == {
        "t1": "Café order is late — où est-il ?",
        "t2": "Naïve question about my invoice",
        "t3": "Résumé of the refund",
        "t4": "Zürich warehouse ✓",
    }
    [note] = [n for n in rows.notes if "not UTF-8" in n]
    assert "line 4" in note and "Windows-1252" in note


# -- Parquet --------------------------------------------------------------------------------


def test_a_parquet_binary_text_column_is_decoded_or_refused_by_name(tmp_path: Path, pack) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table(
        {
            "id": pa.array(["t1", "t2", "t3"]),
            "body": pa.array(["Où est mon colis ?".encode(), b"caf\xe9 not utf-8", b"Refund please"], type=pa.binary()),
            "queue": pa.array(["shipping", "billing", "billing"]),
            "tags": pa.array([["a", "b"], ["c"], []], type=pa.list_(pa.string())),
        }
    )
    f = tmp_path / "export.parquet"
    pq.write_table(table, f)
    got = list(export_tickets(str(f), ColumnMap.parse("body", "id")))
    assert got[0].text == "Où est mon colis ?" and got[2].text == "Refund please"
    assert "b'" not in (got[0].text or "")
    assert got[1].text is None and "column 'body' holds binary data that is not UTF-8" in (got[1].error or "")
    listed = list(export_tickets(str(f), ColumnMap.parse("tags", "id")))
    assert all("column 'tags' holds a list, not text" in (t.error or "") for t in listed)
    with pytest.raises(InputError, match="column 'tags' holds a list, not a label"):
        read_labelled(f, pack, columns=ColumnMap.parse("body", "id", ["queue=tags"]))
