"""``triage bench``: how fast scoring is, where the time goes, and whether reuse is exact.

Modules: :mod:`~triage.bench.workload` (tickets, packs, modes),
:mod:`~triage.bench.runner` (the interleaved schedule and the measurements),
:mod:`~triage.bench.stats` (medians, spread, least squares),
:mod:`~triage.bench.report` (figures and JSON) with :mod:`~triage.bench.samples`,
:mod:`~triage.bench.drift` and :mod:`~triage.bench.caches`, :mod:`~triage.bench.summary`
(the plain summary and the words of ratios), :mod:`~triage.bench.chart` (SVG),
:mod:`~triage.bench.terminal` (Rich summary), :mod:`~triage.bench.machine`
(CPU, flags, load). The schedules only bench runs live in the lab, passed to ``Engine.score``
as its ``schedule``: :mod:`~triage.lab.full` (every prompt whole, the baseline),
:mod:`~triage.lab.restore` (serial back to the prefix by a saved state) and
:mod:`~triage.lab.split` (the exactness reference); and :mod:`~triage.lab.packed`
(several tickets in one decode). Nothing here is imported by ``triage --help``.
"""
