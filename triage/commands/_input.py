"""The flags that read a helpdesk export (``--text``, ``--id``, ``--label``, ``--unmapped``), shared by commands.

``learn``, ``eval`` and ``calibrate`` take ``--text COL[,COL...]`` and ``--id COL``. ``score``
already has ``--text`` (treat the input as one plain-text ticket) and ``--id`` (that ticket's
id), so there the same mappings are spelled ``--text-columns`` and ``--id-column``; both
spellings work on the other commands too.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from triage.domain.pack import Pack
    from triage.intake.columns import ColumnMap
    from triage.learning.labelled import LabelledSet

INPUT_HELP = """\
Input: triage's JSON Lines ({"id", "text", "labels": {criterion: option}}), or a helpdesk
export: CSV (any delimiter; UTF-8, else Windows-1252, said), JSON Lines, a JSON array or
Parquet, chosen by content and extension. Map its columns with --text COL[,COL] (joined
by a blank line; HTML becomes plain text; a dotted path such as ticket.description
reaches into nested JSON), --id COL and --label CRITERION=COL (repeatable; default: the
column labels.CRITERION, else CRITERION). A label value matches an option by id, label
or one of its aliases, case and spacing ignored; values that match none are counted and
listed, and --unmapped skip (default) leaves them out, --unmapped error stops.
More in docs/teams.md."""


def add_input_arguments(p: argparse.ArgumentParser, *, labels: bool = True, score: bool = False) -> None:
    """Add the export-mapping flags; ``score``: leave ``--text``/``--id`` to score's own meanings."""
    g = p.add_argument_group("reading an export (CSV, JSON Lines, JSON, Parquet)")
    text_flags = ("--text-columns",) if score else ("--text", "--text-columns")
    id_flags = ("--id-column",) if score else ("--id", "--id-column")
    g.add_argument(
        *text_flags,
        dest="text_columns",
        metavar="COL[,COL...]",
        help="the column(s) holding the ticket text, joined by a blank line (default: text)",
    )
    g.add_argument(
        *id_flags,
        dest="id_column",
        metavar="COL",
        help="the column holding the ticket id (default: id; rows without one are row-N)",
    )
    g.add_argument(
        "--keep-html",
        action="store_true",
        help="leave HTML in the text as it is "
        "(default: a value holding HTML elements such as <p> or <br> becomes plain text)",
    )
    if labels:
        g.add_argument(
            "--label",
            dest="label_columns",
            action="append",
            default=[],
            metavar="CRITERION=COL",
            help="the column holding a criterion's label (repeatable; default: labels.CRITERION, else CRITERION)",
        )
        g.add_argument(
            "--unmapped",
            choices=("skip", "error"),
            default="skip",
            help="a label value that matches no option: leave it out and say how many "
            "(its row; for learn, whose rows may label some criteria only, that label), or stop",
        )


def column_map(args: argparse.Namespace) -> ColumnMap:
    """The :class:`~triage.intake.columns.ColumnMap` of the parsed flags."""
    from triage.intake.columns import ColumnMap

    return ColumnMap.parse(
        getattr(args, "text_columns", None),
        getattr(args, "id_column", None),
        getattr(args, "label_columns", None) or (),
        getattr(args, "unmapped", "skip"),
        keep_html=getattr(args, "keep_html", False),
    )


def labelled_rows(
    args: argparse.Namespace, path: str, pack: Pack, *, partial: bool = False, per_option: int | None = None
) -> LabelledSet:
    """The labelled rows of ``path`` read through the flags (:func:`triage.learning.labelled.read_labelled`)."""
    from triage.learning.labelled import read_labelled

    return read_labelled(path, pack, partial=partial, columns=column_map(args), per_option=per_option)
