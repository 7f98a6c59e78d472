"""The ``triage`` command line: the TUI with no subcommand, else one of ``triage.commands``."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from types import ModuleType

from triage import __version__
from triage.commands._flags import add_model_options
from triage.errors import TriageError

DESCRIPTION = """\
Offline ticket triage. Paste a ticket and a local model answers each decision
(queue, urgency, sentiment, approval, type) from its next-token logits.

With no command, opens the terminal app."""


def _command_modules() -> list[ModuleType]:
    import triage.commands as pkg

    mods = [importlib.import_module(f"triage.commands.{m.name}") for m in pkgutil.iter_modules(pkg.__path__)]
    mods = [m for m in mods if hasattr(m, "NAME") and hasattr(m, "run")]
    return sorted(mods, key=lambda m: (getattr(m, "ORDER", 100), m.NAME))


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (cheap: no heavy imports)."""
    parser = argparse.ArgumentParser(
        prog="triage", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"triage {__version__}")
    add_model_options(parser)
    parser.add_argument(
        "--pack", metavar="PATH", help="criteria pack (TOML) for the app; default: the built-in support pack"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for mod in _command_modules():
        p = sub.add_parser(
            mod.NAME,
            help=mod.HELP,
            description=getattr(mod, "DESCRIPTION", mod.HELP),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``triage`` console script."""
    from triage import signals

    signals.install()  # SIGTERM is handled like Ctrl-C
    _fatal_signals_say_where()
    parser = build_parser()
    args = parser.parse_args(argv)
    run = getattr(args, "_run", None)
    try:
        _environment()
        if run is None:
            from triage.tui.launch import run_app

            return run_app(args)
        _config_notes()
        return int(run(args) or 0)
    except TriageError as exc:
        from triage.domain.ticket import printable

        print(f"triage: error: {printable(exc.message)}", file=sys.stderr)
        if exc.hint:
            print(f"  {printable(exc.hint)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"triage: {signals.word()}", file=sys.stderr)
        return signals.exit_code()
    except BrokenPipeError:
        return 0


def _environment() -> None:
    """Refuse a bad environment variable (a switch's word, TRIAGE_HOME) before anything, then start the log file."""
    from triage import environment
    from triage.logs import setup_file_logging
    from triage.store.paths import user_dirs

    environment.check()
    user_dirs()
    setup_file_logging()


def _config_notes() -> None:
    """One line on stderr per removed key the config file still holds (the app shows them in its notice band)."""
    from triage.domain.ticket import printable
    from triage.store.config import retired_notes

    for note in retired_notes():
        print(f"triage: note: {printable(note)}", file=sys.stderr)


def _fatal_signals_say_where() -> None:
    """On a native crash (SIGSEGV, SIGBUS: a model file truncated while mapped) print Python's stack.

    Without it the process only dies (status 135 for SIGBUS); with it stderr says ``Fatal Python
    error: Bus error`` and where (``triage/model/native.py`` in a decode: the model file).
    """
    import faulthandler

    try:
        if not faulthandler.is_enabled():
            faulthandler.enable()
    except (OSError, ValueError, AttributeError, RuntimeError):  # no usable stderr
        pass


if __name__ == "__main__":
    raise SystemExit(main())
