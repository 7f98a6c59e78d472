"""Helpdesk exports: formats, encodings, HTML, column and value mapping, and every bad input named."""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path

import pytest

from triage.domain.pack import PackError, parse_pack
from triage.errors import InputError
from triage.intake.columns import ColumnMap
from triage.intake.html import html_to_text
from triage.intake.readers import MAX_CELL, open_export
from triage.learning.labelled import read_labelled

PACK = parse_pack(
    {
        "criterion": [
            {
                "id": "queue",
                "question": "Which queue?",
                "options": [
                    {"id": "billing", "label": "Billing", "aliases": ["Billing and Payments"]},
                    {"id": "technical_support", "label": "Technical support"},
                    {"id": "returns", "label": "Returns"},
                ],
            },
            {
                "id": "priority",
                "question": "Priority?",
                "options": [
                    {"id": "high", "label": "High"},
                    {"id": "low", "label": "Low"},
                ],
            },
        ],
    }
)

TICKETS = [
    ("t-1", "Charged twice", "My card was charged twice.\nPlease refund.", "Billing and Payments", "High"),
    ("t-2", "Login broken", "The app crashes at login.", "Technical Support", "low"),
    ("t-3", "Return", "I want to send the boots back.", "returns", "Low"),
    ("t-4", "Café invoice", "The invoice for the café order is wrong.", "billing", "HIGH"),
]


def _freshdesk(path: Path) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Ticket ID", "Subject", "Description", "Group", "Priority"])
        for tid, subj, body, queue, prio in TICKETS:
            desc = "<div>" + "</div><div>".join(html.escape(line) for line in body.split("\n")) + "</div>"
            w.writerow([tid, subj, desc, queue, prio])
    return path


def _fd_map(**kw: object) -> ColumnMap:
    labels = ["queue=Group", "priority=Priority"]
    return ColumnMap.parse("Subject,Description", "Ticket ID", labels, **kw)  # type: ignore[arg-type]


def test_freshdesk_csv_with_html_maps_columns_and_values(tmp_path: Path) -> None:
    rows = read_labelled(_freshdesk(tmp_path / "fd.csv"), PACK, columns=_fd_map())
    assert [r.id for r in rows.rows] == ["t-1", "t-2", "t-3", "t-4"]
    assert rows.rows[0].ticket.text == "Charged twice\n\nMy card was charged twice.\nPlease refund."
    assert [r.labels for r in rows.rows] == [
        {"queue": "billing", "priority": "high"},
        {"queue": "technical_support", "priority": "low"},
        {"queue": "returns", "priority": "low"},
        {"queue": "billing", "priority": "high"},
    ]
    assert not rows.bad and not rows.notes


def test_jira_semicolon_csv_in_windows_1252(tmp_path: Path) -> None:
    f = tmp_path / "jira.csv"
    lines = ["Issue key;Summary;Description;Queue;Priority"]
    lines += [f'{t};{s};"{b}";{q};{p}' for t, s, b, q, p in TICKETS]
    f.write_bytes(("\r\n".join(lines) + "\r\n").encode("cp1252"))
    exp = open_export(f)
    assert (exp.format, exp.delimiter) == ("csv", ";")  # UTF-8 where it is, each other byte as Windows-1252
    rows = read_labelled(
        f, PACK, columns=ColumnMap.parse("Summary,Description", "Issue key", ["queue=Queue", "priority=Priority"])
    )
    assert rows.rows[3].ticket.text == "Café invoice\n\nThe invoice for the café order is wrong."
    assert "\n" in rows.rows[0].ticket.text.split("\n\n", 1)[1]  # the quoted newline stayed in its field
    assert any("not UTF-8" in n and "Windows-1252" in n for n in rows.notes)


def test_zendesk_jsonl_with_nested_fields_and_a_json_array(tmp_path: Path) -> None:
    objs = [
        {"ticket": {"id": t, "subject": s, "description": b}, "fields": {"group": q, "priority": p}}
        for t, s, b, q, p in TICKETS
    ]
    jl = tmp_path / "zd.jsonl"
    jl.write_text("\n".join(json.dumps(o) for o in objs) + "\n", encoding="utf-8")
    arr = tmp_path / "zd.json"
    arr.write_text(json.dumps(objs, indent=1), encoding="utf-8-sig")  # with a BOM
    cm = ColumnMap.parse(
        "ticket.subject,ticket.description", "ticket.id", ["queue=fields.group", "priority=fields.priority"]
    )
    a, b = read_labelled(jl, PACK, columns=cm), read_labelled(arr, PACK, columns=cm)
    assert open_export(arr).format == "json" and open_export(jl).format == "jsonl"
    assert [(r.id, r.ticket.text, r.labels) for r in a.rows] == [(r.id, r.ticket.text, r.labels) for r in b.rows]
    assert a.rows[1].labels == {"queue": "technical_support", "priority": "low"}


def test_parquet_export_and_the_default_jsonl_shape_agree(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    base = [
        {
            "id": t,
            "text": f"{s}\n\n{b}",
            "labels": {"queue": PACK.criteria[0].options[0].id if "ill" in q else "returns", "priority": p.lower()},
        }
        for t, s, b, q, p in TICKETS
    ]
    jl = tmp_path / "t.jsonl"
    jl.write_text("\n".join(json.dumps(o) for o in base) + "\n", encoding="utf-8")
    pqf = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist(base), pqf)
    plain = read_labelled(jl, PACK)
    via_parquet = read_labelled(pqf, PACK, columns=ColumnMap())  # defaults: text, id, labels.<criterion>
    assert [(r.id, r.ticket.text, r.labels) for r in plain.rows] == [
        (r.id, r.ticket.text, r.labels) for r in via_parquet.rows
    ]


def test_html_becomes_plain_text_and_placeholders_stay() -> None:
    assert html_to_text(
        "<p>Hello&nbsp;<b>there</b>,</p><p>line one<br>line two</p><script>x()</script>"
    ) == "Hello\xa0there,\n\nline one\nline two".replace("\xa0", " ")
    assert html_to_text("Dear <name>, 3 < 4 & so on") == "Dear <name>, 3 < 4 & so on"


def test_unmapped_values_are_counted_most_frequent_first_and_can_stop(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text(
        "id,text,queue,priority\n"
        + "".join(
            f"{i},ticket {i},{q},high\n"
            for i, q in enumerate(["Billing", "Sales", "Sales", "Sales", "Shipping", "returns"])
        ),
        encoding="utf-8",
    )
    rows = read_labelled(f, PACK, columns=ColumnMap())
    assert [r.labels["queue"] for r in rows.rows] == ["billing", "returns"]
    note = next(n for n in rows.notes if "match no option" in n)
    assert "4 row(s)" in note and note.index("'Sales' (3)") < note.index("'Shipping' (1)") and "rows left out" in note
    with pytest.raises(InputError, match="'Sales' \\(3\\)") as err:
        read_labelled(f, PACK, columns=ColumnMap(unmapped="error"))
    assert "aliases" in (err.value.hint or "")


def test_partial_rows_keep_their_other_labels(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text("id,text,queue,priority\n1,a,Sales,high\n2,b,billing,\n", encoding="utf-8")
    rows = read_labelled(f, PACK, partial=True, columns=ColumnMap())
    assert [r.labels for r in rows.rows] == [{"priority": "high"}, {"queue": "billing"}]


def test_missing_column_lists_the_columns_there_are(tmp_path: Path) -> None:
    f = _freshdesk(tmp_path / "fd.csv")
    with pytest.raises(
        InputError,
        match="no column 'Body' \\(given by --text\\); its columns are 'Ticket ID', 'Subject', 'Description', 'Group'",
    ):
        read_labelled(
            f, PACK, columns=ColumnMap.parse("Subject,Body", "Ticket ID", ["queue=Group", "priority=Priority"])
        )
    with pytest.raises(InputError, match="no column 'Queue' \\(given by --label\\)"):
        read_labelled(f, PACK, columns=ColumnMap.parse("Subject", None, ["queue=Queue", "priority=Priority"]))
    with pytest.raises(InputError, match="criterion 'team', which the pack does not have"):
        read_labelled(f, PACK, columns=ColumnMap.parse("Subject", None, ["team=Group"]))


def test_empty_exports_and_files_that_are_not_exports(tmp_path: Path) -> None:
    for name, data in (("e.csv", b""), ("blank.jsonl", b"\n\n"), ("bom.csv", b"\xef\xbb\xbf")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(InputError, match="is empty"):
            read_labelled(tmp_path / name, PACK, columns=ColumnMap())
    (tmp_path / "h.csv").write_text("id,text,queue,priority\n", encoding="utf-8")
    with pytest.raises(InputError, match="holds no rows"):
        read_labelled(tmp_path / "h.csv", PACK, columns=ColumnMap())
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(InputError, match="not a CSV, JSON Lines, JSON or Parquet export"):
        open_export(tmp_path / "a.png")
    (tmp_path / "notes.txt").write_text("just some words\nand more words\n", encoding="utf-8")
    with pytest.raises(InputError, match="not a CSV, JSON Lines, JSON or Parquet export"):
        open_export(tmp_path / "notes.txt")
    (tmp_path / "fake.parquet").write_text("id,text\n", encoding="utf-8")
    with pytest.raises(InputError, match="not a Parquet file"):
        open_export(tmp_path / "fake.parquet")


def test_label_column_empty_in_every_row(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text("id,text,queue,priority\n1,a,billing,\n2,b,returns,\n", encoding="utf-8")
    with pytest.raises(InputError, match="label column 'priority' \\(criterion 'priority'\\) is empty in all 2 row"):
        read_labelled(f, PACK, partial=True, columns=ColumnMap())


def test_all_rows_unmapped(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text("id,text,queue\n1,a,Sales\n2,b,Marketing\n3,c,Sales\n", encoding="utf-8")
    with pytest.raises(
        InputError, match="no row of .* has a label that maps to an option: 3 row.*'Sales' \\(2\\), 'Marketing' \\(1\\)"
    ) as err:
        read_labelled(f, PACK, partial=True, columns=ColumnMap())
    assert "pack init" in (err.value.hint or "")


def test_duplicate_ids_the_later_row_wins_and_is_said(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text(
        "id,text,queue,priority\n1,a,billing,high\n2,b,returns,low\n1,a,returns,low\n2,b,returns,low\n",
        encoding="utf-8",
    )
    rows = read_labelled(f, PACK, columns=ColumnMap())
    assert [(r.id, r.labels["queue"]) for r in rows.rows] == [("2", "returns"), ("1", "returns")]
    assert any("1 id(s) appear again with other labels" in n and "later row wins" in n for n in rows.notes)
    assert any("1 row(s) repeat an earlier row exactly" in n for n in rows.notes)


def test_a_50_mb_cell_stops_the_read_with_its_line(tmp_path: Path) -> None:
    f = tmp_path / "big.csv"
    with f.open("w", encoding="utf-8") as fh:
        fh.write('id,text,queue,priority\n1,fine,billing,high\n2,"')
        chunk = "x" * (1 << 20)
        for _ in range(50):
            fh.write(chunk)
        fh.write('",billing,high\n')
    assert 50 * (1 << 20) > MAX_CELL
    with pytest.raises(InputError, match="line 3: a cell is larger than 8 MiB") as err:
        read_labelled(f, PACK, columns=ColumnMap())
    assert "remove the row" in (err.value.hint or "")
    import csv as csv_mod

    assert csv_mod.field_size_limit() == 131072  # the process-wide limit is given back


def test_a_csv_row_with_too_many_fields_is_named(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text("id,text,queue,priority\n1,a,billing,high\n2,b,returns,low,extra\n", encoding="utf-8")
    rows = read_labelled(f, PACK, columns=ColumnMap())
    assert [r.id for r in rows.rows] == ["1"]
    assert "row 2 (line 3): has 5 fields, the header has 4" in rows.bad[0].message


def test_aliases_are_validated_and_left_out_of_the_hash() -> None:
    raw = {
        "criterion": [{"id": "q", "question": "Q?", "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]}]
    }
    before = parse_pack(raw).hash
    raw["criterion"][0]["options"][0]["aliases"] = ["Alpha team", "alpha  TEAM"]  # type: ignore[index]
    with_aliases = parse_pack(raw)
    assert with_aliases.hash == before
    assert with_aliases.criteria[0].options[0].aliases == ("Alpha team",)
    raw["criterion"][0]["options"][0]["aliases"] = ["b"]  # type: ignore[index]
    with pytest.raises(PackError, match="options 'a' and 'b' both have the name 'b'"):
        parse_pack(raw)
    raw["criterion"][0]["options"][0]["aliases"] = "Alpha"  # type: ignore[index]
    with pytest.raises(PackError, match="'aliases' must be a list of strings"):
        parse_pack(raw)


def test_stratified_sample_keeps_at_most_n_per_option(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    queues = ["billing"] * 30 + ["returns"] * 3 + ["technical_support"] * 12
    f.write_text(
        "id,text,queue,priority\n" + "".join(f"r{i},ticket {i},{q},high\n" for i, q in enumerate(queues)),
        encoding="utf-8",
    )
    rows = read_labelled(f, PACK, columns=ColumnMap(), per_option=5)
    counts = {q: sum(r.labels["queue"] == q for r in rows.rows) for q in ("billing", "returns", "technical_support")}
    # Each option keeps its 5 (returns has 3); priority=high's 5 may add a few more of any queue.
    assert counts["returns"] == 3 and 5 <= counts["billing"] <= 10 and 5 <= counts["technical_support"] <= 10
    assert len(rows.rows) <= 5 * 3 + 5
    assert any("sampled" in n and "at most 5 per option" in n for n in rows.notes)
    assert [r.line for r in rows.rows] == sorted(r.line for r in rows.rows)
    again = read_labelled(f, PACK, columns=ColumnMap(), per_option=5)
    assert [r.id for r in again.rows] == [r.id for r in rows.rows]


def test_json_array_streams_across_chunk_boundaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import triage.intake.readers as readers

    monkeypatch.setattr(readers, "CHUNK", 64)  # elements far longer than a chunk, split anywhere
    objs = [{"id": f"a{i}", "text": ("word " * (i * 7 + 3)).strip(), "labels": {"queue": "billing"}} for i in range(40)]
    f = tmp_path / "arr.json"
    f.write_text(" [\n" + ",\n".join(json.dumps(o) for o in objs) + "\n] \n", encoding="utf-8")
    got = [r.data for r in readers.open_export(f).records()]
    assert got == objs
    bad = tmp_path / "bad.json"
    bad.write_text('[{"id": 1}, {"id": ', encoding="utf-8")
    with pytest.raises(InputError, match="element 2: not valid JSON"):
        list(readers.open_export(bad).records())


def test_keep_html_leaves_the_text_as_it_is(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text(
        'id,text,queue,priority\n1,"Hello,<br><br>my card was charged twice.",billing,high\n', encoding="utf-8"
    )
    assert read_labelled(f, PACK, columns=ColumnMap()).rows[0].ticket.text == "Hello,\n\nmy card was charged twice."
    kept = read_labelled(f, PACK, columns=ColumnMap.parse(keep_html=True)).rows[0].ticket.text
    assert kept == "Hello,<br><br>my card was charged twice."
