"""Scoring a backlog: many tickets from files, on a Ray cluster, resumable.

``rows`` reads the input (JSON Lines or Parquet; a file, folder or glob) into
keyed rows; ``output`` writes results and reads them back for ``--resume``;
``worker`` is what runs on each node (the model check and the scoring actor);
``ray_score`` is the driver. Only ``ray_score`` imports Ray, and only
``triage score --ray`` imports it.
"""
