"""Criteria packs: the decisions triage makes about a ticket.

A pack is a TOML file::

    [pack]                      # optional; defaults below
    name = "support"
    version = "1"
    instruction = "You are a support triage assistant. ..."
    context = "Our products: ..."  # optional background, part of the stable block

    [[criterion]]
    id = "urgency"
    question = "How urgent is this ticket?"
    options = [
      { id = "high", label = "High", description = "money lost, service down" },
      { id = "low", label = "Low" },
    ]
    # Each option may give an ``answer``: the word the model answers with
    # (default: the id made readable, ``credit_card`` -> ``credit card``),
    # and ``aliases``: the team's own names for it in exports
    # (``aliases = ["Billing and Payments", "Billing"]``).

    [[example]]                 # optional few-shot examples, part of the stable block
    text = "My card was charged twice."
    labels = { urgency = "high" }

A pack has a canonical serialisation (:meth:`Pack.canonical_json`) and a hash of
it (:attr:`Pack.hash`). Together with the model's sha256 and the prompt-format
version, the hash names every cached prefix.

Aliases are not part of the hash: no prompt shows them (they only map the values of
an export's label column to options, :mod:`triage.intake.values`), so adding one
keeps every cached prefix, calibration and learned head of the pack valid, and a
pack without aliases hashes as it always did.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from triage import gate
from triage.bounded import Bounded
from triage.errors import InputError

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
DEFAULT_INSTRUCTION = (
    "You are a support triage assistant. Read the customer's ticket, then answer "
    "each question about it with the best option."
)
DEFAULT_PACK_NAME = "support"


class PackError(InputError):
    """A pack file that cannot be used. The message names file, criterion and field."""


@dataclass(frozen=True)
class Option:
    """One answer a criterion allows.

    ``label`` is what people see, and what the letter readout shows in every tail.
    ``description`` (optional) says what the option covers; it goes in the
    stable block, which is prefilled once per pack rather than once per tail.
    ``answer`` (optional) is the word the label readout reads: the model's
    probability of saying it. Default: the id made readable (:attr:`answer_text`).
    """

    id: str
    label: str
    description: str = ""
    answer: str = ""
    aliases: tuple[str, ...] = ()  # not in the hash: no prompt shows them

    @property
    def answer_text(self) -> str:
        """What the model answers for this option: ``answer``, else the id made readable."""
        return self.answer or readable_id(self.id)


@dataclass(frozen=True)
class Criterion:
    """One decision: a question and its lettered options."""

    id: str
    question: str
    options: tuple[Option, ...]

    def option(self, option_id: str) -> Option:
        """The option with this id (KeyError when absent)."""
        for opt in self.options:
            if opt.id == option_id:
                return opt
        raise KeyError(option_id)


@dataclass(frozen=True)
class Example:
    """A labelled example ticket shown to the model in the stable block."""

    text: str
    labels: dict[str, str] = field(hash=False, compare=True)


@dataclass(frozen=True)
class Pack:
    """A named, versioned set of criteria with an instruction and optional examples."""

    name: str
    version: str
    instruction: str
    criteria: tuple[Criterion, ...]
    examples: tuple[Example, ...] = ()
    context: str = ""  # optional background text (glossary, products) for the stable block
    source: str = ""  # where it was loaded from; not part of the hash

    def to_dict(self) -> dict[str, object]:
        """Plain data, in a fixed key order (the canonical form)."""
        return {
            "pack": {
                "name": self.name,
                "version": self.version,
                "instruction": self.instruction,
                "context": self.context,
            },
            "criterion": [
                {"id": c.id, "question": c.question, "options": [_option_dict(o) for o in c.options]}
                for c in self.criteria
            ],
            "example": [{"text": e.text, "labels": dict(sorted(e.labels.items()))} for e in self.examples],
        }

    def canonical_json(self) -> str:
        """Canonical serialisation: sorted keys, no whitespace, UTF-8 kept as is."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @property
    def hash(self) -> str:
        """sha256 of the canonical serialisation (hex, first 16 characters)."""
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()[:16]

    def criterion_indices(self, ids: Iterable[str]) -> list[int]:
        """Indices, in pack order, of the criteria named by ``ids`` (any order, repeats allowed).

        Raises:
            InputError: no id given, or an id this pack does not have (naming the ones it has).
        """
        wanted = list(dict.fromkeys(ids))
        known = [c.id for c in self.criteria]
        unknown = [i for i in wanted if i not in known]
        if unknown:
            raise InputError(
                f"pack {self.name!r} has no criterion "
                f"{', '.join(map(repr, unknown))}; its criteria are {', '.join(known)}"
            )
        if not wanted:
            raise InputError(f"no criteria chosen from pack {self.name!r}; its criteria are {', '.join(known)}")
        return [k for k, cid in enumerate(known) if cid in wanted]

    def criterion(self, criterion_id: str) -> Criterion:
        """The criterion with this id (KeyError when absent)."""
        for c in self.criteria:
            if c.id == criterion_id:
                return c
        raise KeyError(criterion_id)


def readable_id(option_id: str) -> str:
    """An option id as a word a model would answer: ``credit_card`` -> ``credit card``."""
    return " ".join(option_id.replace("_", " ").replace("-", " ").split())


def _option_dict(o: Option) -> dict[str, str]:
    d = {"id": o.id, "label": o.label}
    if o.description:  # absent when empty, so packs without descriptions keep their hash
        d["description"] = o.description
    if o.answer:
        d["answer"] = o.answer
    return d


def _text(value: object, where: str, field_name: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if value is None:
        raise PackError(f"{where}: field {field_name!r} is missing")
    if not isinstance(value, str):
        raise PackError(f"{where}: field {field_name!r} must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise PackError(f"{where}: field {field_name!r} is empty")
    return value.strip()


def _version(value: object, where: str) -> str:
    """``version`` as text. A whole number is fine; a TOML float is not: ``1.10`` reads as 1.1."""
    if isinstance(value, bool) or isinstance(value, float) or not isinstance(value, str | int):
        if isinstance(value, bool):
            shown = "true or false"
        else:
            shown = f"the number {value!r}" if isinstance(value, float) else type(value).__name__
        raise PackError(
            f"{where}: field 'version' must be text, got {shown}", hint='write it in quotes, e.g. version = "1.10"'
        )
    return str(value).strip() or "1"


def parse_pack(data: dict[str, object], source: str = "<pack>") -> Pack:
    """Validate parsed TOML data and build a :class:`Pack`.

    Raises:
        PackError: naming the file, the criterion and the field at fault.
    """
    head = data.get("pack", {})
    if not isinstance(head, dict):
        raise PackError(f"{source}: [pack] must be a table")
    unknown = set(data) - {"pack", "criterion", "example"}
    if unknown:
        raise PackError(
            f"{source}: unknown top-level key(s) {sorted(unknown)}; expected [pack], [[criterion]], [[example]]"
        )
    name = _text(head.get("name", _default_name(source)), f"{source} [pack]", "name")
    version = _version(head.get("version", "1"), f"{source} [pack]")
    instruction = _text(head.get("instruction", DEFAULT_INSTRUCTION), f"{source} [pack]", "instruction")
    context = _text(head.get("context"), f"{source} [pack]", "context", required=False)
    unknown_head = set(head) - {"name", "version", "instruction", "context"}
    if unknown_head:
        raise PackError(
            f"{source} [pack]: unknown field(s) {sorted(unknown_head)}; expected name, version, instruction, context"
        )

    raw_criteria = data.get("criterion")
    if not isinstance(raw_criteria, list) or not raw_criteria:
        raise PackError(f"{source}: no [[criterion]] entries; a pack needs at least one")
    criteria: list[Criterion] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_criteria, 1):
        if not isinstance(raw, dict):
            raise PackError(f"{source}: criterion #{i} must be a table")
        cid = _text(raw.get("id"), f"{source}: criterion #{i}", "id")
        where = f"{source}: criterion {cid!r}"
        if cid in seen:
            raise PackError(f"{where}: duplicate id {cid!r}; criterion ids must be unique")
        seen.add(cid)
        question = _text(raw.get("question"), where, "question")
        raw_options = raw.get("options")
        if not isinstance(raw_options, list):
            raise PackError(f"{where}: field 'options' must be a list of {{ id, label }} tables")
        if len(raw_options) < 2:
            raise PackError(f"{where}: field 'options' has {len(raw_options)} option(s); a criterion needs at least 2")
        if len(raw_options) > len(LETTERS):
            raise PackError(
                f"{where}: field 'options' has {len(raw_options)} options; at most {len(LETTERS)} (one per letter A-Z)"
            )
        options: list[Option] = []
        option_ids: set[str] = set()
        for j, opt in enumerate(raw_options, 1):
            if not isinstance(opt, dict):
                raise PackError(f"{where}: option #{j} must be a table {{ id = ..., label = ... }}")
            oid = _text(opt.get("id"), f"{where}, option #{j}", "id")
            if not readable_id(oid) and not str(opt.get("answer") or "").strip():
                raise PackError(
                    f"{where}, option {oid!r}: the id has no letters or digits, so the model would be asked to "
                    "answer nothing (_ and - are read as spaces)",
                    hint='name the option, e.g. id = "other", or give it an answer: answer = "..."',
                )
            if oid in option_ids:
                raise PackError(f"{where}: duplicate option id {oid!r}")
            option_ids.add(oid)
            label = _text(opt.get("label"), f"{where}, option {oid!r}", "label")
            if "\n" in label:
                raise PackError(f"{where}, option {oid!r}: field 'label' must be one line")
            description = _text(opt.get("description"), f"{where}, option {oid!r}", "description", required=False)
            answer = _text(opt.get("answer"), f"{where}, option {oid!r}", "answer", required=False)
            if "\n" in answer:
                raise PackError(f"{where}, option {oid!r}: field 'answer' must be one line (a word or a few)")
            unknown_opt = set(opt) - {"id", "label", "description", "answer", "aliases"}
            if unknown_opt:
                raise PackError(
                    f"{where}, option {oid!r}: unknown field(s) {sorted(unknown_opt)}; "
                    "expected id, label, description, answer, aliases"
                )
            aliases = _aliases(opt.get("aliases"), f"{where}, option {oid!r}")
            options.append(Option(oid, label, " ".join(description.split()), " ".join(answer.split()), aliases))
        _check_names(options, where)
        answers: dict[str, str] = {}
        for o in options:
            said = o.answer_text.casefold()
            if said in answers:
                raise PackError(
                    f"{where}: options {answers[said]!r} and {o.id!r} have the same answer {o.answer_text!r}; "
                    "the label readout could not tell them apart",
                    hint='give one of them its own `answer = "..."`',
                )
            answers[said] = o.id
        criteria.append(Criterion(cid, question, tuple(options)))

    examples: list[Example] = []
    raw_examples = data.get("example", [])
    if not isinstance(raw_examples, list):
        raise PackError(f"{source}: [[example]] entries must be tables")
    by_id = {c.id: c for c in criteria}
    for k, raw in enumerate(raw_examples, 1):
        where = f"{source}: example #{k}"
        if not isinstance(raw, dict):
            raise PackError(f"{where} must be a table")
        text = _text(raw.get("text"), where, "text")
        labels = raw.get("labels", {})
        if not isinstance(labels, dict) or not labels:
            raise PackError(f"{where}: field 'labels' must be a table {{ criterion_id = option_id }}")
        for cid, oid in labels.items():
            if cid not in by_id:
                raise PackError(f"{where}: field 'labels' names unknown criterion {cid!r}")
            if not isinstance(oid, str) or oid not in {o.id for o in by_id[cid].options}:
                raise PackError(f"{where}: field 'labels.{cid}' = {oid!r} is not an option of criterion {cid!r}")
        examples.append(Example(text, {str(c): str(o) for c, o in labels.items()}))
    return Pack(name, version, instruction, tuple(criteria), tuple(examples), context, source)


def value_key(value: str) -> str:
    """How an export's label value is compared with an option's names: case and spacing ignored."""
    return " ".join(value.split()).casefold()


def option_names(o: Option) -> list[str]:
    """The names a label value may match an option by: its id (also made readable), label and aliases."""
    return [o.id, readable_id(o.id), o.label, *o.aliases]


def _aliases(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise PackError(
            f"{where}: field 'aliases' must be a list of strings, e.g. aliases = [\"Billing and Payments\"]"
        )
    out: list[str] = []
    for a in value:
        a = " ".join(a.split())
        if not a:
            raise PackError(f"{where}: field 'aliases' has an empty name")
        if value_key(a) not in {value_key(x) for x in out}:
            out.append(a)
    return tuple(out)


def _check_names(options: list[Option], where: str) -> None:
    """No two options may share a name (id, label or alias): a label value must map to one option."""
    owner: dict[str, str] = {}
    for o in options:
        for name in dict.fromkeys(value_key(n) for n in option_names(o)):
            other = owner.get(name)
            if other is not None and other != o.id and (o.aliases or _option_by(options, other).aliases):
                raise PackError(
                    f"{where}: options {other!r} and {o.id!r} both have the name {name!r} (id, label or alias); "
                    "a label value could not be mapped to one of them",
                    hint="remove that alias from one of them",
                )
            owner.setdefault(name, o.id)


def _option_by(options: list[Option], oid: str) -> Option:
    return next(o for o in options if o.id == oid)


def _default_name(source: str) -> str:
    """A pack without [pack].name is named after its file, or its folder for ``criteria.toml``."""
    if source == "<pack>":
        return DEFAULT_PACK_NAME
    path = Path(source)
    return path.parent.name if path.stem == "criteria" and path.parent.name else path.stem


def load_pack(path: str | Path) -> Pack:
    """Load and validate a pack file.

    Raises:
        PackError: the file is missing, not UTF-8 TOML, or invalid (see :func:`parse_pack`).
    """
    path = Path(path)
    try:
        raw = gate.read_bytes(path, "pack")  # a FIFO, device or folder is refused, never waited on
    except FileNotFoundError:
        raise PackError(
            f"pack file {path} does not exist",
            hint="pass --pack PATH to a criteria TOML file, or leave it out for the built-in support pack",
        ) from None
    except IsADirectoryError:
        raise PackError(f"pack path {path} is a directory; pass the .toml file itself") from None
    except gate.TooLarge as exc:
        raise PackError(f"pack file {path} is not read: {exc}", hint="check that it is the right file") from None
    except OSError as exc:
        raise PackError(f"cannot read pack file {path}: {exc.strerror}", hint="pass the .toml file itself") from None
    try:
        data = gate.loads_toml(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise PackError(f"pack file {path} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise PackError(f"pack file {path} is not valid TOML: {exc}") from exc
    except Bounded as exc:  # a pack nests 3 deep; tomllib recurses per level
        raise PackError(
            f"pack file {path} is nested too deep to be a pack ({exc}: arrays or tables inside each other)"
        ) from None
    return parse_pack(data, str(path))


def default_pack() -> Pack:
    """The built-in support pack shipped in ``assets/support.toml``."""
    from triage.assets_path import asset

    return load_pack(asset("support.toml"))


def resolve_pack(path: str | Path | None) -> Pack:
    """``--pack PATH`` when given, else the built-in support pack."""
    return load_pack(path) if path else default_pack()
