"""``triage score --server URL``: the same tickets, records and exit codes, scored by a running ``triage serve``.

:func:`server_of` reads ``--server`` (else ``$TRIAGE_SERVER``, else the config's ``server``) and
refuses the flags that only mean something where the model runs; :func:`score_remote` sends each
checked ticket (a thread as its messages) to ``POST /v1/score`` and writes the record the server
answers, exactly the ``triage.result/3`` object local scoring writes. A ticket the server refuses gets an error record
and the next is sent; a server that cannot be used stops the run (:mod:`triage.serve.client`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from triage.errors import InputError

if TYPE_CHECKING:
    from triage.commands._records import RecordWriter
    from triage.domain.ticket import Ticket

ENV = "TRIAGE_SERVER"
# flags that only mean something where the model runs: (attribute, flag, its value when not given)
LOCAL_ONLY = (
    ("model", "--model", None),
    ("n_ctx", "--n-ctx", None),
    ("threads", "--threads", None),
    ("prompt", "--prompt", "auto"),
    ("strategy", "--strategy", None),
    ("calibration", "--calibration", None),
    ("no_calibration", "--no-calibration", False),
    ("head", "--head", None),
    ("no_head", "--no-head", False),
    ("history_file", "--history-file", None),
    ("pack_tokens", "--pack-tokens", None),
    ("ray", "--ray", None),
)
# score options sent as the request's fields of the same name, when given
FIELDS = ("mode", "readout", "orderings", "prior")


def server_of(args: argparse.Namespace, config: dict[str, object] | None = None) -> str | None:
    """The server to score on, or None to score here: ``--server``, else ``$TRIAGE_SERVER``, else the config's
    ``server`` key (``config``; None reads the config file), else none. An empty or blank ``TRIAGE_SERVER`` or
    ``server`` is unset; ``--server ''`` (empty or blank) scores here whatever the others say.

    Raises:
        InputError: a flag that means something only where the model runs is given too.
    """
    from triage.environment import text

    if args.server is not None and not args.server.strip():
        return None  # `--server ''`: here, whatever the environment or the config says
    url: str | None
    if args.server is not None:
        url, source, undo = args.server, "--server", "leave out --server"
    elif (env := text(ENV)) is not None:
        url, source, undo = env, f"{ENV} ({env})", f"unset {ENV} (or pass --server '')"
    else:
        from triage.settings import Settings
        from triage.store.config import config_source, load_config

        url = Settings.of(load_config() if config is None else config).server
        if url is None or not url.strip():
            return None
        source, undo = config_source("server", url), "pass --server '' (or delete the config's `server` line)"
    for attr, flag, unset in LOCAL_ONLY:
        if getattr(args, attr, unset) not in (unset, None):
            raise InputError(
                f"{flag} is for scoring here, but {source} sends the tickets to a server",
                hint=f"give it to `triage serve` instead, or {undo} to score here",
            )
    from triage.serve.client import parse_url

    parse_url(url)
    return url


def remote_token(args: argparse.Namespace, say: Callable[[str], None]) -> str | None:
    """The server's token (``--token-file``, ``--token``, ``$TRIAGE_SERVE_TOKEN``: :mod:`triage.commands._token`),
    checked before any ticket is read.

    Raises:
        InputError: a token that is not printable ASCII, or a token file that cannot be read.
    """
    from triage.commands._token import token_of

    return token_of(args, lambda m: say(f"triage: {m}"), min_length=1)


class InputRow(Protocol):
    """One input ticket as ``triage score`` read it (its ``Row``), or the error that stopped it from being one."""

    @property
    def line(self) -> int | None: ...

    @property
    def ticket_id(self) -> str | None: ...

    @property
    def text(self) -> str | None: ...

    @property
    def error(self) -> str | None: ...

    @property
    def messages(self) -> object: ...


def _pack_name(args: argparse.Namespace, health: Mapping[str, object], url: str) -> str | None:
    """The name of ``--pack``'s pack, checked to be the very pack the server loaded (by hash); None: the default.

    Raises:
        InputError: the server has no pack of that name, or one that differs from the file.
    """
    if not args.pack:
        return None
    from triage.domain.pack import resolve_pack

    pack = resolve_pack(args.pack)
    packs = health.get("packs", [])
    theirs = {p.get("name"): p for p in (packs if isinstance(packs, list) else []) if isinstance(p, dict)}
    if pack.name not in theirs:
        raise InputError(
            f"the server at {url} has no pack named {pack.name!r} (it has: {', '.join(map(str, theirs)) or 'none'})",
            hint=f"start the server with --pack {args.pack}, or leave out --pack to use its default",
        )
    if theirs[pack.name].get("hash") != pack.hash:
        raise InputError(
            f"the server's pack {pack.name!r} is not the one in {args.pack} (their hashes differ)",
            hint="restart the server with this file, or leave out --pack to use the server's",
        )
    return pack.name


def score_remote(
    url: str,
    args: argparse.Namespace,
    tickets: Sequence[tuple[InputRow, Ticket | None]],
    writer: RecordWriter,
    say: Callable[[str], None],
    token: str | None = None,
) -> int:
    """Score ``tickets`` (rows and their checked tickets, None for a bad row) on the server, with the bearer
    ``token`` (:func:`remote_token`); exit status.

    Raises:
        TriageError: the server cannot be used (unreachable, token, not triage, a refused option).
    """
    from triage.domain.result import ticket_result_from_dict
    from triage.render import print_table
    from triage.serve.client import ServeClient, TicketRefused

    failed = 0
    with ServeClient(url, token, say=lambda m: say(f"triage: {m}")) as client:
        health = client.health()
        pack = _pack_name(args, health, client.url)
        info = health.get("model")
        model = info.get("name") if isinstance(info, dict) else None
        say(f"triage: scoring on the server at {client.url} ({model or 'its model'}): no model loaded here")
        fields: dict[str, object] = {k: getattr(args, k, None) for k in FIELDS if getattr(args, k, None) is not None}
        if pack is not None:
            fields["pack"] = pack
        if args.criteria is not None:
            fields["criteria"] = args.criteria
        # as local scoring: kept only with --history (the server's own default keeps every ticket)
        fields["history"] = bool(args.history)
        for row, ticket in tickets:
            if ticket is None:
                failed += 1
                say(f"triage: error: {row.error}")
                writer.write({"ticket_id": row.ticket_id, "line": row.line, "error": row.error})
                continue
            body = {"id": ticket.id, **({"messages": row.messages} if row.messages is not None else {"text": row.text})}
            try:
                record = client.score({**body, **fields})
            except TicketRefused as exc:
                if row.line is None:  # one plain-text ticket: as locally, exit 2 and nothing on stdout
                    raise InputError(f"ticket {ticket.id}: {exc.message}") from None
                failed += 1
                say(f"triage: error: ticket {ticket.id}: {exc.message}")
                writer.write({"ticket_id": ticket.id, "line": row.line, "error": exc.message})
                continue
            warnings = record.get("warnings") or []
            for w in warnings if isinstance(warnings, list) else []:
                say(f"triage: warning: ticket {ticket.id}: {w}")
            if writer.fmt == "table":
                print_table(ticket_result_from_dict(record))
            writer.write(record)
    writer.close()
    return 1 if failed else 0
