"""What bench measures: the tickets, the packs, the modes and how often.

The default ticket set is ``assets/bench-tickets.jsonl``: twelve real tickets of
three lengths (customer tweets, GitHub issues and short complaints, long CFPB
complaints); origins and licences are in ``assets/LICENSES/bench-tickets.md``.
``--tickets`` takes any JSON Lines file of ``{"id", "text"}`` rows instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from triage.domain.pack import Pack
from triage.domain.ticket import Ticket, jsonl_lines, make_ticket, read_text_file
from triage.errors import InputError
from triage.lab.options import DEFAULT_READOUT, BenchMode, Orderings, ReadoutName, effective_orderings

TICKETS_ASSET = "bench-tickets.jsonl"
LONG_PACK_ASSET = "long-stable-pack.toml"
DEFAULT_LIMIT = 12  # with --tickets: the first 12 rows
PER_KIND = 1  # the default run: the first ticket of each length
QUICK_LIMIT = 1
SPLIT_CRITERIA = 2  # split (as costly as full) scores the pack's first two criteria
PASTE_REPEATS, PASTE_REPEATS_QUICK = 5, 3  # the paste figures' repetitions (cold, prefill, score after) per ticket

# Timed modes, interleaved ticket by ticket. Keys are the JSON's mode keys.
# serial_long is serial/truncate with the long-stable pack (issue 7).
# letter_serial is the letter readout, every rotation, serial/truncate: triage's
# default before the label readout, timed beside it in the same run.
# fanout_learned is fanout with a learned head on every criterion (label readout only):
# what a head costs per ticket (issue 13).
# shared_learned is the same with the head fitted on the shared read position: every criterion read at
# one short cue after the ticket instead of at its own tail (issue 25).
MODE_KEYS = (
    "full",
    "serial_truncate",
    "serial_restore",
    "fanout",
    "fanout_learned",
    "shared_learned",
    "letter_serial",
    "serial_long",
)
SERIAL_MODES = ("serial_truncate", "serial_restore")  # the two serial strategies
SPLIT = "split"  # the exactness reference; also timed, but only on some tickets
SHOWN_MODES = (*MODE_KEYS, SPLIT)  # every mode a report can hold, in the order tables and charts show them
REUSE_MODES = ("serial_truncate", "serial_restore", "fanout", "fanout_learned", "shared_learned", "letter_serial")
LETTER_MODE = "letter_serial"
LEARNED_MODE = "fanout_learned"
SHARED_MODE = "shared_learned"
SHARED_READ = "shared:answer"  # the cue the shared mode's head reads at (learn --read shared's default)
HEAD_READ = {LEARNED_MODE: "tail", SHARED_MODE: SHARED_READ}  # the modes that apply a head, and where it reads
# Each mode's LabOptions mode. full, serial_restore and split decode with a schedule of bench's own,
# passed to the engine (the lab's triage.lab.full, .restore, .split: BenchRunner._score); the others with the engine's.
ENGINE_MODE: dict[str, BenchMode] = {
    "fanout_learned": "fanout",
    "shared_learned": "fanout",
    "letter_serial": "serial",
    "full": "full",
    "serial_truncate": "serial",
    "serial_restore": "serial",
    "fanout": "fanout",
    "serial_long": "serial",
    "split": "split",
}

# Tail-probe sizes: single tails of these many tokens after a real ticket prefix.
# They span well past the pack's own tails (about 28-40 tokens) so that the
# cost model can tell the fixed part from the per-token part.
PROBE_SIZES = (8, 16, 32, 64, 128, 256)
QUICK_PROBE_SIZES = (8, 96)  # plus the pack's typical tail size, always added


@dataclass(frozen=True)
class BenchTicket:
    """One ticket of the bench set."""

    id: str
    text: str
    kind: str  # short | medium | long
    source: str = ""
    quick: bool = False

    def as_ticket(self) -> Ticket:
        """The ticket to score, under its bench id (results and reports name it)."""
        return make_ticket(self.text, self.id)


@dataclass(frozen=True)
class Workload:
    """Everything that decides what a bench run does."""

    tickets: tuple[BenchTicket, ...]
    pack: Pack
    long_pack: Pack | None
    orderings: Orderings
    repeats: int
    quick: bool
    split_ids: frozenset[str]  # tickets also scored in mode "split" (drift reference)
    split_criteria: int | None  # split scores the pack's first N criteria (None: all)
    probe_ids: tuple[str, ...]  # tickets whose prefix hosts the tail probe
    probe_sizes: tuple[int, ...]
    session_ids: tuple[str, ...]  # tickets of the cold-start session (issue 7)
    tickets_source: str
    notes: list[str] = field(default_factory=list)
    readout: ReadoutName = DEFAULT_READOUT  # the readout of every mode but letter_serial
    paste: tuple[BenchTicket, ...] = ()  # scored cold and after a prefill (triage.bench.paste): a tweet, a long one
    paste_repeats: int = PASTE_REPEATS

    def mode_readout(self, mode: str) -> tuple[ReadoutName, Orderings]:
        """(readout, orderings) a mode scores with: letter_serial is always letters in every rotation."""
        if mode == LETTER_MODE:
            return "letter", "cyclic"
        return self.readout, effective_orderings(self.readout, self.orderings)

    @property
    def modes(self) -> tuple[str, ...]:
        """The timed modes, in their base interleaving order."""
        return tuple(
            m
            for m in MODE_KEYS
            if (m != "serial_long" or self.long_pack is not None) and (m not in HEAD_READ or self.readout == "label")
        )

    def describe(self) -> dict[str, object]:
        """The workload as JSON: what exactly was run."""
        return {
            "quick": self.quick,
            "tickets_source": self.tickets_source,
            "tickets": [{"id": t.id, "kind": t.kind, "source": t.source, "chars": len(t.text)} for t in self.tickets],
            "paste": {"tickets": [t.id for t in self.paste], "repeats": self.paste_repeats},
            "pack": {
                "name": self.pack.name,
                "version": self.pack.version,
                "hash": self.pack.hash,
                "criteria": len(self.pack.criteria),
            },
            "long_pack": None
            if self.long_pack is None
            else {"name": self.long_pack.name, "version": self.long_pack.version, "hash": self.long_pack.hash},
            "readout": self.readout,
            "orderings": effective_orderings(self.readout, self.orderings),
            "letter_serial": "letter readout, cyclic orderings, serial/truncate (the default before the label readout)",
            "fanout_learned": (
                "fanout with a learned head on every criterion (random "
                "weights of the real shape: the cost, not the decisions)"
            ),
            "repeats": self.repeats,
            "modes": list(self.modes),
            "split_tickets": sorted(self.split_ids),
            "split_criteria": [c.id for c in self.pack.criteria[: self.split_criteria or None]],
            "probe_tickets": list(self.probe_ids),
            "probe_sizes": list(self.probe_sizes),
            "session_tickets": list(self.session_ids),
            "notes": list(self.notes),
        }


def kind_of(text: str) -> str:
    """short / medium / long by characters (a tweet, an issue, a long complaint)."""
    n = len(text)
    return "short" if n < 200 else "medium" if n < 1000 else "long"


def read_tickets(path: Path) -> list[BenchTicket]:
    """Read a JSON Lines ticket file: ``{"id", "text"}`` plus optional ``kind``, ``source``, ``quick``.

    Raises:
        InputError: the file is missing, or a line is not such an object.
    """
    out: list[BenchTicket] = []
    for item in jsonl_lines(read_text_file(path, "ticket file")):
        n, obj = item.line, item.obj
        if obj is None:
            raise InputError(f"{path} line {n}: {item.error}")
        text = obj.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InputError(f'{path} line {n}: expected an object with a non-empty "text"')
        out.append(
            BenchTicket(
                id=item.row_id(),
                text=text,
                kind=str(obj.get("kind") or kind_of(text)),
                source=str(obj.get("source", path.name)),
                quick=bool(obj.get("quick", False)),
            )
        )
    if not out:
        raise InputError(f"ticket file {path} holds no tickets")
    return out


def _per_kind(rows: list[BenchTicket], n: int) -> list[BenchTicket]:
    """The first ``n`` tickets of each kind, in file order."""
    count: dict[str, int] = {}
    out = []
    for t in rows:
        if count.get(t.kind, 0) < n:
            out.append(t)
            count[t.kind] = count.get(t.kind, 0) + 1
    return out


def _first_of_each_kind(tickets: tuple[BenchTicket, ...]) -> list[str]:
    seen: dict[str, str] = {}
    for t in tickets:
        seen.setdefault(t.kind, t.id)
    return list(seen.values())


def make_workload(
    *,
    pack: Pack,
    long_pack: Pack | None,
    tickets_path: Path | None = None,
    quick: bool = False,
    limit: int | None = None,
    repeats: int = 1,
    orderings: Orderings | None = None,
    readout: ReadoutName = DEFAULT_READOUT,
) -> Workload:
    """Choose tickets and per-phase subsets for a run.

    Quick (``--quick``): the ticket flagged ``quick`` in the bench set (a
    tweet; or the first row of ``--tickets``), one option order per criterion
    (``orderings=none``: 5 prompts instead of 18) unless ``orderings`` is given,
    one repeat; split on it for the pack's first two criteria; the tail probe at
    8 and 96 tokens and the pack's typical tail size; the warm-up is the stable
    block's prefill only; no cold/warm restart (the cache hit rate is the steady
    one, with the stable block resident). The pack, its criteria, and the
    full/serial/fanout modes are those of a full run.

    Default: the first ticket of each length (3), cyclic orderings, split on
    the tweet and the medium ticket for the first two criteria, the tail probe
    at 6 sizes on the tweet and the long ticket, and the cold/warm restart
    session over all three. ``limit`` (or ``--tickets``) takes the first N rows
    instead.
    """
    from triage.assets_path import asset

    if repeats < 1:
        raise InputError("--repeat must be at least 1")
    if limit is not None and limit < 1:
        raise InputError("--limit must be at least 1")
    source = str(tickets_path) if tickets_path else f"assets/{TICKETS_ASSET}"
    rows = read_tickets(Path(tickets_path) if tickets_path else asset(TICKETS_ASSET))
    notes: list[str] = []
    if quick and limit is None:
        flagged = [t for t in rows if t.quick]
        chosen = flagged[:QUICK_LIMIT] if len(flagged) >= QUICK_LIMIT else rows[:QUICK_LIMIT]
        notes.append(
            "quick: 1 ticket (a tweet), orderings=none unless --orderings is given (one option order per criterion), "
            "1 repeat, split for the first 2 criteria, tail probe at 8/96 tokens and the typical tail, warm-up = the "
            "stable block's prefill, no cold/warm restart; same pack, criteria and modes as a full run. "
            "With one ticket there is no spread across tickets."
        )
    elif limit is None and not tickets_path:
        chosen = _per_kind(rows, PER_KIND)
    else:
        chosen = rows[: (limit or DEFAULT_LIMIT)]
    tickets = tuple(chosen)
    ids = [t.id for t in tickets]
    if orderings is None:
        orderings = "none" if quick else "cyclic"
    if quick:
        split_ids = frozenset(ids[:1])
        probe_ids = tuple(ids[:1])
        session_ids: tuple[str, ...] = ()
        sizes: tuple[int, ...] = QUICK_PROBE_SIZES
    else:
        firsts = _first_of_each_kind(tickets)
        # split costs as much as full: on a tweet and a medium ticket, not on a long one
        split_ids = frozenset(t.id for t in tickets if t.id in firsts and t.kind != "long") or frozenset(firsts[:1])
        probe_ids = tuple(firsts[:: max(1, len(firsts) - 1)])  # the first and last kinds: shortest and longest prefix
        session_ids = tuple(firsts)
        sizes = PROBE_SIZES
    paste = tuple(t for kind in ("short", "long") for t in [next((r for r in rows if r.kind == kind), None)] if t)
    return Workload(
        paste=paste,
        paste_repeats=PASTE_REPEATS_QUICK if quick else PASTE_REPEATS,
        tickets=tickets,
        pack=pack,
        long_pack=long_pack,
        orderings=orderings,
        repeats=repeats,
        quick=quick,
        split_ids=split_ids,
        split_criteria=min(SPLIT_CRITERIA, len(pack.criteria)),
        probe_ids=probe_ids,
        probe_sizes=sizes,
        session_ids=session_ids,
        tickets_source=source,
        notes=notes,
        readout=readout,
    )
