"""Scoring a backlog: many tickets from files, on a Ray cluster, resumable.

``rows`` reads the input (JSON Lines or Parquet; a file, folder or glob) into
keyed rows; ``output`` writes results and reads them back for ``--resume``;
``worker`` is what runs on each node (the model check and the scoring actor);
``ray_score`` is the driver. ``learn_rows`` scores ``triage learn --ray``'s rows on the
same cluster machinery (the fit stays on the driver). Only ``ray_score`` and ``learn_rows``
import Ray, and only ``triage score --ray`` and ``triage learn --ray`` import them.
"""
