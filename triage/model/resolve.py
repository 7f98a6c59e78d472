"""Which model to run: from ``--model``, ``TRIAGE_MODEL``, the config, or what is installed.

Order (the first that gives a model wins):

1. ``requested``: the ``--model NAME|PATH`` option;
2. the ``TRIAGE_MODEL`` environment variable (NAME or PATH);
3. the config file's ``model`` key (NAME or PATH);
4. ``qwen3-0.6b``, the product's model, if it is installed;
5. the best installed stand-in (catalog ``stand_in_rank``), with a one-line
   notice saying so and how to get Qwen3-0.6B.

A value that names a catalog entry is a catalog model; anything else that
looks like a path (contains a path separator, ends in ``.gguf``, or exists)
is a path model; a bare word that is neither is an unknown model name. An
empty or blank value (flag, variable or key alike) is no value: the next one decides.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from triage import gate
from triage.environment import text
from triage.errors import InputError, TriageError
from triage.model.catalog import Catalog, CatalogEntry, load_catalog
from triage.model.digest import sha256_file
from triage.model.gguf import GGUFInfo, read_gguf_info
from triage.model.installed import inspect_installed, pull_command, verify_installed
from triage.settings import Settings
from triage.store.files import write_text_atomic
from triage.store.paths import user_dirs

ENV_VAR = "TRIAGE_MODEL"


@dataclass(frozen=True)
class ModelRef:
    """A resolved model, ready to load.

    Attributes:
        name: catalog name, or the file name for a path model.
        path: the ``.gguf`` file.
        sha256: its sha256 (verified at pull for catalog models, computed for paths).
        source: ``"catalog"`` or ``"path"``.
        stand_in: False only for Qwen3-0.6B (the product's model).
        notice: a one-line message to show the user, or None.
    """

    name: str
    path: Path
    sha256: str
    source: str
    stand_in: bool
    notice: str | None


def _looks_like_path(spec: str) -> bool:
    return (
        os.sep in spec
        or (os.altsep is not None and os.altsep in spec)
        or spec.lower().endswith(".gguf")
        or spec.startswith(("~", "."))
        or Path(spec).exists()
    )


def _catalog_ref(entry: CatalogEntry, catalog: Catalog, notice: str | None = None) -> ModelRef:
    state = inspect_installed(entry)
    if state.state == "missing":
        hint = f"install it with `{pull_command(entry.name)}`"
        if entry.source == "huggingface":
            hint += " (needs Hugging Face), or pass --model PATH to a .gguf downloaded elsewhere"
        raise TriageError(f"model {entry.name} is not installed", hint=hint)
    if state.state == "changed":  # modified since it was hashed: hash it again before trusting its sha256
        state = verify_installed(entry)  # a mismatch raises, naming both hashes
    if not state.ok:
        raise TriageError(
            f"model {entry.name} cannot be used: {state.problem}",
            hint=f"run `{pull_command(entry.name)}` to download and verify it again",
        )
    assert state.sha256 is not None
    return ModelRef(entry.name, state.path, state.sha256, "catalog", entry.name != catalog.default, notice)


def _is_product_model(info: GGUFInfo) -> bool:
    """A path model counts as Qwen3-0.6B when its header says architecture qwen3 and size 0.6B.

    Deliberately simple: ``general.architecture == "qwen3"`` and "0.6b" in
    ``general.size_label`` or ``general.name`` (case-insensitive). Fine-tunes
    of Qwen3-0.6B therefore count too; that is intended.
    """
    label = f"{info.size_label or ''} {info.name or ''}".lower().replace(" ", "")
    return info.architecture == "qwen3" and "0.6b" in label


def _path_ref(spec: str, origin: str) -> ModelRef:
    path = Path(spec).expanduser()
    if not path.exists():
        raise InputError(
            f"{origin}: model file {path} does not exist",
            hint="give a .gguf path, or a catalog name (see `triage model list`)",
        )
    if path.is_dir():
        raise InputError(f"{origin}: {path} is a directory, not a .gguf model file")
    info = read_gguf_info(path)  # raises a specific InputError for non-GGUF, truncated, corrupt
    return ModelRef(path.name, path.resolve(), cached_sha256(path), "path", not _is_product_model(info), None)


def _from_spec(spec: str, origin: str, catalog: Catalog) -> ModelRef:
    spec = spec.strip()
    if not spec:
        raise InputError(f"{origin} is empty; give a catalog name or a .gguf path")
    if spec in catalog.entries:
        return _catalog_ref(catalog.entries[spec], catalog)
    if _looks_like_path(spec):
        return _path_ref(spec, origin)
    raise InputError(
        f"{origin}: unknown model {spec!r}; known models: {', '.join(catalog.names)}",
        hint="or give the path of a .gguf file",
    )


def resolve_model(requested: str | None = None, *, config: dict[str, object] | None = None) -> ModelRef:
    """Choose the model to run (see the module docstring for the order).

    Args:
        requested: the ``--model`` value (NAME or PATH), if given.
        config: the user's config; None reads the config file.

    Returns:
        The model, with a ``notice`` when a stand-in was picked automatically.

    Raises:
        InputError: unknown name (lists the known ones), missing path, a path
            that is not a GGUF, or a truncated or corrupt GGUF.
        TriageError: a named catalog model is not installed or needs a
            re-pull; or no model is installed at all.
    """
    catalog = load_catalog()
    if requested and requested.strip():
        return _from_spec(requested, f"--model {requested}", catalog)
    env = text(ENV_VAR)  # empty and blank alike: unset
    if env is not None:
        return _from_spec(env, f"{ENV_VAR}={env}", catalog)
    if config is None:
        from triage.store.config import load_config

        config = load_config()
    configured = Settings.of(config).model
    if isinstance(configured, str) and configured.strip():  # `model = ""` and `model = " "` alike: the default
        from triage.store.config import config_source

        return _from_spec(configured, config_source("model", configured), catalog)

    default = catalog.entries[catalog.default]
    if inspect_installed(default).present:
        return _catalog_ref(default, catalog)
    for entry in catalog.stand_ins():
        if inspect_installed(entry).present:
            notice = (
                f"using stand-in model {entry.name} because {default.name} is not installed; "
                f"get it with `{pull_command(default.name)}` (needs Hugging "
                f"Face) or pass --model PATH to {default.file or 'its .gguf'}"
            )
            return _catalog_ref(entry, catalog, notice)
    best = catalog.stand_ins()[0].name if catalog.stand_ins() else default.name
    raise NoModelError(
        "no model is installed",
        hint=(
            f"install one with `{pull_command(default.name)}`, or without "
            f"Hugging Face access `{pull_command(best)}`; or pass --model PATH"
        ),
    )


class NoModelError(TriageError):
    """Nothing was asked for and no model is installed: the first-run case."""


# --- sha256 of path models, cached -------------------------------------------------------


def _cache_file() -> Path:
    return user_dirs().cache / "sha256.json"


def _load_cache(path: Path) -> dict[str, object]:
    try:
        data = gate.load_json(path, "sha-cache")
    except (OSError, ValueError):  # ValueError: not UTF-8, not JSON, too large or nested too deep
        return {}  # a lost or damaged cache only costs a recomputation
    return data if isinstance(data, dict) else {}


def cached_sha256(path: Path, *, refresh: bool = False) -> str:
    """sha256 of ``path``, cached in ``<cache>/sha256.json`` by (realpath, size, mtime_ns).

    A model file is hundreds of MB; hashing it on every run would cost
    seconds. The cache entry is reused only while the file's size and
    modification time are unchanged; ``refresh`` hashes the file regardless
    (``triage model verify PATH``).
    """
    real = os.path.realpath(path)
    st = os.stat(real)
    key = f"{real}|{st.st_size}|{st.st_mtime_ns}"
    cache_path = _cache_file()
    cache = _load_cache(cache_path)
    hit = cache.get(key)
    if isinstance(hit, str) and len(hit) == 64 and not refresh:
        return hit
    digest = sha256_file(real)
    # Drop stale entries for the same file (older size/mtime) so the cache stays small.
    cache = {k: v for k, v in cache.items() if not k.startswith(f"{real}|")}
    cache[key] = digest
    if not gate.is_regular_or_absent(cache_path):
        return digest  # a FIFO or a folder in its place is not ours to replace
    try:
        write_text_atomic(cache_path, json.dumps(cache, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass  # a read-only cache dir must not stop the model from running
    return digest
