"""Kernels compiled beforehand, for a GPU-tier run on a machine without the NVRTC it needs.

The GPU machine has ``cuda-bindings`` 13 with NVRTC 13 only. The GPU tier under ``cuda-bindings``
12.x runs there with a carried 12.9 wheel (``tools/device/cu12.sh``) and no NVRTC 12: cuda_core
does not use NVRTC 13 with 12.x bindings, so ``Program.compile`` of C++ raises
:class:`~cuda_core.CompilerLibraryNotFoundError`. To launch kernels all the same:

* ``tools/precompile_cu12.py`` (run where NVRTC 12 is, e.g. a ``cu12`` virtual environment)
  compiles every request of :data:`REQUESTS` for ``sm_90`` into a folder: per request
  ``<key>.bin`` (the code NVRTC 12 made) and ``<key>.json`` (target, name, symbol mapping, the
  request in words, the NVRTC version).
* With ``CUDA_CORE_TEST_PRECOMPILED=<folder>`` set, ``tests/conftest.py`` calls :func:`serve`:
  ``Program.compile`` answers a request found in the folder with that code (an
  :class:`~cuda_core.ObjectCode` made as ``ObjectCode.from_cubin`` makes one) and compiles
  anything else as always, which then fails for want of NVRTC 12; such a failure (also in a
  child process, e.g. an example) makes the test a skip with :data:`SKIP_REASON`. A request not
  found is appended to ``$CUDA_CORE_TEST_PRECOMPILED_MISSES`` when that names a file, as a line
  of JSON; ``tools/precompile_cu12.py --misses FILE`` compiles those too, for the next run.

A request is keyed by :func:`request_key`: the source, code type, target, name expressions and
the options that differ from their defaults (so ``arch="sm_90"`` and ``arch=f"sm_{dev.arch}"``
on an H100 are one key). The requests name the tests' own source constants (imported, not
copied), so a changed kernel changes its key and shows up as a miss until it is compiled again.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ENV = "CUDA_CORE_TEST_PRECOMPILED"
MISSES_ENV = "CUDA_CORE_TEST_PRECOMPILED_MISSES"
SKIP_REASON = "NVRTC 12 is not installed on this machine"
ARCH = "sm_90"  # the H100's
# What a compile that needed NVRTC 12 and did not find it raises (see cuda_core._compile._libraries).
MISSING_NVRTC_12 = "libnvrtc.so.12: LIBRARY_NOT_FOUND"

# (module, source constant, options besides arch, target, name expressions: a tuple, or the
# name of a module constant holding them). Every GPU test that compiles with Program and
# launches what it compiled; compiles with machine-dependent options (include paths) are left
# out and skip.
_CXX17 = {"std": "c++17"}
REQUESTS: tuple[tuple[str, str, dict[str, Any], str, tuple[str, ...] | str], ...] = (
    ("tests.helpers.kernels", "TIMING_SRC", {}, "cubin", ()),
    ("tests.memory.test_memory_gpu", "SPIN_SRC", {}, "cubin", ()),
    ("tests.graph.test_graph", "KERNELS", {}, "cubin", ()),
    ("tests.graph.test_graph_def", "KERNELS", {}, "cubin", ()),
    ("tests.memory.test_graph_memory", "SRC", {}, "cubin", ()),
    ("tests.interop.test_graphics", "FILL_SRC", {}, "cubin", ()),
    ("tests.test_green_context", "SMID_SRC", {}, "cubin", ()),
    ("tests.handles.test_handles", "SHAPE_SRC", {}, "cubin", ()),
    ("tests.interop.test_interop", "KERNELS", {}, "cubin", ()),
    ("tests.interop.test_memoryview_readers", "FILL_COPY_SRC", {}, "cubin", ()),
    ("tests.memory.test_vmm", "FILL_SRC", {}, "cubin", ()),
    ("tests.compile.test_module", "SRC", {}, "cubin", "NAMES"),
    ("tests.compile.test_module", "SRC", {}, "ptx", "NAMES"),
    ("tests.compile.test_module", "SRC", {}, "cubin", ()),
    ("tests.test_launcher", "WRITE_SCALAR", _CXX17, "cubin", "SCALAR_NAMES"),
    ("tests.test_launcher", "STRUCT_CODE", _CXX17, "cubin", ()),
    ("tests.test_launcher", "IOTA", _CXX17, "cubin", ()),
    ("tests.test_launcher_features", "CLUSTER", _CXX17, "cubin", ()),
    ("tests.test_launcher_features", "PDL", _CXX17, "cubin", ()),
    ("tests.test_launcher_features", "SHMEM", _CXX17, "cubin", ()),
    ("tests.test_launcher_features", "ADD", _CXX17, "cubin", ()),
    ("tests.test_tensor_map", "TMA_COPY", _CXX17, "cubin", ("tma_copy<8, 16>",)),
    ("tests.texture.test_texture", "TEX_SAMPLE", _CXX17, "cubin", ()),
    ("tests.texture.test_texture", "SURF_WRITE", _CXX17, "cubin", ()),
)

# Test files of compiling itself (the compile cache, compiler logs and options, linking): their
# compiles are never answered from the folder, so under 12.x without NVRTC 12 they skip (they run
# on the CPU tier, where NVRTC 12 is installed).
NOT_SERVED = frozenset(
    {
        "test_cache.py",
        "test_cli.py",
        "test_logging.py",
        "test_program.py",
        "test_program_compile.py",
        "test_linker.py",
    }
)
active = True
"""Whether :func:`serve`'s compile answers from the folder now (``tests/conftest.py`` sets it per test)."""


def request_key(
    code: str | bytes, code_type: str, options: Any, target_type: str, names: Any
) -> str:
    """The key of one compile request (a hex digest)."""
    from cuda_core._utils import options_repr

    if isinstance(names, (str, bytes)):
        names = (names,)
    text = code.hex() if isinstance(code, bytes) else code
    parts = [
        text,
        code_type,
        target_type,
        [n.decode() if isinstance(n, bytes) else n for n in names],
        options_repr(options),
    ]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def requests() -> Iterator[tuple[str, str, Any, str, tuple[str, ...]]]:
    """``(description, code, ProgramOptions, target, names)`` of every request of :data:`REQUESTS`."""
    from cuda_core import ProgramOptions

    for module, attr, extra, target, names in REQUESTS:
        mod = importlib.import_module(module)
        code = getattr(mod, attr)
        if isinstance(names, str):
            names = tuple(getattr(mod, names))
        desc = f"{module}.{attr} -> {target}" + (f" {list(names)}" if names else "")
        yield desc, code, ProgramOptions(arch=ARCH, **extra), target, tuple(names)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def store(
    folder: Path,
    desc: str,
    code: Any,
    options: Any,
    target: str,
    names: tuple[str, ...],
    obj: Any,
    compiler: str,
) -> str:
    """Write ``obj`` (compiled from the request) into ``folder``; returns its key."""
    key = request_key(code, "c++", options, target, names)
    data = obj.code if isinstance(obj.code, bytes) else obj.code.encode()
    (folder / f"{key}.bin").write_bytes(data)
    mapping = [
        [_text(k), _text(v), isinstance(k, bytes), isinstance(v, bytes)]
        for k, v in obj.symbol_mapping.items()
    ]
    meta = {"request": desc, "target": target, "name": obj.name, "symbol_mapping": mapping,
            "compiler": compiler, "options": repr(options)}  # fmt: skip
    (folder / f"{key}.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    return key


def load(folder: Path, key: str) -> Any:
    """The :class:`~cuda_core.ObjectCode` stored under ``key``, or ``None``."""
    from cuda_core import ObjectCode

    meta_path = folder / f"{key}.json"
    if not meta_path.is_file():
        return None
    meta = json.loads(meta_path.read_text())
    data = (folder / f"{key}.bin").read_bytes()
    mapping = {
        (k.encode() if kb else k): (v.encode() if vb else v)
        for k, v, kb, vb in meta["symbol_mapping"]
    }
    make = {
        "cubin": ObjectCode.from_cubin,
        "ptx": ObjectCode.from_ptx,
        "ltoir": ObjectCode.from_ltoir,
    }[meta["target"]]
    return make(data, name=meta["name"], symbol_mapping=mapping)


def miss_record(key: str, code: Any, options: Any, target: str, names: list[Any]) -> str:
    """One line of the misses file: the request as JSON, for ``precompile_cu12.py --misses``."""
    return json.dumps({"key": key, "target": target, "names": [_text(n) for n in names],
                       "options": repr(options), "code": _text(code)})  # fmt: skip


def missed_requests(path: Path) -> Iterator[tuple[str, str, Any, str, tuple[str, ...]]]:
    """The requests of a misses file, as :func:`requests` gives them (once each; a request whose
    options cannot be rebuilt from their ``repr`` is left out)."""
    from cuda_core import ProgramOptions

    seen = set()
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec["key"] in seen:
            continue
        seen.add(rec["key"])
        try:
            options = eval(rec["options"], {"ProgramOptions": ProgramOptions})  # our own repr
        except Exception:
            continue
        desc = f"miss {rec['key'][:8]} -> {rec['target']}" + (
            f" {rec['names']}" if rec["names"] else ""
        )
        yield desc, rec["code"], options, rec["target"], tuple(rec["names"])


def serve(folder: str) -> None:
    """Make ``Program.compile`` answer the requests stored in ``folder`` from there."""
    from cuda_core import Program

    root = Path(folder)
    if not root.is_dir():
        raise RuntimeError(f"{ENV}={folder}: no such folder (run tools/precompile_cu12.py)")
    compile_ = Program.compile
    if getattr(compile_, "_precompiled", False):
        return

    def compile(
        self: Any,
        target_type: str,
        name_expressions: Any = (),
        logs: Any = None,
        *,
        cache: Any = None,
    ) -> Any:
        if active and self.code_type == "c++" and not self.is_closed:
            key = request_key(
                self.code, self.code_type, self.options, target_type, name_expressions
            )
            obj = load(root, key)
            if obj is not None:
                return obj
            misses = os.environ.get(MISSES_ENV)
            if misses:
                names = (
                    [name_expressions]
                    if isinstance(name_expressions, (str, bytes))
                    else list(name_expressions)
                )
                with open(misses, "a") as f:
                    f.write(miss_record(key, self.code, self.options, target_type, names) + "\n")
        return compile_(self, target_type, name_expressions, logs, cache=cache)

    compile._precompiled = True  # type: ignore[attr-defined]
    compile.__doc__ = compile_.__doc__
    Program.compile = compile  # type: ignore[method-assign]


# cuda_core's own refusal where only a newer NVRTC is installed (cuda_core/_compat.py): the
# H100 has NVRTC 13, which cuda_core does not use with cuda-bindings 12.x.
REFUSED_NEWER_NVRTC = "which cuda_core does not use with cuda-bindings 12.x"


def failed_for_want_of_nvrtc_12(text: str) -> bool:
    """Whether a test failure's text says a compile needed NVRTC 12 and found none."""
    return MISSING_NVRTC_12 in text or ("NVRTC" in text and REFUSED_NEWER_NVRTC in text)
