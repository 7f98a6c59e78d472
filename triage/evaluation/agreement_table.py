"""The agreement figures (:mod:`triage.evaluation.agreement`) as a rich table, or as plain lines for a console
too narrow for it: ``triage stats`` and the app's F7 draw them through here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from triage.domain.ticket import printable
from triage.evaluation.agreement import BLOCK, RECENT
from triage.render import percent, safe

if TYPE_CHECKING:
    from triage.evaluation.agreement import CriterionAgreement


def _agreement_cells(rows: list[CriterionAgreement], trend_blocks: int) -> tuple[bool, list[str], list[list[str]]]:
    """(one pack?, the column names, per row its cells) of the agreement figures; the first cell is the
    criterion's name as given (the table escapes it, the lines only make it printable)."""
    one_pack = len({r.pack for r in rows}) == 1
    columns = ["criterion", "labels", "fixed", "agree", "balanced", f"last {RECENT}", "by source"]
    columns += ["trend"] if trend_blocks else []
    cells = []
    for r in rows:
        row = [
            r.criterion if one_pack else f"{r.pack}/{r.criterion}",
            str(r.labels),
            str(r.corrections),
            percent(r.overall.rate),
            percent(r.balanced),
            percent(r.recent.rate),
            ", ".join(f"{s} {percent(v.rate)} of {v.n}" for s, v in r.by_source.items()),
        ]
        if trend_blocks:
            row.append(" ".join(percent(t.rate) for t in r.trend[-trend_blocks:]))
        cells.append(row)
    return one_pack, columns, cells


def _trend_said(trend_blocks: int) -> str:
    return f"; trend: agreement per block of {BLOCK} labels, oldest first" if trend_blocks else ""


def agreement_lines(rows: list[CriterionAgreement], *, trend_blocks: int = 0) -> list[str]:
    """The figures of :func:`agreement_table` as plain lines, a criterion to a line, for a console too narrow
    for the table."""
    one_pack, columns, cells = _agreement_cells(rows, trend_blocks)
    out = []
    for name, labels, fixed, *rest in cells:
        parts = [f"{labels} label(s), {fixed} fixed"] + [f"{c} {v}" for c, v in zip(columns[3:], rest, strict=True)]
        out.append(f"{printable(name)}: " + "; ".join(parts))  # printed without markup: no escape needed
    if one_pack and rows:
        out.append(
            f"pack {printable(rows[0].pack)}; balanced: agreement averaged over the options answered"
            + _trend_said(trend_blocks)
        )
    return out


def by_source_lines(rows: list[CriterionAgreement]) -> list[str]:
    """The ``by source`` column of :func:`agreement_table` as plain lines, a criterion to a line (for a table
    drawn without it, ``by_source=False``, where it is too narrow)."""
    _, columns, cells = _agreement_cells(rows, 0)
    at = columns.index("by source")
    return [f"{printable(row[0])}: {row[at]}" for row in cells]


def agreement_table(
    rows: list[CriterionAgreement], *, trend_blocks: int = 0, title: str | None = None, by_source: bool = True
) -> Table:
    """The agreement table of ``triage stats`` and the app's agreement screen (F7), from
    :func:`triage.evaluation.agreement.agreement`'s rows.

    Per criterion: labels, corrections, agreement overall, balanced over the options, over the newest
    answers and by what decided (unless ``by_source`` is False: :func:`by_source_lines` has it then);
    with ``trend_blocks``, the newest that many blocks of the trend too.
    """
    one_pack, columns, cells = _agreement_cells(rows, trend_blocks)
    table = Table(title=title, title_justify="left", expand=not trend_blocks)
    wraps = {"by source": 9, "trend": 6}  # the columns that wrap, and their narrowest width
    shown = [i for i, col in enumerate(columns) if by_source or col != "by source"]
    for i in shown:
        col = columns[i]
        table.add_column(
            col,
            justify="right" if col in ("labels", "fixed") else "left",
            no_wrap=col not in wraps,
            min_width=wraps.get(col),
        )
    for row in cells:
        table.add_row(safe(row[0]), *(row[i] for i in shown[1:]))
    if one_pack and rows:
        table.caption = (
            f"pack {safe(rows[0].pack)}; fixed: corrections; balanced: agreement averaged over the options "
            "answered (always showing the commonest option is at chance there)" + _trend_said(trend_blocks)
        )
    return table
