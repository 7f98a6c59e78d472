"""Measuring decision quality on labelled tickets (``triage eval``, ``triage calibrate``, learn's holdout).

Above the session; what the product fits and scores rows with is :mod:`triage.learning`.

* :mod:`~triage.evaluation.metrics`: accuracy, balanced accuracy, macro-F1, ECE, Brier, confusion.
* :mod:`~triage.evaluation.variants`: raw / cyclic / cyclic+prior / calibrated from one pass.
* :mod:`~triage.evaluation.baseline`: TF-IDF + logistic regression (scikit-learn, optional).
* :mod:`~triage.evaluation.runner`: builds the report from rows scored by :mod:`triage.learning.scorer`.
* :mod:`~triage.evaluation.calibrating`: a pack's calibration, checked on a holdout (``triage calibrate``).
* :mod:`~triage.evaluation.labelled_runs`: what eval, calibrate and learn share: scoring labelled sets with
  a progress bar, bad-row reporting.
* :mod:`~triage.evaluation.report`: the Rich table and the JSON form.

Nothing here imports llama_cpp or scikit-learn at module level.
"""
