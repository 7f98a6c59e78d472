"""The lab: measuring instruments kept out of the product core.

The letter readout and its option orderings (:mod:`triage.lab.letter`, :mod:`triage.lab.debias`),
the content-free prior (:mod:`triage.lab.prior`), ``serial`` (:mod:`triage.lab.serial`), bench's own
schedules (:mod:`triage.lab.full`, :mod:`triage.lab.split`, :mod:`triage.lab.restore`) and packed
decodes (:mod:`triage.lab.packed`). They plug into the engine through its seams, a schedule and a
readout (``Engine.score(..., schedule=..., readout=...)``): :mod:`triage.lab.score`. ``triage bench``,
``triage eval`` and ``triage calibrate`` measure with them; the product path never imports this package.
"""
