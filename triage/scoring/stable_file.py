"""The prefix store's disk tier: the stable block's KV state, kept across tickets and restarts.

The store (:mod:`triage.scoring.prefix_store`) asks it for the stable block, the entry every
ticket hits; this module only reads and writes the ``.kvstate`` files (it calls no model).

Everything before the ticket (instruction, pack context, examples) is the same
for every ticket of a pack. Its KV state is computed once per (model sha256,
prompt-format version, pack hash), kept in memory, and written to a file in the
user cache dir, so the first ticket after a restart does not pay its prefill.

A cache file is a versioned artifact, never trusted blindly. It holds a header
(magic, format version, key, token count, sha256 of the token ids, payload size
and sha256) and the payload from ``llama_state_seq_get_data``. On load every
field is checked; any mismatch or corruption deletes the file and counts as a
miss, so the engine recomputes. Writes go to a temp file and are renamed into
place. The folder is bounded: least recently used files go first past the size
cap, and files older than the TTL are dropped.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import struct
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from triage import gate
from triage.settings import DEFAULTS, Settings
from triage.store.files import write_text_atomic

log = logging.getLogger(__name__)

MAGIC = b"TRIAGEKV"
FORMAT = 1
_HEAD = struct.Struct("<8sIHI32sQ32s")  # magic, format, key length, n tokens, tokens sha, payload size, payload sha
DEFAULT_MAX_MB = DEFAULTS.stable_cache_mb
DEFAULT_TTL_DAYS = DEFAULTS.stable_cache_ttl_days
MEMORY_ENTRIES = 4


WRITER = "_pid"  # last.json: the process that wrote the record


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists (POSIX; elsewhere we cannot tell cheaply, so no)."""
    if os.name != "posix" or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    except OSError:
        return False
    return True


def _forget(path: Path) -> bool:
    """Delete a cache file if we may; a read-only or foreign folder keeps it (True when deleted)."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.info("cannot delete stable cache file %s: %s", path, exc.strerror or exc)
        return False
    return True


def _reason(exc: BaseException) -> str:
    return str(exc.strerror or exc) if isinstance(exc, OSError) else str(exc)


def tokens_digest(tokens: tuple[int, ...]) -> bytes:
    """sha256 of token ids (little-endian int32s)."""
    return hashlib.sha256(struct.pack(f"<{len(tokens)}i", *tokens)).digest()


@dataclass
class CacheStats:
    """What the cache did, for instrumentation."""

    memory_hits: int = 0
    disk_hits: int = 0
    misses: int = 0
    rejected: int = 0  # files found but invalid (corrupt, wrong key, wrong tokens)
    writes: int = 0
    evicted: int = 0


class StableCache:
    """Stable-block KV states in memory and in ``folder``.

    Args:
        folder: where the ``.kvstate`` files live.
        max_bytes: LRU cap on the folder's total size.
        ttl_s: files not used for this long are deleted.
    """

    def __init__(
        self, folder: Path, *, max_bytes: int = DEFAULT_MAX_MB << 20, ttl_s: float = DEFAULT_TTL_DAYS * 86400
    ) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self.stats = CacheStats()
        self._memory: OrderedDict[str, tuple[bytes, bytearray]] = OrderedDict()
        self._last: dict[str, str] | None = None  # the stable block this process used last
        self._said: set[Path] = set()  # files the log has already named

    @classmethod
    def default(cls) -> StableCache:
        """The cache in the user cache dir, sized by config (``stable_cache_mb``, ``stable_cache_ttl_days``)."""
        from triage.store.config import load_config
        from triage.store.paths import user_dirs

        try:
            config = load_config()
        except Exception:  # a bad config file must not disable scoring; the CLI reports it elsewhere
            config = {}
        settings = Settings.of(config)
        mb, days = int(settings.stable_cache_mb), float(settings.stable_cache_ttl_days)
        return cls(user_dirs().cache / "stable", max_bytes=mb << 20, ttl_s=days * 86400)

    def path(self, key: str) -> Path:
        """The file for ``key``."""
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in key)
        return self.folder / f"{safe}.kvstate"

    def get(self, key: str, tokens: tuple[int, ...]) -> bytearray | None:
        """The stored state for ``key`` whose token ids are exactly ``tokens``, or None."""
        digest = tokens_digest(tokens)
        mem = self._memory.get(key)
        if mem is not None and mem[0] == digest:
            self._memory.move_to_end(key)
            self.stats.memory_hits += 1
            return mem[1]
        path = self.path(key)
        try:
            state = self._read(path, key, tokens, digest)
        except FileNotFoundError:
            self.stats.misses += 1
            return None
        except gate.NotARegularFile as exc:  # not triage's: left alone, the cache is skipped for it
            self._say_once(path, f"stable cache file {path} is not used: {exc.strerror}; it is left as it is")
            self.stats.misses += 1
            return None
        except OSError as exc:
            self._say_once(path, f"cannot read stable cache file {path}: {exc.strerror or exc}")
            self.stats.misses += 1
            return None
        if state is None:
            self.stats.rejected += 1
            self.stats.misses += 1
            log.warning("stable cache file %s is invalid; deleting it and recomputing", path)
            _forget(path)
            return None
        try:
            os.utime(path)  # LRU: last use
        except OSError as exc:  # a read-only disk, another user's file: the state is still good
            log.info("cannot mark stable cache file %s as used: %s", path, exc.strerror or exc)
        self.stats.disk_hits += 1
        self._remember(key, digest, state)
        return state

    def put(self, key: str, tokens: tuple[int, ...], state: bytes | bytearray) -> None:
        """Store ``state`` for ``key``/``tokens``, atomically, then enforce the bounds."""
        digest = tokens_digest(tokens)
        self._remember(key, digest, bytearray(state))
        kb = key.encode("utf-8")
        head = _HEAD.pack(MAGIC, FORMAT, len(kb), len(tokens), digest, len(state), hashlib.sha256(state).digest())
        path = self.path(key)
        if not gate.is_regular_or_absent(path):
            self._say_once(path, f"stable cache file {path} is not a regular file; it is left as it is, not written")
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            with tmp.open("wb") as fh:
                fh.write(head)
                fh.write(kb)
                fh.write(state)
            os.replace(tmp, path)
            self.stats.writes += 1
        except OSError as exc:  # a full disk costs speed, never a score
            log.warning("cannot write stable cache file %s: %s", path, exc)
            try:
                tmp.unlink(missing_ok=True)
            except (OSError, UnboundLocalError):
                pass
            return
        self.prune(keep=path)

    def prune(self, keep: Path | None = None) -> None:
        """Drop files past the TTL, then least recently used ones past the size cap."""
        try:
            files = [(p, p.lstat()) for p in self.folder.glob("*.kvstate")]
        except OSError:
            return
        files = [(p, st) for p, st in files if stat.S_ISREG(st.st_mode)]  # only files triage wrote
        now = time.time()
        alive = []
        for p, st in files:
            if p != keep and now - st.st_mtime > self.ttl_s:
                if _forget(p):
                    self.stats.evicted += 1
            else:
                alive.append((p, st))
        alive.sort(key=lambda x: x[1].st_mtime)  # oldest use first
        total = sum(st.st_size for _, st in alive)
        for p, st in alive:
            if total <= self.max_bytes:
                break
            if p == keep:
                continue
            if _forget(p):
                total -= st.st_size
                self.stats.evicted += 1

    def swap_last(self, parts: dict[str, str]) -> dict[str, str] | None:
        """Record ``parts`` as the last stable block used; return the previous record.

        Lets the first ticket after a restart say what changed since the last run
        (another pack version, another model). Unreadable records count as none,
        and so does one written by another process that is still running: its
        pack switch is not this process's, and not a previous run.
        """
        import json

        path = self.folder / "last.json"
        try:
            prev = gate.load_json(path, "stable-last")
            if not isinstance(prev, dict):
                prev = None
        except FileNotFoundError:
            prev = None
        except gate.NotARegularFile as exc:  # not triage's: left alone, and nothing is recorded
            self._say_once(path, f"stable cache record {path} is not used: {exc.strerror}; it is left as it is")
            return None
        except (OSError, ValueError) as exc:  # damaged (ValueError: not JSON, too deep, too large): replaced below
            self._say_once(path, f"stable cache record {path} is damaged ({_reason(exc)}); it is written afresh")
            prev = None
        try:
            write_text_atomic(path, json.dumps({**parts, WRITER: os.getpid()}, sort_keys=True))
        except OSError as exc:
            log.warning("cannot record the last stable block in %s: %s", path, exc)
        if prev is not None:
            writer = prev.pop(WRITER, None)
            if isinstance(writer, int) and writer != os.getpid() and _running(writer):
                return None
        return prev

    def note_change(self, parts: dict[str, str]) -> str | None:
        """Why the stable block differs from the last one used, naming what changed; else None.

        The last one is this process's previous ticket, or, for its first ticket, the one
        the previous run recorded (:meth:`swap_last`). The engine shows the note only when
        the block's prefill is really paid (a cached state costs nothing to say).

        Args:
            parts: what identifies the stable block, by name (model, prompt format, pack).
        """
        prev = self._last
        if prev != parts:
            recorded = self.swap_last(parts)
            prev = recorded if prev is None else prev
        self._last = parts
        if not prev or prev == parts:
            return None
        changed = [f"{k}: {prev.get(k, '?')} → {v}" for k, v in parts.items() if prev.get(k) != v]
        return "stable prefix changed, so its prefill is paid again once (" + "; ".join(changed) + ")"

    def _remember(self, key: str, digest: bytes, state: bytearray) -> None:
        self._memory[key] = (digest, state)
        self._memory.move_to_end(key)
        while len(self._memory) > MEMORY_ENTRIES:
            self._memory.popitem(last=False)

    def _say_once(self, path: Path, message: str) -> None:
        """Log ``message`` about ``path`` once per cache (a FIFO in the folder is not news every ticket)."""
        if path not in self._said:
            self._said.add(path)
            log.warning("%s", message)

    @staticmethod
    def _read(path: Path, key: str, tokens: tuple[int, ...], digest: bytes) -> bytearray | None:
        """The payload of the cache file at ``path`` if it is whole and for ``key``/``tokens``, else None.

        The header is read and checked first, the payload's size against the file's (``fstat``)
        before the payload is read: a file of the right header but gigabytes long costs one header.

        Raises:
            OSError: as :func:`triage.gate.open_fd` (``NotARegularFile`` for a FIFO, device or folder).
        """
        try:
            fd, st = gate.open_fd(path, "stable-state")
        except gate.TooLarge:
            return None
        with os.fdopen(fd, "rb") as fh:
            head = fh.read(_HEAD.size)
            if len(head) < _HEAD.size:
                return None
            magic, fmt, klen, ntok, tdig, size, pdig = _HEAD.unpack(head)
            if magic != MAGIC or fmt != FORMAT or ntok != len(tokens) or tdig != digest:
                return None
            kb = key.encode("utf-8")
            if klen != len(kb) or st.st_size != _HEAD.size + klen + size:
                return None
            if fh.read(klen) != kb:
                return None
            payload = bytearray(size)
            if fh.readinto(payload) != size or fh.read(1):
                return None
        if hashlib.sha256(payload).digest() != pdig:
            return None
        return payload
