"""triage: offline ticket triage with a local small language model.

The core (packs, prompt, engine, readout, debias, bench, eval) is headless and
never imports Textual; the TUI lives in :mod:`triage.tui`.
"""

__version__ = "0.1.0"
