"""Compile-cache keys and entries: what goes into a key, and how an ObjectCode is stored.

The key is a blake2b digest of every input that changes the compiled output: code, code type,
target, the options' flags, the name expressions, the compiler's identity (version, library
file) and the contents of the headers the program includes from ``include_path`` or
``pre_include``. Working the key out never loads a compiler: the compiler's identity comes from
a small stamp file checked against the library's size and mtime.

Entries are a small length-prefixed binary record (never pickle) holding the code type, name,
symbol mapping and code.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import sys
import tempfile
import threading
from collections.abc import Sequence
from typing import Any

from .._compat import BINDINGS_TEXT, driver
from .._handles._driver import ensure_driver
from .._utils import handle_return
from ._cache_paths import stamp_dir
from ._libraries import nvjitlink_available, nvrtc_version_cached, require

__all__: list[str] = []  # private module; the public names are re-exported by _cache

_KEY_SCHEMA = b"cuda_core-key-1"
_TARGETS = {"c++": ("ptx", "cubin", "ltoir"), "ptx": ("cubin",), "nvvm": ("ptx", "ltoir")}
_BACKEND = {"c++": "nvrtc", "ptx": "nvjitlink", "nvvm": "nvvm"}


# ---------------------------------------------------------------------------------------------
# Compiler identity without loading the compiler.

_LIB_FILES = {"nvrtc": "libnvrtc.so", "nvjitlink": "libnvJitLink.so", "nvvm": "libnvvm.so"}
_fingerprints: dict[str, bytes] = {}
_fp_lock = threading.Lock()


def _load_version(lib: str) -> str:
    if lib == "nvrtc":
        major, minor = nvrtc_version_cached()
        return f"{major}.{minor}"
    if lib == "nvjitlink":
        if not nvjitlink_available():
            ensure_driver()
            return f"driver-{handle_return(driver.cuDriverGetVersion(), 'cuDriverGetVersion')}"
        from cuda.bindings import nvjitlink  # optional library: imported only once known present

        return ".".join(map(str, nvjitlink.version()))
    require("nvvm", "Program.compile() of NVVM IR")
    from cuda.bindings import nvvm  # optional library, imported on first NVVM use (import time)

    return ".".join(map(str, nvvm.version())) + "/ir" + ".".join(map(str, nvvm.ir_version()))


def _loaded_path(lib: str) -> str:
    """The file of a loaded library, from /proc/self/maps ("" where unknown)."""
    needle = "/" + _LIB_FILES[lib]
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                i = line.find(needle)
                if i >= 0:
                    return line[line.index("/") :].strip()
    except OSError:
        pass
    return ""


def _env_identity() -> bytes:
    parts = [
        sys.prefix,
        BINDINGS_TEXT,
        os.environ.get("LD_LIBRARY_PATH", ""),
        os.environ.get("CUDA_HOME", ""),
        os.environ.get("CUDA_PATH", ""),
    ]
    return hashlib.blake2b("\0".join(parts).encode(), digest_size=12).digest()


def _stat_id(path: str) -> str:
    st = os.stat(path)
    return f"{st.st_size}:{st.st_mtime_ns}"


def compiler_fingerprint(lib: str, stamp_dir: str | None) -> bytes:
    """Identity of the compiler library ``lib`` ("nvrtc", "nvjitlink", "nvvm").

    With ``stamp_dir``, a stamp file there remembers (version, library path, size, mtime) for
    this Python environment, so later processes need only one ``stat`` and no library load.
    """
    fp = _fingerprints.get(lib)
    if fp is not None:
        return fp
    with _fp_lock:
        fp = _fingerprints.get(lib)
        if fp is None:
            fp = _compute_fingerprint(lib, stamp_dir)
            _fingerprints[lib] = fp
    return fp


def _compute_fingerprint(lib: str, stamp_dir: str | None) -> bytes:
    stamp = None
    if stamp_dir:
        stamp = os.path.join(stamp_dir, f"{lib}-{_env_identity().hex()}")
        try:
            with open(stamp, "rb") as f:
                version, path, ident = f.read(4096).decode().split("\n")[:3]
            if path and _stat_id(path) == ident:
                return f"{lib}|{version}|{path}|{ident}".encode()
        except (OSError, ValueError, UnicodeDecodeError):
            pass
    version = _load_version(lib)
    path = _loaded_path(lib)
    ident = ""
    if path:
        try:
            ident = _stat_id(path)
        except OSError:
            path = ""
    if stamp and path:
        try:
            atomic_write(stamp, f"{version}\n{path}\n{ident}\n".encode())
        except OSError:
            pass
    return f"{lib}|{version}|{path}|{ident}".encode()


def atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and ``os.replace``."""
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ---------------------------------------------------------------------------------------------
# Headers included by the source.

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\r\n]+)[>"]', re.M)
_MAX_HEADERS = 512


def _find(name: str, dirs: Sequence[str]) -> str | None:
    for d in dirs:
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    return None


def hash_headers(
    update: Any, code: bytes, base: str, include_dirs: Sequence[str], pre_include: Sequence[str]
) -> None:
    """Feed the contents of every header the source includes (found on disk) to ``update``.

    ``#include "x"`` is looked up next to the including file (the program's directory for the
    source), then in ``include_dirs``; ``#include <x>`` in ``include_dirs``. Headers not found
    there (NVRTC's built-in and CUDA headers) are keyed by name: the compiler's version covers
    them.
    """
    seen: set[str] = set()
    todo: list[tuple[str, bool, str]] = [(p, True, base) for p in pre_include]
    todo += [
        (m.group(2).decode(errors="replace"), m.group(1) == b'"', base)
        for m in _INCLUDE.finditer(code)
    ]
    while todo and len(seen) < _MAX_HEADERS:
        name, quoted, here = todo.pop(0)
        dirs = [here, *include_dirs] if quoted else list(include_dirs)
        path = os.path.join(here, name) if os.path.isabs(name) else _find(name, dirs)
        if path is None or not os.path.isfile(path):
            update(b"header?", name.encode())
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        try:
            with open(real, "rb") as f:
                text = f.read()
        except OSError:
            update(b"header!", real.encode())
            continue
        update(b"header", real.encode())
        update(b"content", text)
        sub = os.path.dirname(real)
        todo += [
            (m.group(2).decode(errors="replace"), m.group(1) == b'"', sub)
            for m in _INCLUDE.finditer(text)
        ]


# ---------------------------------------------------------------------------------------------


def make_program_cache_key(
    *,
    code: str | bytes,
    code_type: str,
    options: Any,
    target_type: str,
    name_expressions: Sequence[str | bytes] = (),
    extra_digest: bytes | None = None,
) -> bytes:
    """Build the cache key of one compilation (a 32-byte digest).

    Parameters
    ----------
    code : str or bytes
        The source.
    code_type : {"c++", "ptx", "nvvm"}
        The source's type.
    options : ProgramOptions
        The compile options; ``arch`` defaults to the current device's.
    target_type : {"ptx", "cubin", "ltoir"}
        The output asked for.
    name_expressions : sequence of str or bytes, optional
        Name expressions (order does not matter; ``"f"`` and ``b"f"`` differ, as the symbol
        mapping keeps the type).
    extra_digest : bytes, optional
        Anything else the caller wants in the key.

    Returns
    -------
    bytes
        32 bytes.

    Raises
    ------
    ValueError
        An unknown code type, or a target type the code type cannot produce.
    TypeError
        ``code`` or a name expression of the wrong type.
    """
    ct = code_type.lower() if isinstance(code_type, str) else code_type
    if ct not in _TARGETS:
        raise ValueError(f"code_type must be one of 'c++', 'ptx', 'nvvm' (got {code_type!r})")
    if target_type not in _TARGETS[ct]:
        raise ValueError(
            f"target_type must be one of {_TARGETS[ct]} for {ct!r} code (got {target_type!r})"
        )
    if isinstance(code, str):
        code_b = code.encode()
    elif isinstance(code, (bytes, bytearray, memoryview)):
        code_b = bytes(code)
    else:
        raise TypeError(f"code must be a str or bytes (got {type(code).__name__})")
    h = hashlib.blake2b(digest_size=32)

    def update(label: bytes, payload: bytes) -> None:
        h.update(label)
        h.update(struct.pack("<Q", len(payload)))
        h.update(payload)

    backend = _BACKEND[ct]
    update(b"schema", _KEY_SCHEMA)
    update(b"compiler", compiler_fingerprint(backend, stamp_dir()))
    update(b"code_type", ct.encode())
    update(b"target", target_type.encode())
    update(b"code", code_b)
    for flag in options.as_bytes(backend, target_type):
        update(b"flag", flag)
    update(b"name", (options.name or "").encode())
    tagged = []
    for n in name_expressions:
        if isinstance(n, str):
            tagged.append(b"s" + n.encode())
        elif isinstance(n, bytes):
            tagged.append(b"b" + n)
        else:
            raise TypeError(f"name_expressions must hold str or bytes (got {type(n).__name__})")
    for t in sorted(tagged):
        update(b"expr", t)
    if ct == "nvvm":
        # NVVM-only inputs that are not flags: extra IR modules and libdevice (whose version
        # follows the compiler fingerprint).
        for extra_name, extra in options._extra:
            update(b"extra_source_name", extra_name.encode())
            update(b"extra_source", extra)
        if options.use_libdevice:
            update(b"libdevice", b"1")
    if ct == "c++":
        incs, pres = options._header_inputs()
        base = (
            os.path.dirname(options.name)
            if options.name and os.path.dirname(options.name)
            else os.getcwd()
        )
        hash_headers(update, code_b, base, incs, pres)
    if extra_digest is not None:
        update(b"extra", bytes(extra_digest))
    return h.digest()


# ---------------------------------------------------------------------------------------------
# Entry records: ObjectCode <-> bytes.

_ENTRY_MAGIC = b"CCOBJ\x01"
_U32 = struct.Struct("<I")


def _pack(out: list[bytes], b: bytes) -> None:
    out.append(_U32.pack(len(b)))
    out.append(b)


def encode_entry(code: bytes, code_type: str, name: str, symbol_mapping: dict) -> bytes:
    """The stored form of an ObjectCode: magic, code type, name, symbol mapping, code."""
    out = [_ENTRY_MAGIC]
    _pack(out, code_type.encode())
    _pack(out, name.encode())
    out.append(_U32.pack(len(symbol_mapping)))
    for k, v in symbol_mapping.items():
        _pack(out, (b"s" + k.encode()) if isinstance(k, str) else (b"b" + bytes(k)))
        _pack(out, (b"s" + v.encode()) if isinstance(v, str) else (b"b" + bytes(v)))
    _pack(out, code)
    return b"".join(out)


def _tagged(b: bytes) -> str | bytes:
    if b[:1] == b"s":
        return b[1:].decode()
    if b[:1] == b"b":
        return b[1:]
    raise ValueError("bad tag")


def decode_entry(data: bytes) -> tuple[bytes, str, str, dict] | None:
    """Parse :func:`encode_entry`'s output; ``None`` for anything malformed."""
    try:
        if not data.startswith(_ENTRY_MAGIC):
            return None
        pos = len(_ENTRY_MAGIC)
        mv = memoryview(data)

        def take() -> bytes:
            nonlocal pos
            (n,) = _U32.unpack_from(data, pos)
            pos += 4
            if pos + n > len(data):
                raise ValueError("truncated")
            b = bytes(mv[pos : pos + n])
            pos += n
            return b

        code_type = take().decode()
        name = take().decode()
        (count,) = _U32.unpack_from(data, pos)
        pos += 4
        mapping: dict = {}
        for _ in range(count):
            k = _tagged(take())
            mapping[k] = _tagged(take())
        code = take()
        if pos != len(data):
            return None
    except (ValueError, struct.error, UnicodeDecodeError):
        return None
    return code, code_type, name, mapping
