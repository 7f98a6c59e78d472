"""The bearer token of ``triage serve`` and ``triage score --server``: from a file or the environment, checked.

:func:`token_of` reads ``--token-file PATH`` (a regular file, at most :data:`MAX_TOKEN_FILE` bytes,
one trailing newline stripped), else ``$TRIAGE_SERVE_TOKEN`` (empty or blank: unset). ``--token
TOKEN`` still works, but every local user sees it in ``ps`` for the process's life, so it is
said once on stderr. A token is printable ASCII without spaces (an HTTP header carries it as
it is); anything else is refused at start, naming where it came from.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from triage.errors import InputError
from triage.gate import KINDS

ENV = "TRIAGE_SERVE_TOKEN"
MAX_TOKEN_FILE = KINDS["token"].limit  # bytes (the gate's bound): a token is tens of characters
PS_WARNING = (
    "warning: --token puts the token on the command line, where `ps` shows it to every user of this machine "
    f"while the command runs; use {ENV}=... or --token-file PATH instead"
)


def add_token_options(p: argparse.ArgumentParser | argparse._ArgumentGroup, what: str) -> None:
    """``--token-file PATH`` and ``--token TOKEN`` (the latter shown in ``ps``, so not recommended)."""
    p.add_argument(
        "--token-file",
        metavar="PATH",
        default=None,
        help=f"{what}, read from this file (a regular file; one trailing newline stripped; default: ${ENV})",
    )
    p.add_argument(
        "--token",
        metavar="TOKEN",
        default=None,
        help=f"{what} on the command line: `ps` shows it to every local user, so prefer ${ENV} or --token-file",
    )


def read_token_file(value: str) -> str:
    """The token in the file ``value``: a regular file of at most :data:`MAX_TOKEN_FILE` bytes, one trailing
    newline (``\\n`` or ``\\r\\n``) stripped.

    Raises:
        InputError: it does not exist, is no regular file (a FIFO, a folder, a device), is too large or
            cannot be read, or is not UTF-8.
    """
    from triage import gate

    path = Path(value).expanduser()
    try:
        raw = gate.read_bytes(path, "token")  # regular files only, opened O_NONBLOCK: a FIFO never blocks
    except gate.NotARegularFile:
        raise InputError(
            f"--token-file {value} is not a regular file", hint="write the token to a file (e.g. chmod 600) and name it"
        ) from None
    except gate.TooLarge:
        raise InputError(
            f"--token-file {value} is larger than {MAX_TOKEN_FILE} bytes; a token is one short line",
            hint="write only the token to the file",
        ) from None
    except FileNotFoundError as exc:
        raise InputError(
            f"--token-file {value}: {exc.strerror or exc}", hint="give the file that holds the token"
        ) from None
    except OSError as exc:
        raise InputError(f"--token-file {value} cannot be read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(
            f"--token-file {value} is not text (not UTF-8)",
            hint="write only the token, e.g. openssl rand -hex 16 > FILE",
        ) from None
    for end in ("\r\n", "\n"):
        if text.endswith(end):
            return text[: -len(end)]
    return text


def check_token(token: str, source: str, *, min_length: int = 8) -> str:
    """``token`` when it is at least ``min_length`` characters of printable ASCII without spaces.

    Raises:
        InputError: naming ``source`` (``--token``, ``--token-file F``, ``TRIAGE_SERVE_TOKEN``) and what is wrong.
    """
    bad = [i for i, c in enumerate(token) if not "\x21" <= c <= "\x7e"]
    if bad:  # positions only: the message never shows a piece of the secret
        raise InputError(
            f"the token of {source} holds {len(bad)} character(s) that are not printable ASCII or are spaces "
            f"(the first at position {bad[0] + 1}); an HTTP header cannot carry them as they are",
            hint='use letters, digits and punctuation only, e.g. "$(openssl rand -hex 16)"',
        )
    if len(token) < min_length:
        raise InputError(
            f"the token of {source} is {len(token)} character(s); it must be at least {min_length}",
            hint='e.g. "$(openssl rand -hex 16)"',
        )
    return token


def token_of(args: argparse.Namespace, say: Callable[[str], None], *, min_length: int = 8) -> str | None:
    """The token of ``--token-file``, else ``--token`` (said to show in ``ps``), else ``$TRIAGE_SERVE_TOKEN``.

    Raises:
        InputError: both flags, an unreadable file, or a token :func:`check_token` refuses.
    """
    from triage.environment import text

    given = getattr(args, "token", None)
    path = getattr(args, "token_file", None)
    if given is not None and path is not None:
        raise InputError("--token and --token-file both give the token", hint="give one of them (--token-file)")
    if path is not None:
        return check_token(read_token_file(path), f"--token-file {path}", min_length=min_length)
    if given is not None:
        say(PS_WARNING)
        return check_token(given, "--token", min_length=min_length)
    env = text(ENV)
    return check_token(env, ENV, min_length=min_length) if env is not None else None
