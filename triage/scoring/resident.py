"""The name the lab's schedules still import the prefix store by (:mod:`triage.scoring.prefix_store`).

``Serial``, ``decode_one`` and bench's ``full``, ``split``, ``restore`` and packed decodes annotate
their store as ``Resident``; they move to ``triage/lab/`` and switch to the store's own names at merge.
"""

from triage.scoring.prefix_store import PrefixStore as Resident
from triage.scoring.prefix_store import StableStore

__all__ = ["Resident", "StableStore"]
