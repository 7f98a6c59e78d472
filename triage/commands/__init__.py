"""One module per CLI subcommand.

Each module defines ``NAME``, ``HELP``, ``ORDER`` (position in ``--help``),
``add_arguments(parser)`` and ``run(args) -> int``. Modules here must import
only the standard library and light triage modules at import time, so that
``triage --help`` stays fast: llama_cpp, numpy and textual are imported inside
``run``.
"""
