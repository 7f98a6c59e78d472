"""Write a labelled JSONL development set out as three helpdesk export shapes (docs/teams.md).

- ``freshdesk.csv``: comma CSV, UTF-8, columns ``Ticket ID, Subject, Description, Group, <Criterion>...``;
  the description is HTML (paragraphs as ``<p>``, line breaks as ``<br>``, text escaped);
  label values are the options' labels (``Technical support``).
- ``jira.csv``: semicolon CSV in Windows-1252 (characters it lacks become ``?``), CRLF, columns
  ``Issue key;Summary;Description;Reporter;<Criterion>...``; label values are the option ids in upper
  case. The reporter is always "Zoë Müller", so the file is Windows-1252 and not UTF-8 even when every
  ticket is ASCII.
- ``zendesk.jsonl``: JSON Lines with nested objects: ``{"ticket": {"id", "subject", "description"},
  "fields": {<criterion>: option id}}``.

The text is split at its first blank line into subject and description, so
``--text Subject,Description`` joins them back as they were (a blank line between). The
first criterion's column is called ``Group`` in the Freshdesk shape, as Freshdesk calls it.

usage: python bench/intake/exports.py TICKETS.jsonl CRITERIA.toml OUTDIR [--limit N]
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import sys
from pathlib import Path
from typing import Any

from triage.domain.pack import Pack, load_pack


def read_rows(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    # "\n" only: str.splitlines() also splits at U+2028, U+0085 and the like, which JSON strings may hold as they are
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    return rows[:limit] if limit else rows


def split_text(text: str) -> tuple[str, str]:
    subject, _, body = text.partition("\n\n")
    return subject, body


def as_html(body: str) -> str:
    return "".join(
        "<p>" + "<br>".join(html.escape(line) for line in par.split("\n")) + "</p>" for par in body.split("\n\n")
    )


def columns(pack: Pack) -> list[str]:
    """The label column of each criterion in the Freshdesk shape (the first is ``Group``)."""
    return ["Group" if i == 0 else c.id.title() for i, c in enumerate(pack.criteria)]


def write_freshdesk(rows: list[dict[str, Any]], pack: Pack, path: Path) -> Path:
    cols = columns(pack)
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Ticket ID", "Subject", "Description", *cols])
        for r in rows:
            subject, body = split_text(r["text"])
            labels = [
                pack.criterion(c.id).option(r["labels"][c.id]).label if c.id in r["labels"] else ""
                for c in pack.criteria
            ]
            w.writerow([r["id"], subject, as_html(body), *labels])
    return path


def write_jira(rows: list[dict[str, Any]], pack: Pack, path: Path) -> Path:
    with path.open("w", encoding="cp1252", errors="replace", newline="") as fh:
        w = csv.writer(fh, delimiter=";", lineterminator="\r\n")
        w.writerow(["Issue key", "Summary", "Description", "Reporter", *[c.id.title() for c in pack.criteria]])
        for r in rows:
            subject, body = split_text(r["text"])
            w.writerow(
                [r["id"], subject, body, "Zoë Müller", *[r["labels"].get(c.id, "").upper() for c in pack.criteria]]
            )
    return path


def write_zendesk(rows: list[dict[str, Any]], pack: Pack, path: Path) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for r in rows:
            subject, body = split_text(r["text"])
            obj = {
                "ticket": {"id": r["id"], "subject": subject, "description": body},
                "fields": {c.id: r["labels"][c.id] for c in pack.criteria if c.id in r["labels"]},
            }
            fh.write(json.dumps(obj, ensure_ascii=False) + "\n")
    return path


def mapping_flags(shape: str, pack: Pack) -> list[str]:
    """The --text/--id/--label flags that read ``shape`` back."""
    if shape == "freshdesk":
        return [
            "--text",
            "Subject,Description",
            "--id",
            "Ticket ID",
            *[f for c, col in zip(pack.criteria, columns(pack), strict=True) for f in ("--label", f"{c.id}={col}")],
        ]
    if shape == "jira":
        return [
            "--text",
            "Summary,Description",
            "--id",
            "Issue key",
            *[f for c in pack.criteria for f in ("--label", f"{c.id}={c.id.title()}")],
        ]
    return [
        "--text",
        "ticket.subject,ticket.description",
        "--id",
        "ticket.id",
        *[f for c in pack.criteria for f in ("--label", f"{c.id}=fields.{c.id}")],
    ]


WRITERS = {
    "freshdesk": (write_freshdesk, "freshdesk.csv"),
    "jira": (write_jira, "jira.csv"),
    "zendesk": (write_zendesk, "zendesk.jsonl"),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tickets", type=Path)
    ap.add_argument("criteria", type=Path)
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--limit", type=int)
    a = ap.parse_args(argv)
    pack = load_pack(a.criteria)
    rows = read_rows(a.tickets, a.limit)
    a.outdir.mkdir(parents=True, exist_ok=True)
    for shape, (write, name) in WRITERS.items():
        path = write(rows, pack, a.outdir / name)
        print(f"{path}: {len(rows)} rows; read back with: {' '.join(mapping_flags(shape, pack))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
