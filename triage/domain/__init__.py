"""The domain: what a ticket, a thread, a criteria pack and a result are.

The bottom of the package: every layer above may import it, and it imports only
:mod:`triage.errors`, :mod:`triage.bounded` and :mod:`triage.assets_path`.
"""
