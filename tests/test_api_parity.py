"""API parity with NVIDIA's ``cuda.core`` 1.x (CPU tier; skipped when cuda.core is absent).

For an explicit list of the important classes, every public attribute of the ``cuda.core`` class
must exist on ours with the same kind (data attribute/property versus callable), a property
settable there must be settable here, methods must accept the same argument names in the same
positions, and options dataclasses must have the same fields with the same defaults. Top-level
names of ``cuda.core``, ``cuda.core.utils`` and ``cuda.core.graph`` must exist here too.

Known differences are listed in ``KNOWN_GAPS`` (empty since issue 12: every gap of the audit
is closed); a new entry needs a reason. ``test_known_gaps_are_still_gaps`` fails when an entry
is no longer a gap (for the audited cuda.core version), so the set stays honest. Besides the
public classes, the objects ``system.Device``'s queries return and the ``system.typing``
enumerations (every member) are compared.

Gap keys:
    ``name:<module>.<Name>``           public name of cuda.core missing here
    ``module:<name>``                  public submodule of cuda.core missing here
    ``<Class>.<attr>``                 attribute missing, or of another kind (data vs callable)
    ``setter:<Class>.<attr>``          settable in cuda.core, read-only here
    ``sig:<Class>.<meth>:<what>:<arg>`` argument missing / in another position / default differs /
                                       extra required argument here
    ``field:<Class>.<field>``          options dataclass field missing here
    ``field-default:<Class>.<field>``  options dataclass field default differs
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import inspect
import os
import re
import sys
from typing import Any

import pytest

cuda_core_ref = pytest.importorskip("cuda.core")

import cuda_core  # noqa: E402

AUDITED_VERSION = "1.2.2"

from tests.api_parity_classes import CLASSES  # noqa: E402

# Submodules of cuda.core whose public names code written for it imports.
NAME_MODULES = (
    "cuda.core",
    "cuda.core.utils",
    "cuda.core.graph",
    "cuda.core.system",
    "cuda.core.system.exceptions",
    "cuda.core.system.typing",
    "cuda.core.checkpoint",
    "cuda.core.texture",
)

# Dunders that are part of a class's public protocol (the rest of ``__x__`` is skipped).
PROTOCOL_DUNDERS = frozenset(
    {
        "__buffer__",
        "__contains__",
        "__cuda_array_interface__",
        "__cuda_stream__",
        "__delitem__",
        "__dlpack__",
        "__dlpack_device__",
        "__enter__",
        "__exit__",
        "__getitem__",
        "__index__",
        "__int__",
        "__iter__",
        "__len__",
        "__setitem__",
        "__sub__",
    }
)

_CALLABLE_DESCRIPTORS = frozenset(
    {
        "builtin_function_or_method",
        "classmethod_descriptor",
        "cython_function_or_method",
        "function",
        "method_descriptor",
        "wrapper_descriptor",
    }
)

# Known mismatches found by the audit (/tmp/parity_report.md). Shrink as fixes land.
KNOWN_GAPS: frozenset[str] = frozenset(
    {
        # -- missing public names / submodules --
        # -- class members (filled from the audit; see the report for priorities) --
    }
)


# -- helpers ----------------------------------------------------------------------------------


def _resolve(paths: tuple[str, ...]) -> Any:
    for path in paths:
        mod, _, attr = path.rpartition(".")
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError):
            continue
        if inspect.isclass(obj):
            return obj
    return None


def _raw(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return _MISSING


_MISSING = object()


def _kind(cls: type, name: str) -> str | None:
    """``"data"`` (property, descriptor, field, plain value), ``"callable"``, or None if absent."""
    v = _raw(cls, name)
    if v is _MISSING:
        if dataclasses.is_dataclass(cls) and name in {f.name for f in dataclasses.fields(cls)}:
            return "data"
        return None
    if isinstance(v, (classmethod, staticmethod)) or type(v).__name__ in _CALLABLE_DESCRIPTORS:
        return "callable"
    if isinstance(v, property) or type(v).__name__ in ("getset_descriptor", "member_descriptor"):
        return "data"
    return "callable" if callable(v) and not inspect.isclass(v) else "data"


def _public(cls: type) -> set[str]:
    names = {n for n in dir(cls) if not n.startswith("_")}
    names |= {n for n in PROTOCOL_DUNDERS if _raw(cls, n) is not _MISSING}
    if dataclasses.is_dataclass(cls):
        names |= {f.name for f in dataclasses.fields(cls)}
    return names


def _stub_setters(cls: type) -> set[str]:
    """Property setters of a Cython class, read from the .pyi stub shipped next to it."""
    mod = sys.modules.get(cls.__module__)
    path = getattr(mod, "__file__", None)
    if not path:
        return set()
    stub = os.path.join(os.path.dirname(path), os.path.basename(path).split(".")[0] + ".pyi")
    try:
        with open(stub, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return set()
    m = re.search(rf"^class {re.escape(cls.__name__)}\b.*?(?=^class |\Z)", text, re.S | re.M)
    return set(re.findall(r"@(\w+)\.setter", m.group(0))) if m else set()


def _ref_settable(cls: type, name: str, stub_setters: set[str]) -> bool:
    v = _raw(cls, name)
    if isinstance(v, property):
        return v.fset is not None
    return name in stub_setters


def _ours_settable(cls: type, name: str) -> bool:
    v = _raw(cls, name)
    if isinstance(v, property):
        return v.fset is not None
    if type(v).__name__ == "getset_descriptor":
        return True  # cannot tell statically; do not report
    return True  # dataclass field, __slots__ member or plain attribute


_DOC_SIG = re.compile(r"^\w+\((.*)\)(\s*->.*)?$")
_C_TYPE = re.compile(
    r"(?<![\w.])(?:int|bint|bool|double|float|str|object|size_t) (?=\w+\s*[:=,)]|\w+$)"
)


def _doc_signature(obj: Any) -> inspect.Signature | None:
    """Signature from a Cython docstring's first line, e.g. ``F(a, int b: int = 0)``."""
    first = (getattr(obj, "__doc__", None) or "").strip().split("\n", 1)[0]
    m = _DOC_SIG.match(first)
    if not m:
        return None
    try:
        fn = ast.parse(f"def f({_C_TYPE.sub('', m.group(1))}): pass").body[0]
    except SyntaxError:
        return None
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    P = inspect.Parameter
    params = []

    def default(node: ast.expr | None) -> Any:
        if node is None:
            return P.empty
        try:
            return ast.literal_eval(node)
        except ValueError:
            return ast.unparse(node)

    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    moved = []
    for i, (arg, d) in enumerate(zip(pos, defaults)):
        if a.vararg and d is not None:
            # Cython renders ``(*xs, opt=None)`` as ``(opt=None, *xs)``: keyword-only really.
            moved.append(P(arg.arg, P.KEYWORD_ONLY, default=default(d)))
            continue
        kind = P.POSITIONAL_ONLY if i < len(a.posonlyargs) else P.POSITIONAL_OR_KEYWORD
        params.append(P(arg.arg, kind, default=default(d)))
    if a.vararg:
        params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
    params += moved
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        params.append(P(arg.arg, P.KEYWORD_ONLY, default=default(d)))
    if a.kwarg:
        params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


def _params(obj: Any) -> list[inspect.Parameter] | None:
    try:
        sig: inspect.Signature | None = inspect.signature(obj)
    except (TypeError, ValueError):
        sig = _doc_signature(obj)
    if sig is None:
        return None
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    return params


_POS = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_VAR = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _sig_gaps(label: str, meth: str, ref: Any, ours: Any) -> set[str]:
    rp, op = _params(ref), _params(ours)
    if rp is None or op is None:
        return set()
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in rp) and any(
        p.name in ("args", "kwargs") for p in rp
    ):
        return set()  # ``(*args, **kwargs)`` placeholder: nothing to compare
    key = f"sig:{label}.{meth}"
    gaps = set()
    by_name = {p.name: p for p in op}
    ours_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in op)
    ours_pos = [p.name for p in op if p.kind in _POS]
    ref_pos = [p.name for p in rp if p.kind in _POS]
    for p in rp:
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            if not any(q.kind is inspect.Parameter.VAR_POSITIONAL for q in op):
                gaps.add(f"{key}:missing-arg:*{p.name}")
            continue
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        q = by_name.get(p.name)
        if q is None:
            if not ours_kwargs:
                gaps.add(f"{key}:missing-arg:{p.name}")
            continue
        if p.kind in _POS and ref_pos.index(p.name) != (
            ours_pos.index(p.name) if p.name in ours_pos else -1
        ):
            gaps.add(f"{key}:position:{p.name}")
        if p.default is not p.empty and q.default is not q.empty:
            try:
                same = bool(p.default == q.default)
            except Exception:
                same = False
            if not same:
                gaps.add(f"{key}:default:{p.name}")
        elif p.default is not p.empty and q.default is q.empty:
            gaps.add(f"{key}:default:{p.name}")
    ref_names = {p.name for p in rp}
    for q in op:
        if q.kind not in _VAR and q.default is q.empty and q.name not in ref_names:
            gaps.add(f"{key}:extra-required:{q.name}")
    return gaps


def _field_gaps(label: str, ref: type, ours: type) -> set[str]:
    if not dataclasses.is_dataclass(ref):
        return set()
    ours_fields = (
        {f.name: f for f in dataclasses.fields(ours)} if dataclasses.is_dataclass(ours) else {}
    )
    gaps = set()
    for f in dataclasses.fields(ref):
        g = ours_fields.get(f.name)
        if g is None:
            gaps.add(f"field:{label}.{f.name}")
            continue
        if f.default is not dataclasses.MISSING and f.default != g.default:
            gaps.add(f"field-default:{label}.{f.name}")
    return gaps


def _is_enum(cls: type) -> bool:
    return isinstance(cls, enum.EnumMeta) or any(b.__name__ == "FastEnum" for b in cls.__mro__)


def _class_gaps(label: str, ref: type, ours: type) -> set[str]:
    gaps = set()
    setters = _stub_setters(ref)
    for name in sorted(_public(ref)):
        rk = _kind(ref, name)
        ok = _kind(ours, name)
        if ok is None or rk != ok:
            gaps.add(f"{label}.{name}")
            continue
        if rk == "data":
            if _ref_settable(ref, name, setters) and not _ours_settable(ours, name):
                gaps.add(f"setter:{label}.{name}")
        elif not name.startswith("__"):
            gaps |= _sig_gaps(label, name, getattr(ref, name), getattr(ours, name))
    if not dataclasses.is_dataclass(ref) and not _is_enum(ref):
        # An enum's constructor is its base class's (enum.Enum here, cuda.bindings' FastEnum
        # there, whose signature differs between cuda-bindings releases): members are compared
        # by tests/system/test_system_nvml_queries.py instead.
        gaps |= _sig_gaps(label, "__init__", ref, ours)
    gaps |= _field_gaps(label, ref, ours)
    return gaps


def _name_gaps() -> set[str]:
    gaps = set()
    for modname in NAME_MODULES:
        try:
            ref_mod = importlib.import_module(modname)
        except ImportError:
            continue
        ours_name = "cuda_core" + modname[len("cuda.core") :]
        try:
            ours_mod: Any = importlib.import_module(ours_name)
        except ImportError:
            gaps.add(f"module:{modname}")
            ours_mod = cuda_core  # names may still be re-exported at the top level
        for name in getattr(ref_mod, "__all__", ()):
            if not hasattr(ours_mod, name):
                gaps.add(f"name:{modname}.{name}")
    for sub in ("typing",):  # the other submodules are in NAME_MODULES
        try:
            importlib.import_module(f"cuda.core.{sub}")
        except ImportError:
            continue
        try:
            importlib.import_module(f"cuda_core.{sub}")
        except ImportError:
            gaps.add(f"module:cuda.core.{sub}")
    return gaps


def _all_gaps() -> set[str]:
    gaps = _name_gaps()
    for label, ref_paths, ours_paths in CLASSES:
        ref, ours = _resolve(ref_paths), _resolve(ours_paths)
        if ref is not None and ours is not None:
            gaps |= _class_gaps(label, ref, ours)
    return gaps


# -- tests ------------------------------------------------------------------------------------


def test_public_names_exist():
    new = sorted(_name_gaps() - KNOWN_GAPS)
    assert not new, f"cuda.core names missing in cuda_core: {new}"


@pytest.mark.parametrize("label,ref_paths,ours_paths", CLASSES, ids=[c[0] for c in CLASSES])
def test_class_parity(label, ref_paths, ours_paths):
    ref = _resolve(ref_paths)
    if ref is None:
        pytest.skip(f"{label} not found in the installed cuda.core {cuda_core_ref.__version__}")
    ours = _resolve(ours_paths)
    assert ours is not None, f"cuda_core has no {label}"
    new = sorted(_class_gaps(label, ref, ours) - KNOWN_GAPS)
    assert not new, f"{label}: differences from cuda.core not in KNOWN_GAPS: {new}"


def test_known_gaps_are_still_gaps():
    if not KNOWN_GAPS:
        pytest.skip(
            "KNOWN_GAPS is empty: no entry to re-check (test_class_parity and "
            "test_public_names_exist fail on any gap)"
        )
    if cuda_core_ref.__version__ != AUDITED_VERSION:
        pytest.skip(f"KNOWN_GAPS was audited against cuda.core {AUDITED_VERSION}")
    if not getattr(
        importlib.import_module("cuda.core.system"), "CUDA_BINDINGS_NVML_IS_COMPATIBLE", True
    ):
        pytest.skip(
            "KNOWN_GAPS was audited with cuda-bindings that have NVML (12.9.6+, 13.2+), "
            "without which cuda.core has no system.Device"
        )
    fixed = sorted(KNOWN_GAPS - _all_gaps())
    assert not fixed, f"fixed: remove these entries from KNOWN_GAPS: {fixed}"


def test_gap_detection_sees_a_real_difference():
    # The checker must report a kind mismatch and a missing attribute (guards against a checker
    # that silently reports nothing).
    class Ref:
        @property
        def value(self) -> int:
            return 1

        def run(self, a: int, *, b: int = 2) -> None:
            pass

    class Ours:
        def value(self) -> int:
            return 1

        def run(self, b: int = 2, a: int = 0) -> None:
            pass

    gaps = _class_gaps("X", Ref, Ours)
    assert "X.value" in gaps
    assert "sig:X.run:position:a" in gaps
    assert "sig:X.run:missing-arg:b" not in gaps

    class Ours2(Ours):
        @property
        def value(self) -> int:  # type: ignore[override]
            return 1

        def run(self, a: int, *, b: int = 2) -> None:
            pass

    assert _class_gaps("X", Ref, Ours2) == set()
