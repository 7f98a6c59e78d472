"""A team's helpdesk export as rows of tickets: read any export shape, map its columns and values.

:mod:`~triage.intake.readers` reads CSV, JSON Lines, a JSON array or Parquet as a stream of
records; :mod:`~triage.intake.columns` turns a record into a ticket text, an id and label
values; :mod:`~triage.intake.values` maps a label value to an option of the pack. Lower layers
(evaluation, backlog, the ``pack init`` writer) use these; nothing here imports the CLI.
"""
