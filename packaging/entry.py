"""PyInstaller's entry script: the frozen app is the ``triage`` console script, nothing more."""

from triage.cli import main

raise SystemExit(main())
