"""Learning from a team's labels, below the session and above scoring: what the product fits and applies.

* :mod:`~triage.learning.fit`: the fit policy, which head and calibration a run applies, and the notes why.
* :mod:`~triage.learning.fitstore`: where heads and calibrations are stored and which one a setup gets; it
  remembers the files it read (:mod:`~triage.learning.memo`).
* :mod:`~triage.learning.head_file`: the head file (``.npz``), written atomically and read back checked.
* :mod:`~triage.learning.learn`, :mod:`~triage.learning.logistic`: fitting a head (logistic regression,
  cross-validated against zero-shot); :mod:`~triage.learning.vector_scaling`: fitting a calibration.
* :mod:`~triage.learning.starter`: the built-in pack's starter head; :mod:`~triage.learning.relearn`: the
  app's re-fit from the history.
* :mod:`~triage.learning.labelled`, :mod:`~triage.learning.sources`: labelled rows from files and the history;
  :mod:`~triage.learning.scorer`, :mod:`~triage.learning.cache`: rows scored into a head's inputs, through
  the readout cache.

Scoring applies what is fitted here (:mod:`triage.scoring.head`, :mod:`triage.scoring.calibrate`) and
never imports this package; measuring (:mod:`triage.evaluation`) sits above the session and imports it.
"""
