"""The fake driver and the native module under test, loaded for one check (see ``drive.py``).

``python drive.py NATIVE_SO STUB_SO CHECK`` loads the given build of the native module on its
own (never the test process's), the stub driver library, and the ctypes views of the stub's
counters; the check modules (``checks_*.py``) take them from here, with the helpers they share.
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

NATIVE_SO, STUB_SO, CHECK = sys.argv[1:4]

spec = importlib.util.spec_from_file_location("cuda_core._handles._native", NATIVE_SO)
assert spec is not None and spec.loader is not None
N: Any = importlib.util.module_from_spec(spec)
spec.loader.exec_module(N)

lib = ctypes.CDLL(STUB_SO)
lib.stub_ctx.restype = ctypes.c_void_p
lib.stub_ctx_id.restype = ctypes.c_ulonglong
lib.stub_set_current.argtypes = [ctypes.c_void_p]
lib.stub_count.argtypes = [ctypes.c_char_p]
lib.stub_fail.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
lib.stub_set_busy.argtypes = [ctypes.c_void_p, ctypes.c_int]
lib.stub_set_capturing.argtypes = [ctypes.c_void_p, ctypes.c_int]
lib.stub_is_dead.argtypes = [ctypes.c_void_p]
lib.stub_frees.argtypes = [ctypes.c_ulonglong]
lib.stub_free_stream.argtypes = [ctypes.c_ulonglong]
lib.stub_free_stream.restype = ctypes.c_void_p
lib.stub_free_current.argtypes = [ctypes.c_ulonglong]
lib.stub_free_current.restype = ctypes.c_void_p


class LaunchSeen(ctypes.Structure):
    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shmem", ctypes.c_uint),
        ("num_attrs", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("function", ctypes.c_void_p),
        ("params", ctypes.c_void_p),
        ("extra", ctypes.c_void_p),
        ("attr_id", ctypes.c_int * 3),
        ("attr_value", (ctypes.c_uint * 3) * 3),
        ("attrs_null", ctypes.c_int),
    ]


class MemcpySeen(ctypes.Structure):
    _fields_ = [
        ("dst", ctypes.c_ulonglong),
        ("src", ctypes.c_ulonglong),
        ("n", ctypes.c_size_t),
        ("stream", ctypes.c_void_p),
    ]


launch_seen = LaunchSeen.in_dll(lib, "stub_launch")
memcpy_seen = MemcpySeen.in_dll(lib, "stub_memcpy")
errors = ctypes.c_int.in_dll(lib, "stub_errors")
live = (ctypes.c_int * 3).in_dll(lib, "stub_live")
retains = ctypes.c_int.in_dll(lib, "stub_retains")
releases = ctypes.c_int.in_dll(lib, "stub_releases")
STREAM, EVENT = 1, 2


class FakeCUDAError(Exception):
    def __init__(self, status: int, api: str) -> None:
        super().__init__(f"{api}: {status}")
        self.status = status
        self.api = api


def count(name: str) -> int:
    return int(lib.stub_count(name.encode()))


def fail(name: str, status: int, times: int = 1) -> None:
    assert lib.stub_fail(name.encode(), status, times) == 0, name


def raises(exc_type: type[BaseException], fn: Callable[[], Any], match: str = "") -> BaseException:
    try:
        fn()
    except exc_type as exc:
        assert match in str(exc), (match, str(exc))
        return exc
    raise AssertionError(f"{fn} did not raise {exc_type.__name__}")


def cuda_error(fn: Callable[[], Any], status: int, api: str) -> None:
    exc = raises(FakeCUDAError, fn)
    assert isinstance(exc, FakeCUDAError)
    assert (exc.status, exc.api) == (status, api), (exc.status, exc.api)


CHECKS: dict[str, Callable[[], None]] = {}


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


# The context registry bind() hands the module (cuda_core's is _contexts.context_handle): one
# handle per address; a check may replace its answer (``registry_hook``) and reads what it was
# asked (``registry_asked``).
registry: dict[int, Any] = {}
registry_asked: list[int] = []
registry_hook: list[Callable[[int], Any]] = []


def context_of(address: int) -> Any:
    registry_asked.append(address)
    if registry_hook:
        return registry_hook[0](address)
    h = registry.get(address)
    if h is None:
        h = registry[address] = N.ContextHandle(address)
    return h


def bind() -> None:
    names = N.entry_point_names()
    addresses = {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in names}
    N.bind(addresses, FakeCUDAError, context_of)


def new_ctx(device: int = -1) -> Any:
    return N.ContextHandle(lib.stub_ctx(), device)
