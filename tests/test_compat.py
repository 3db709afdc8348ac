"""cuda_core._compat: the one place where cuda-bindings 12.x and 13.x differ (CPU tier).

CI runs this file under both majors (a ``cu12`` and a ``cu13`` virtual environment), so each
check here holds for the installed major and, where it names the other major's form, against a
literal that the other run checks against its own bindings.
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
from cuda.bindings import driver as raw

from cuda_core import _compat
from cuda_core._compat import BINDINGS_MAJOR, SINCE, V13, driver

SRC = Path(_compat.__file__).parent

# Names the code base reaches only behind a version guard (has(), require(), getattr with a
# default): cuda-bindings 12.x lacks them, 13.x has them.
GUARDED_13_ONLY = {
    "CU_DEV_SM_RESOURCE_GROUP_PARAMS",
    "CUcheckpointGpuPair",
    "CUdevSmResourceGroup_flags",
    "CUdevWorkqueueConfigScope",
}


def _sources() -> dict[Path, str]:
    return {p: p.read_text() for p in SRC.rglob("*.py")}


def _driver_names() -> set[str]:
    names = set()
    for text in _sources().values():
        names |= set(re.findall(r"\bdriver\.([A-Za-z_][A-Za-z0-9_]*)", text))
    return names


def _driver_calls() -> set[str]:
    """The driver calls the code base makes: ``driver.cuX`` and quoted names (``getattr(driver,
    name)``, entry points the native layer and ctypes callers resolve, error funnels' names)."""
    calls = {n for n in _driver_names() if re.match(r"cu[A-Z]", n)}
    for text in _sources().values():
        calls |= set(re.findall(r"[\"'](cu[A-Z][A-Za-z0-9_]*)[\"']", text))
    return calls


# -- every name the code base uses resolves under the installed major --------------------------


def test_every_driver_name_resolves_or_is_guarded():
    unresolved = []
    for name in sorted(_driver_names()):
        try:
            getattr(driver, name)
        except AttributeError:
            unresolved.append(name)
    expected = set() if V13 else GUARDED_13_ONLY & _driver_names()
    assert set(unresolved) == expected, unresolved


def test_every_enum_member_used_exists():
    missing = []
    for path, text in _sources().items():
        aliases = dict(
            re.findall(r"^\s*(_?[A-Za-z_0-9]+)\s*=\s*driver\.(CU[A-Za-z_0-9]+)\s*$", text, re.M)
        )
        refs = re.findall(r"\bdriver\.(CU[A-Za-z_0-9]+)\.([A-Z][A-Z0-9_]+)\b", text)
        for alias, typ in aliases.items():
            refs += [
                (typ, m)
                for m in re.findall(r"\b" + re.escape(alias) + r"\.([A-Z][A-Z0-9_]+)\b", text)
            ]
        for typ, member in refs:
            if typ in GUARDED_13_ONLY and not V13:
                continue
            if not hasattr(getattr(raw, typ), member):
                missing.append(f"{path.name}: {typ}.{member}")
    assert not missing, missing


def test_calls_only_13_binds_raise_naming_the_version():
    thirteen = sorted(n for n, need in SINCE.items() if need >= (13, 0) and n in _driver_calls())
    assert "cuMemPrefetchBatchAsync" in thirteen
    for name in thirteen:
        fn = getattr(driver, name)
        assert fn.__name__ == name
        if V13 and hasattr(raw, name):
            continue
        with pytest.raises(
            NotImplementedError,
            match=rf"^{name} needs cuda-bindings 13\.\d or newer \(installed: 12\.",
        ):
            fn()
        assert not _compat.has(name)


def _typedef_versions() -> dict[str, int] | None:
    for root in (
        "/usr/local/cuda/include",
        *sorted(map(str, Path("/usr/local").glob("cuda-1[3-9]*/include"))),
    ):
        header = Path(root) / "cudaTypedefs.h"
        if header.is_file():
            intro: dict[str, int] = {}
            # cuProfilerStart/Stop (cuda_core.profiler) are typed in a header of their own.
            for path in (header, Path(root) / "cudaProfilerTypedefs.h"):
                text = path.read_text() if path.is_file() else ""
                for name, v in re.findall(r"PFN_(cu[A-Za-z0-9_]+?)_v(\d+)\b", text):
                    intro[name] = min(int(v), intro.get(name, 10**9))
            return intro
    return None


def test_since_table_matches_cuda_headers():
    intro = _typedef_versions()
    if intro is None:
        pytest.skip("no CUDA 13 cudaTypedefs.h under /usr/local to check SINCE against")
    wrong = []
    for name in sorted(_driver_calls()):
        v = intro.get(name)
        if v is None:
            if (
                name.startswith("cuGraphicsGL") or name in SINCE
            ):  # cudaGL.h; or newer than the header
                continue
            wrong.append(f"{name}: not in cudaTypedefs.h and not in SINCE")
            continue
        expected = (v // 1000, v % 1000 // 10) if v > 12000 else None
        if SINCE.get(name) != expected:
            wrong.append(f"{name}: header says {expected}, SINCE says {SINCE.get(name)}")
    assert not wrong, wrong
    assert not set(SINCE) - _driver_calls(), "SINCE names calls the code base does not make"


# -- the 13.x forms -----------------------------------------------------------------------------

# The 13.x parameter names of each call whose Python form changed (checked against the real
# bindings by the 13.x run, against the 12.x stand-ins by the 12.x run).
FORMS_13 = {
    "cuCtxCreate": ["ctxCreateParams", "flags", "dev"],
    "cuMemAdvise": ["devPtr", "count", "advice", "location"],
    "cuMemPrefetchAsync": ["devPtr", "count", "location", "flags", "hStream"],
    "cuGraphAddNode": ["hGraph", "dependencies", "dependencyData", "numDependencies", "nodeParams"],
    "cuGraphAddDependencies": ["hGraph", "from_", "to", "edgeData", "numDependencies"],
    "cuGraphRemoveDependencies": ["hGraph", "from_", "to", "edgeData", "numDependencies"],
    "cuStreamUpdateCaptureDependencies": [
        "hStream",
        "dependencies",
        "dependencyData",
        "numDependencies",
        "flags",
    ],
    "cuStreamGetCaptureInfo": ["hStream"],
    "cuGraphGetEdges": ["hGraph", "numEdges"],
    "cuGraphNodeGetDependencies": ["hNode", "numDependencies"],
    "cuGraphNodeGetDependentNodes": ["hNode", "numDependentNodes"],
    "cuDeviceGetUuid": ["dev"],
    "cuEventElapsedTime": ["hStart", "hEnd"],
}


@pytest.mark.parametrize("name", sorted(FORMS_13))
def test_changed_calls_have_their_13x_form(name):
    assert list(inspect.signature(_compat._SHIMS[name]).parameters) == FORMS_13[name]
    if V13:
        assert list(inspect.signature(getattr(raw, name)).parameters) == FORMS_13[name]
    else:
        assert getattr(driver, name).__name__ == name  # the stand-in, or the gate around it
    assert _compat._SHIMS[name].__name__ == name  # call() and errors name the API after it


def test_memcpy_batch_has_the_same_arguments_in_both_majors():
    params = list(inspect.signature(raw.cuMemcpyBatchAsync).parameters)
    assert params == ["dsts", "srcs", "sizes", "count", "attrs", "attrsIdxs", "numAttrs", "hStream"]


class _Recorder:
    """Stands in for the bindings module inside the translation functions: records the call
    each 13.x form is turned into (no driver is called)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple]] = []

    def __getattr__(self, name):
        if name.startswith("cu") and name[2:3].isupper():

            def fn(*args):
                self.calls.append((name, args))
                return (raw.CUresult.CUDA_SUCCESS, "payload", 3)

            return fn
        return getattr(raw, name)


@pytest.fixture
def recorder(monkeypatch):
    rec = _Recorder()
    monkeypatch.setattr(_compat, "_drv", rec)
    return rec


@pytest.fixture
def driver_is(monkeypatch):
    def set_version(major: int, minor: int) -> None:
        monkeypatch.setattr(_compat, "_driver_version", [major * 1000 + minor * 10])

    return set_version


def _location(kind: str, ident: int = 0):
    loc = raw.CUmemLocation()
    loc.type = getattr(raw.CUmemLocationType, f"CU_MEM_LOCATION_TYPE_{kind}")
    loc.id = ident
    return loc


def test_advise_and_prefetch_use_the_form_every_12x_driver_has(recorder):
    adv = raw.CUmem_advise.CU_MEM_ADVISE_SET_READ_MOSTLY
    _compat._mem_advise(0x1000, 64, adv, _location("DEVICE", 3))
    _compat._mem_advise(0x1000, 64, adv, _location("HOST"))
    _compat._mem_prefetch(0x1000, 64, _location("DEVICE", 1), 0, "stream")
    (n1, a1), (n2, a2), (n3, a3) = recorder.calls
    assert (n1, int(a1[3])) == ("cuMemAdvise", 3)
    assert (n2, int(a2[3])) == ("cuMemAdvise", int(raw.CU_DEVICE_CPU))
    assert (n3, int(a3[2]), a3[3]) == ("cuMemPrefetchAsync", 1, "stream")


def test_numa_locations_need_the_v2_form_and_a_12_2_driver(recorder, driver_is):
    adv = raw.CUmem_advise.CU_MEM_ADVISE_SET_PREFERRED_LOCATION
    driver_is(12, 1)
    with pytest.raises(
        NotImplementedError,
        match=r"host NUMA node needs an NVIDIA driver for CUDA 12\.2 or newer \(this one supports CUDA 12\.1\)",
    ):
        _compat._mem_advise(0x1000, 64, adv, _location("HOST_NUMA", 1))
    assert recorder.calls == []
    driver_is(12, 2)
    numa = _location("HOST_NUMA", 1)
    _compat._mem_advise(0x1000, 64, adv, numa)
    _compat._mem_prefetch(0x1000, 64, _location("DEVICE", 0), 1, "s")  # flags need the v2 form too
    assert [c[0] for c in recorder.calls] == ["cuMemAdvise_v2", "cuMemPrefetchAsync_v2"]
    assert recorder.calls[0][1][3] is numa


def test_edge_data_free_calls_use_the_first_form(recorder, driver_is):
    _compat._graph_add_node("g", ["a"], None, 1, "params")
    _compat._graph_add_deps("g", ["a"], ["b"], None, 1)
    _compat._graph_remove_deps("g", ["a"], ["b"], None, 1)
    _compat._update_capture_deps("s", ["a"], None, 1, 0)
    _compat._ctx_create(None, 0, "dev")
    assert recorder.calls == [
        ("cuGraphAddNode", ("g", ["a"], 1, "params")),
        ("cuGraphAddDependencies", ("g", ["a"], ["b"], 1)),
        ("cuGraphRemoveDependencies", ("g", ["a"], ["b"], 1)),
        ("cuStreamUpdateCaptureDependencies", ("s", ["a"], 1, 0)),
        ("cuCtxCreate", (0, "dev")),
    ]
    driver_is(12, 2)
    with pytest.raises(
        NotImplementedError,
        match=r"cuGraphAddNode with edge data needs an NVIDIA driver for CUDA 12\.3",
    ):
        _compat._graph_add_node("g", ["a"], ["edge"], 1, "params")
    with pytest.raises(
        NotImplementedError, match=r"CUctxCreateParams needs an NVIDIA driver for CUDA 12\.5"
    ):
        _compat._ctx_create("params", 0, "dev")
    driver_is(12, 5)
    _compat._graph_add_deps("g", ["a"], ["b"], ["edge"], 1)
    _compat._ctx_create("params", 0, "dev")
    assert [c[0] for c in recorder.calls[-2:]] == ["cuGraphAddDependencies_v2", "cuCtxCreate_v4"]


def test_results_gain_the_13x_edge_data_item(monkeypatch):
    ok = raw.CUresult.CUDA_SUCCESS
    fake = types.SimpleNamespace(
        cuStreamGetCaptureInfo=lambda h: (ok, "status", 7, "graph", ["n"], 1),
        cuGraphGetEdges=lambda g, n=0: (ok, ["a"], ["b"], 1),
        cuGraphNodeGetDependencies=lambda h, n=0: (ok, ["d"], 1),
        cuGraphNodeGetDependentNodes=lambda h, n=0: (ok, ["e"], 1),
        cuMemcpyBatchAsync=lambda *a: (ok, 0),
    )
    monkeypatch.setattr(_compat, "_drv", fake)
    assert _compat._capture_info("s") == (ok, "status", 7, "graph", ["n"], None, 1)
    assert _compat._graph_edges("g", 1) == (ok, ["a"], ["b"], None, 1)
    assert _compat._node_deps("h") == (ok, ["d"], None, 1)
    assert _compat._node_dependents("h") == (ok, ["e"], None, 1)
    assert _compat._memcpy_batch(1, 2, 3, 4, 5, 6, 7, 8) == (ok,)


# -- driver versions: the gate and require() -------------------------------------------------


def test_a_call_newer_than_the_driver_names_both_versions(driver_is):
    module = types.ModuleType("scratch")
    seen = []

    def real(*args):
        seen.append(args)
        return (0,)

    gated = _compat._gated(module, "cuStreamGetDevice", real, (12, 8))
    assert gated.__name__ == "cuStreamGetDevice"
    driver_is(12, 4)
    with pytest.raises(
        NotImplementedError,
        match=r"^cuStreamGetDevice needs an NVIDIA driver for CUDA 12\.8 or newer \(this one supports CUDA 12\.4\)$",
    ):
        gated("h")
    assert seen == [] and not hasattr(module, "cuStreamGetDevice")
    driver_is(13, 0)
    assert gated("h") == (0,) and seen == [("h",)]
    assert module.cuStreamGetDevice is real  # later look-ups skip the check


def test_require_names_feature_version_and_fix(driver_is):
    with pytest.raises(NotImplementedError) as info:
        _compat.require("a CUDA 14 feature", bindings=(14, 0))
    msg = str(info.value)
    assert msg.startswith("a CUDA 14 feature needs cuda-bindings 14.0 or newer (installed: ")
    assert 'pip install "cudacore[cu14]"' in msg
    driver_is(12, 9)
    with pytest.raises(
        ValueError,
        match=r"needs an NVIDIA driver for CUDA 13\.0 or newer \(this one supports CUDA 12\.9\)",
    ):
        _compat.require("x", driver=(13, 0), exc=ValueError)
    _compat.require("x", bindings=(12, 9), driver=(12, 9))  # both suffice: no error
    assert _compat.missing("x", bindings=(12, 0)) is None


def test_has_answers_without_a_driver(driver_is):
    assert _compat.has("cuStreamCreate")  # CUDA 12.0: no driver needed to say so
    assert not _compat.has("cuNoSuchCall")
    driver_is(12, 4)
    assert _compat.has("cuKernelGetParamInfo") and not _compat.has("cuStreamGetDevice")


@pytest.mark.skipif(V13, reason="needs cuda-bindings 12.x (runs in the cu12 environment)")
def test_managed_memory_resource_names_cuda_13_on_12x_bindings():
    from cuda_core import ManagedMemoryResource

    with pytest.raises(
        NotImplementedError,
        match=r"^ManagedMemoryResource \(managed memory pools\) needs cuda-bindings 13\.0",
    ):
        ManagedMemoryResource()


@pytest.mark.skipif(V13, reason="needs cuda-bindings 12.x (runs in the cu12 environment)")
def test_pinned_memory_resource_names_cuda_13_on_12x_bindings():
    # A pinned host pool made through the 12.9 bindings crashed the process at times (driver
    # 580), so PinnedMemoryResource is refused there as cuda.core refuses it (a RuntimeError).
    from cuda_core import PinnedMemoryResource

    for options in (None, {"max_size": 1 << 20}, {"ipc_enabled": True}):
        with pytest.raises(
            NotImplementedError,
            match=r"^PinnedMemoryResource \(pinned host memory pools\) needs cuda-bindings 13\.0",
        ):
            PinnedMemoryResource(options)
    with pytest.raises(RuntimeError):  # what cuda.core raises; NotImplementedError is one
        PinnedMemoryResource()


@pytest.mark.skipif(V13, reason="needs cuda-bindings 12.x (runs in the cu12 environment)")
def test_vmm_managed_names_the_bindings_version_on_12x():
    from cuda_core import VirtualMemoryResourceOptions

    with pytest.raises(
        ValueError, match=r"allocation_type='managed' needs cuda-bindings 13\.0 or newer"
    ):
        VirtualMemoryResourceOptions(allocation_type="managed")


# -- device attributes, versions, the pairing -----------------------------------------------


def test_cuda13_device_attributes_exist_under_both_majors():
    names = dict(_compat.device_attributes())
    for name, number in _compat._DEVICE_ATTRIBUTES_13.items():
        assert int(names[name]) == number
        assert (type(names[name]) is int) == (not V13)
    from cuda_core._device import DeviceProperties

    assert isinstance(DeviceProperties.host_memory_pools_supported, property)
    assert "CU_DEVICE_ATTRIBUTE_MAX" not in names


@pytest.mark.parametrize(
    "text,expected",
    [
        ("12.9.10", (12, 9, 10)),
        ("13.0.0", (13, 0, 0)),
        ("13.1", (13, 1, 0)),
        ("13.2.0rc1", (13, 2, 0)),
        ("12", (12, 0, 0)),
    ],
)
def test_parse_version(text, expected):
    assert _compat.parse_version(text) == expected


def test_installed_version_facts():
    import cuda.bindings

    assert _compat.BINDINGS_TEXT == cuda.bindings.__version__
    assert BINDINGS_MAJOR in (12, 13) and V13 == (BINDINGS_MAJOR == 13)
    assert _compat.BINDINGS_VERSION >= _compat.LOWEST_BINDINGS[BINDINGS_MAJOR]


@pytest.fixture
def bindings_are(monkeypatch):
    def set_bindings(text: str) -> None:
        v = _compat.parse_version(text)
        monkeypatch.setattr(_compat, "BINDINGS_TEXT", text)
        monkeypatch.setattr(_compat, "BINDINGS_VERSION", v)
        monkeypatch.setattr(_compat, "BINDINGS_MAJOR", v[0])

    return set_bindings


def test_pairing_verdicts(bindings_are):
    bindings_are("12.9.10")
    p = _compat.pairing((13, 0))
    assert (
        p["compatible"] is True
        and p["extra"] == "cu12"
        and p["bindings_major"] == 12
        and p["driver_cuda"] == "13.0"
    )
    assert p["verdict"].startswith(
        "compatible (cuda-bindings 12.x on a driver for CUDA 13.0); the features of CUDA 13"
    )
    assert 'pip install "cudacore[cu13]"' in p["verdict"]
    assert (
        _compat.pairing((12, 4))["verdict"]
        == "compatible (cuda-bindings 12.x on a driver for CUDA 12.4)"
    )
    assert _compat.pairing(None)["compatible"] is None
    bindings_are("12.9.2")
    p = _compat.pairing((12, 8))
    assert p["compatible"] is False and p["verdict"].startswith(
        "UNSUPPORTED: cuda_core needs cuda-bindings 12.9.3 or newer"
    )
    bindings_are("13.3.1")
    p = _compat.pairing((12, 8))
    assert p["compatible"] is False
    assert p["verdict"].startswith(
        "INCOMPATIBLE: cuda-bindings 13.x needs a driver for CUDA 13.0 or newer"
    )
    assert 'pip install "cudacore[cu12]"' in p["verdict"]
    assert (
        _compat.pairing((13, 0))["verdict"]
        == "compatible (cuda-bindings 13.x on a driver for CUDA 13.0)"
    )


def test_report_shows_the_pairing():
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_core", "--json"], capture_output=True, text=True, timeout=300
    )
    info = json.loads(proc.stdout)
    pair = info["pairing"]
    assert pair["bindings_major"] == BINDINGS_MAJOR and pair["extra"] == f"cu{BINDINGS_MAJOR}"
    assert (
        pair["bindings"] == _compat.BINDINGS_TEXT and pair["verdict"] == info["driver"]["verdict"]
    )
    text = subprocess.run(
        [sys.executable, "-m", "cuda_core"], capture_output=True, text=True, timeout=300
    ).stdout
    # The major, not an extra: a base install has cuda-bindings without any extra (issue 23).
    assert f"  cuda-bindings    {_compat.BINDINGS_TEXT}: CUDA {BINDINGS_MAJOR}.x\n" in text
    assert f"  driver/bindings  {pair['verdict'][:40]}" in text


def test_native_entry_points_are_cuda_12_0_calls():
    """The native layer and the ctypes callers resolve their entry points at the CUDA 12.0 ABI
    (``_backend.ABI``), the same under either major: none may be newer than 12.0."""
    from cuda_core._handles import _backend

    assert _backend.ABI == 12000
    native = set(
        re.findall(
            r'EP\("(cu[A-Za-z0-9_]+)"', (SRC / "_handles" / "_csrc" / "module.c").read_text()
        )
    )
    ctypes_callers = set()
    for text in _sources().values():
        ctypes_callers |= set(re.findall(r"entry_point\(\s*\"(cu[A-Za-z0-9_]+)\"", text))
    assert "cuLaunchKernelEx" in native and "cuLaunchHostFunc" in ctypes_callers
    assert not (native | ctypes_callers) & set(SINCE)
    intro = _typedef_versions()
    if intro is not None:
        newer = {n: intro[n] for n in native | ctypes_callers if intro.get(n, 0) > 12000}
        assert not newer, newer


# -- compiler libraries of the other major ------------------------------------------------------


def test_a_newer_majors_compiler_is_not_used():
    newer = BINDINGS_MAJOR + 1
    why = _compat.foreign_compiler(f"NVRTC {newer}.0", newer)
    assert why == (
        f"found NVRTC {newer}.0, of CUDA {newer}, which cuda_core does not use with cuda-bindings "
        f"{BINDINGS_MAJOR}.x: its output needs a CUDA {newer} driver"
    )
    assert _compat.foreign_compiler("NVRTC 12.9", 12) is None  # same major (12.x) or older (13.x)
    assert _compat.foreign_compiler(f"NVRTC {BINDINGS_MAJOR}.0", BINDINGS_MAJOR) is None


def test_require_refuses_a_newer_majors_nvrtc(monkeypatch):
    from cuda_core import CompilerLibraryNotFoundError
    from cuda_core._compile import _libraries as _compilers

    monkeypatch.setattr(_compilers, "_present", set())
    monkeypatch.setattr(_compilers, "nvrtc_version", lambda: (BINDINGS_MAJOR + 1, 2))
    with pytest.raises(CompilerLibraryNotFoundError) as info:
        _compilers.require("nvrtc", "Program.compile() of C++ code")
    err = info.value
    assert (
        err.api == f"libnvrtc.so.{BINDINGS_MAJOR}"
        and err.remedy == f'pip install "cudacore[cu{BINDINGS_MAJOR}]"'
    )
    assert f"found NVRTC {BINDINGS_MAJOR + 1}.2, of CUDA {BINDINGS_MAJOR + 1}" in str(err)
    assert "nvrtc" not in _compilers._present
