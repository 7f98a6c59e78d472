"""Measuring decision quality on labelled tickets (``triage eval``, ``triage calibrate``).

* :mod:`~triage.learning.labelled`: labelled JSONL rows, bad-row reporting, the id-hash split.
* :mod:`~triage.evaluation.metrics`: accuracy, balanced accuracy, macro-F1, ECE, Brier, confusion.
* :mod:`~triage.learning.cache`: per-ticket readouts cached on disk, so re-runs do not re-score.
* :mod:`~triage.evaluation.variants`: raw / cyclic / cyclic+prior / calibrated from one pass.
* :mod:`~triage.evaluation.baseline`: TF-IDF + logistic regression (scikit-learn, optional).
* :mod:`~triage.evaluation.runner`: scores rows through the engine and builds the report.
* :mod:`~triage.evaluation.report`: the Rich table and the JSON form.

Nothing here imports llama_cpp or scikit-learn at module level.
"""
