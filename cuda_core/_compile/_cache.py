"""Compile caches: in memory and on disk, on by default for :meth:`Program.compile`.

* :class:`InMemoryProgramCache` and :class:`FileStreamProgramCache` are bytes-in/bytes-out
  mappings with the names of ``cuda.core.utils`` (re-exported by ``cuda_core.utils``).
* :class:`ProgramCache` is the default cache of :meth:`Program.compile`: a memory layer over a
  disk layer at ``$CUDA_CORE_CACHE_DIR`` (default ``$XDG_CACHE_HOME/cuda_core/programs``);
  ``CUDA_CORE_CACHE=0`` turns the disk layer off. Its ``hits``/``misses`` are counted.

Disk entries: ``magic | key length | key | payload length | blake2b(key, payload) | payload``,
written through a temporary file and ``os.replace`` (atomic), checked against their digest when
read; a corrupt, truncated or foreign file is a miss (and is rewritten), never a crash. Reads
touch the file's mtime; the size cap evicts the least recently used entries first.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .._logging import logger as _log
from .._utils import arg_error
from ._cache_keys import atomic_write, decode_entry, encode_entry, make_program_cache_key
from ._cache_paths import default_cache_dir, disk_cache_dir
from ._object_code import ObjectCode

__all__: list[str] = []  # the public names live in cuda_core.utils (see _UTILS_EXPORTS)

_UTILS_EXPORTS = [
    "FileStreamProgramCache",
    "InMemoryProgramCache",
    "ProgramCache",
    "ProgramCacheResource",
    "get_default_program_cache",
    "make_program_cache_key",
]

DEFAULT_MAX_SIZE_BYTES = 1 << 30
_FILE_MAGIC = b"CUCORE\x01\x00"
_HEAD = struct.Struct("<8sI")  # magic, key length
_PAYLOAD = struct.Struct("<Q32s")  # payload length, digest


def _as_key(key: Any) -> bytes:
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    raise arg_error("key", "bytes or str", key, exc=TypeError)


def _as_value(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    code = getattr(value, "code", None)  # an ObjectCode: store its bytes
    if isinstance(code, bytes):
        return code
    if isinstance(code, str):
        with open(code, "rb") as f:
            return f.read()
    raise arg_error("value", "bytes or an ObjectCode", value, exc=TypeError)


class ProgramCacheResource:
    """A bytes-to-bytes cache usable by :meth:`Program.compile` (``cache=``).

    Subclasses implement ``_get``, ``__setitem__``, ``__delitem__``, ``__len__`` and ``clear``.
    ``hits`` and ``misses`` count :meth:`get` and ``[]`` lookups.
    """

    hits: int = 0
    misses: int = 0

    def _get(self, key: bytes) -> bytes | None:
        raise NotImplementedError

    def get(self, key: bytes | str, default: bytes | None = None) -> bytes | None:
        """Return the value stored under ``key``, or ``default``.

        Parameters
        ----------
        key : bytes or str
            The key (usually from :func:`make_program_cache_key`).
        default : bytes, optional
            Returned on a miss.

        Returns
        -------
        bytes or None
        """
        v = self._get(_as_key(key))
        if v is None:
            self.misses += 1
            return default
        self.hits += 1
        return v

    def __getitem__(self, key: bytes | str) -> bytes:
        v = self.get(key)
        if v is None:
            raise KeyError(key)
        return v

    def __contains__(self, key: object) -> bool:
        return self._get(_as_key(key)) is not None

    def __setitem__(self, key: bytes | str, value: Any) -> None:
        raise NotImplementedError

    def __delitem__(self, key: bytes | str) -> None:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def clear(self) -> None:
        """Remove every entry."""
        raise NotImplementedError

    def update(self, items: Any = (), /, **kwargs: Any) -> None:
        """Store several entries, as ``dict.update`` does (each through ``[key] = value``).

        Parameters
        ----------
        items : mapping or iterable, optional
            Entries to store, a mapping or ``(key, value)`` pairs; keys are bytes or str, values bytes or :class:`ObjectCode`.
        **kwargs
            More entries, keyed by name (str keys).

        Raises
        ------
        TypeError
            A key or a value of the wrong type, or ``items`` is neither a mapping nor an
            iterable of pairs.
        """
        pairs = items.items() if hasattr(items, "items") else items
        try:
            it = iter(pairs)
        except TypeError:
            raise arg_error(
                "items", "a mapping or an iterable of (key, value) pairs", items, exc=TypeError
            ) from None
        for pair in it:
            try:
                k, v = pair
            except (TypeError, ValueError):
                raise arg_error(
                    "items", "a mapping or an iterable of (key, value) pairs", items, exc=TypeError
                ) from None
            self[k] = v
        for k, v in kwargs.items():
            self[k] = v

    def close(self) -> None:
        """Release resources (nothing to release for the built-in caches); idempotent."""

    def __enter__(self) -> ProgramCacheResource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InMemoryProgramCache(ProgramCacheResource):
    """A thread-safe in-memory cache with least-recently-used eviction.

    Parameters
    ----------
    max_size_bytes : int, optional
        Cap on the total size of the stored values (``None``: no cap).

    Raises
    ------
    ValueError
        ``max_size_bytes`` is not positive.
    """

    def __init__(self, max_size_bytes: int | None = None) -> None:
        if max_size_bytes is not None and (
            isinstance(max_size_bytes, bool)
            or not isinstance(max_size_bytes, int)
            or max_size_bytes <= 0
        ):
            raise arg_error("max_size_bytes", "a positive int or None", max_size_bytes)
        self.max_size_bytes = max_size_bytes
        self._data: OrderedDict[bytes, bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _get(self, key: bytes) -> bytes | None:
        with self._lock:
            v = self._data.get(key)
            if v is not None:
                self._data.move_to_end(key)
            return v

    def __setitem__(self, key: bytes | str, value: Any) -> None:
        k, v = _as_key(key), _as_value(value)
        with self._lock:
            old = self._data.pop(k, None)
            if old is not None:
                self._size -= len(old)
            self._data[k] = v
            self._size += len(v)
            cap = self.max_size_bytes
            while cap is not None and self._size > cap and self._data:
                _, dropped = self._data.popitem(last=False)
                self._size -= len(dropped)

    def __delitem__(self, key: bytes | str) -> None:
        with self._lock:
            v = self._data.pop(_as_key(key))
            self._size -= len(v)

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._data.clear()
            self._size = 0


class FileStreamProgramCache(ProgramCacheResource):
    """A directory of cache entries, safe for several processes at once.

    Parameters
    ----------
    path : str or os.PathLike, optional
        The cache directory (created if missing); default ``$CUDA_CORE_CACHE_DIR``, else
        ``$XDG_CACHE_HOME/cuda_core/programs`` (``~/.cache/cuda_core/programs``).
    max_size_bytes : int, optional
        Soft cap on the entries' total size; least recently used entries are evicted first.
        ``None`` (the default, as in ``cuda.core``) means no cap. The process's default
        cache (:func:`get_default_program_cache`) uses a 1 GiB cap.

    Raises
    ------
    ValueError
        ``max_size_bytes`` is not positive.
    OSError
        The directory cannot be created.
    """

    def __init__(
        self, path: str | os.PathLike | None = None, *, max_size_bytes: int | None = None
    ) -> None:
        if max_size_bytes is not None and (
            isinstance(max_size_bytes, bool)
            or not isinstance(max_size_bytes, int)
            or max_size_bytes <= 0
        ):
            raise arg_error("max_size_bytes", "a positive int or None", max_size_bytes)
        self.path = os.path.abspath(os.fspath(path)) if path is not None else default_cache_dir()
        self.max_size_bytes = max_size_bytes
        self._entries = os.path.join(self.path, "entries")
        self._size: int | None = None  # tracked total size, seeded by a scan on first write
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.corrupt = 0
        os.makedirs(self._entries, exist_ok=True)

    def _file(self, key: bytes) -> str:
        h = hashlib.blake2b(key, digest_size=20).hexdigest()
        return os.path.join(self._entries, h[:2], h[2:])

    def _get(self, key: bytes) -> bytes | None:
        path = self._file(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return None
        payload = _parse_file(data, key)
        if payload is None:
            self.corrupt += 1
            _log.debug("compile cache: corrupt entry %s removed (treated as a miss)", path)
            with contextlib.suppress(OSError):
                os.unlink(path)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # mtime = last use, for LRU eviction
        return payload

    def __setitem__(self, key: bytes | str, value: Any) -> None:
        k, v = _as_key(key), _as_value(value)
        digest = hashlib.blake2b(k + v, digest_size=32).digest()
        blob = b"".join((_HEAD.pack(_FILE_MAGIC, len(k)), k, _PAYLOAD.pack(len(v), digest), v))
        atomic_write(self._file(k), blob)
        if self.max_size_bytes is not None:
            with self._lock:
                if self._size is None:
                    self._size = self._scan_size()
                else:
                    self._size += len(blob)
                over = self._size > self.max_size_bytes
            if over:
                self._evict()

    def _list(self) -> list[tuple[float, int, str]]:
        out: list[tuple[float, int, str]] = []
        try:
            subs = os.scandir(self._entries)
        except OSError:
            return out
        with subs:
            for sub in subs:
                if not sub.is_dir(follow_symlinks=False):
                    continue
                try:
                    with os.scandir(sub.path) as it:
                        for e in it:
                            if e.name.startswith(".tmp-") or not e.is_file(follow_symlinks=False):
                                continue
                            try:
                                st = e.stat()
                            except OSError:
                                continue
                            out.append((st.st_mtime, st.st_size, e.path))
                except OSError:
                    continue
        return out

    def _scan_size(self) -> int:
        return sum(size for _, size, _ in self._list())

    def _evict(self) -> None:
        """Remove least recently used entries until the total is under the cap."""
        cap = self.max_size_bytes
        if cap is None:
            return
        entries = sorted(self._list())
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total <= cap:
                break
            with contextlib.suppress(OSError):
                os.unlink(path)
            total -= size
        with self._lock:
            self._size = total

    def __delitem__(self, key: bytes | str) -> None:
        k = _as_key(key)
        try:
            os.unlink(self._file(k))
        except FileNotFoundError:
            raise KeyError(key) from None
        with self._lock:
            self._size = None

    def __len__(self) -> int:
        return len(self._list())

    def clear(self) -> None:
        """Remove every entry file."""
        for _, _, path in self._list():
            with contextlib.suppress(OSError):
                os.unlink(path)
        with self._lock:
            self._size = None


def _parse_file(data: bytes, key: bytes) -> bytes | None:
    """The payload of an entry file, or ``None`` if it is corrupt, truncated or foreign."""
    try:
        magic, klen = _HEAD.unpack_from(data, 0)
        if magic != _FILE_MAGIC:
            return None
        pos = _HEAD.size
        if data[pos : pos + klen] != key:
            return None
        pos += klen
        n, digest = _PAYLOAD.unpack_from(data, pos)
        pos += _PAYLOAD.size
        payload = data[pos:]
        if len(payload) != n or hashlib.blake2b(key + payload, digest_size=32).digest() != digest:
            return None
    except struct.error:
        return None
    return payload


# ---------------------------------------------------------------------------------------------
# The default cache of Program.compile.


class ProgramCache:
    """The default compile cache: a memory layer over an on-disk :class:`FileStreamProgramCache`.

    Get it with :func:`get_default_program_cache`. The disk layer follows the environment at
    each compile: ``CUDA_CORE_CACHE_DIR`` (its directory), ``CUDA_CORE_CACHE=0`` (off), and
    ``XDG_CACHE_HOME``; a change of these starts a fresh memory layer too.

    Attributes
    ----------
    hits, misses : int
        Lookups answered from the cache (memory or disk) and compilations.
    memory_hits, disk_hits : int
        The hits by layer.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._env: tuple[str | None, ...] | None = None
        self._memory: dict[bytes, tuple[bytes, str, str, dict]] = {}
        self._disk: FileStreamProgramCache | None = None
        self.hits = 0
        self.misses = 0
        self.memory_hits = 0
        self.disk_hits = 0

    @property
    def disk(self) -> FileStreamProgramCache | None:
        """FileStreamProgramCache or None: The disk layer under the current environment."""
        self._sync()
        return self._disk

    def _sync(self) -> None:
        env = (
            os.environ.get("CUDA_CORE_CACHE"),
            os.environ.get("CUDA_CORE_CACHE_DIR"),
            os.environ.get("XDG_CACHE_HOME"),
        )
        if env == self._env:
            return
        with self._lock:
            if env == self._env:
                return
            disk = None
            path = disk_cache_dir()
            if path is not None:
                try:
                    disk = FileStreamProgramCache(path, max_size_bytes=DEFAULT_MAX_SIZE_BYTES)
                except OSError:
                    disk = None  # an unwritable cache directory means no disk cache, not an error
            self._disk = disk
            self._memory = {}
            self._env = env

    def stats(self) -> dict[str, int]:
        """dict: ``hits``, ``misses``, ``memory_hits``, ``disk_hits``, ``memory_entries``."""
        return {
            "hits": self.hits,
            "misses": self.misses,
            "memory_hits": self.memory_hits,
            "disk_hits": self.disk_hits,
            "memory_entries": len(self._memory),
        }

    def reset_stats(self) -> None:
        """Set every counter to zero."""
        self.hits = self.misses = self.memory_hits = self.disk_hits = 0

    def clear(self, *, disk: bool = True) -> None:
        """Empty the memory layer and (with ``disk=True``) the disk layer."""
        self._sync()
        self._memory.clear()
        if disk and self._disk is not None:
            self._disk.clear()

    def _lookup(self, key: bytes) -> tuple[bytes, str, str, dict] | None:
        self._sync()
        rec = self._memory.get(key)
        if rec is not None:
            self.hits += 1
            self.memory_hits += 1
            _log.debug("compile cache: hit in memory (%s)", _short(key))
            return rec
        disk = self._disk
        if disk is not None:
            data = disk._get(key)
            rec = decode_entry(data) if data is not None else None
            if rec is not None:
                self._memory[key] = rec
                self.hits += 1
                self.disk_hits += 1
                _log.debug("compile cache: hit on disk in %s (%s)", disk.path, _short(key))
                return rec
        self.misses += 1
        _log.debug("compile cache: miss (%s)", _short(key))
        return None

    def _store(self, key: bytes, rec: tuple[bytes, str, str, dict]) -> None:
        self._memory[key] = rec
        disk = self._disk
        if disk is not None:
            try:
                disk[key] = encode_entry(*rec)
            except OSError as exc:
                _log.debug(
                    "compile cache: write to %s failed (%s); kept in memory only", disk.path, exc
                )
            else:
                _log.debug(
                    "compile cache: wrote %d bytes to %s (%s)", len(rec[0]), disk.path, _short(key)
                )


class _short:
    """A short, stable name of a cache key for the log, hashed only if the record is emitted."""

    __slots__ = ("key",)

    def __init__(self, key: bytes) -> None:
        self.key = key

    def __str__(self) -> str:
        return "key " + hashlib.blake2b(self.key, digest_size=6).hexdigest()


_default = ProgramCache()


def get_default_program_cache() -> ProgramCache:
    """Return the process's default compile cache (used by :meth:`Program.compile`).

    Returns
    -------
    ProgramCache
        Its ``hits``/``misses`` tell how compiles were answered.
    """
    return _default


def resolve_cache(cache: Any) -> Any:
    """The cache a compile uses: ``None`` -> default, ``False`` -> none, else ``cache``."""
    if cache is None or cache is True:
        return _default
    if cache is False:
        return None
    if isinstance(cache, (ProgramCacheResource, ProgramCache)) or (
        hasattr(cache, "get") and hasattr(cache, "__setitem__")
    ):
        return cache
    raise arg_error("cache", "None, True, False or a ProgramCacheResource", cache, exc=TypeError)


def lookup_or_compile(store: Any, key: bytes, compile_fn: Callable[[], Any]) -> Any:
    """Return the cached ObjectCode for ``key``, or compile, store and return it."""
    if store is _default:
        rec = _default._lookup(key)
    else:
        data = store.get(key)
        rec = decode_entry(bytes(data)) if data is not None else None
    if rec is not None:
        if store is not _default:
            _log.debug("compile cache: hit in %s (%s)", type(store).__name__, _short(key))
        code, code_type, name, mapping = rec
        return ObjectCode._init(code, code_type, name=name, symbol_mapping=mapping)
    obj = compile_fn()
    rec = (_as_value(obj), obj.code_type, obj.name, obj._sym_map)
    if store is _default:
        _default._store(key, rec)
    else:
        _log.debug(
            "compile cache: miss in %s, wrote %d bytes (%s)",
            type(store).__name__,
            len(rec[0]),
            _short(key),
        )
        store[key] = encode_entry(*rec)
    return obj


_ = make_program_cache_key  # re-exported through cuda_core.utils
