"""The C types of a kernel's parameters, where its symbol or its PTX tells them.

A kernel compiled without ``extern "C"`` (or through ``name_expressions``) has an
Itanium-mangled symbol that encodes the type of every parameter (``_Z5scalePffm``: ``float*``,
``float``, ``unsigned long``); a PTX ``.entry`` lists its parameters with PTX types (``.u64``,
``.f32``, ...). :func:`kernel_param_types` reads either, once per kernel (when its first
packing plan is built), for the type check of :mod:`cuda_core._kernel_arg_rules`.

The demangler reads parameter lists only, and gives up (``None``: the types are unknown, the
size check alone applies) on any part of the mangling it does not know; it never raises.
"""

from __future__ import annotations

import re
from typing import Any

from .._kernel_arg_rules import ParamType

__all__: list[str] = []  # private: ObjectCode.get_kernel hands kernel_param_types to its kernels

_PTR = 8  # bytes of a device pointer (64-bit Linux, the only platform supported)

_BUILTINS = {
    "v": ParamType("void", "other", None),
    "w": ParamType("wchar_t", "int", 4),
    "b": ParamType("bool", "bool", 1),
    "c": ParamType("char", "int", 1),
    "a": ParamType("signed char", "int", 1),
    "h": ParamType("unsigned char", "int", 1),
    "s": ParamType("short", "int", 2),
    "t": ParamType("unsigned short", "int", 2),
    "i": ParamType("int", "int", 4),
    "j": ParamType("unsigned int", "int", 4),
    "l": ParamType("long", "int", 8),
    "m": ParamType("unsigned long", "int", 8),
    "x": ParamType("long long", "int", 8),
    "y": ParamType("unsigned long long", "int", 8),
    "n": ParamType("__int128", "int", 16),
    "o": ParamType("unsigned __int128", "int", 16),
    "f": ParamType("float", "float", 4),
    "d": ParamType("double", "float", 8),
    "e": ParamType("long double", "float", None),
    "g": ParamType("__float128", "float", 16),
}
# Two-letter builtins (and the _FloatN family); longest codes first where one is a prefix.
_D_BUILTINS = (
    ("DF16_", ParamType("_Float16", "float", 2)),
    ("DF16b", ParamType("__bf16", "float", 2)),
    ("DF32_", ParamType("_Float32", "float", 4)),
    ("DF64_", ParamType("_Float64", "float", 8)),
    ("DF128_", ParamType("_Float128", "float", 16)),
    ("Dh", ParamType("half", "float", 2)),
    ("Ds", ParamType("char16_t", "int", 2)),
    ("Di", ParamType("char32_t", "int", 4)),
    ("Du", ParamType("char8_t", "int", 1)),
    ("Dn", ParamType("decltype(nullptr)", "other", _PTR)),
)
_QUALIFIERS = {"r": "__restrict__", "V": "volatile", "K": "const"}
_SEQ_ID = re.compile(r"[0-9A-Z]*")


class _GiveUp(Exception):
    """The symbol uses a part of the mangling this reader does not know."""


def _class(name: str) -> ParamType:
    return ParamType(name, "other", None)


def _with_args(name: str, args: list[Any]) -> str:
    parts: list[str] = []
    for a in args:
        if isinstance(a, list):  # a pack
            parts.extend(x.c_type for x in a)
        else:
            parts.append(a.c_type)
    return f"{name}<{', '.join(parts)}>"


class _Demangler:
    """Reads ``_Z<name><parameter types>``, keeping the substitution table (``S_``, ``S0_``, ...)
    and the function's template arguments (``T_``, ``T0_``, ...) as the Itanium C++ ABI builds
    them: every class name, qualified type, pointer, template parameter and name prefix is a
    candidate, builtins are not, and a function's own name is not."""

    __slots__ = ("expanding", "pack_len", "pos", "s", "subs", "tparams")

    def __init__(self, s: str) -> None:
        self.s, self.pos = s, 0
        self.subs: list[ParamType] = []
        self.tparams: list[Any] | None = None  # ParamType, or a list of them for a pack
        self.expanding: int | None = None  # inside a pack expansion: the element, -1 to probe
        self.pack_len: int | None = None

    def peek(self) -> str:
        return self.s[self.pos] if self.pos < len(self.s) else ""

    def take(self, text: str) -> bool:
        if self.s.startswith(text, self.pos):
            self.pos += len(text)
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.take(text):
            raise _GiveUp

    def params(self) -> tuple[ParamType, ...]:
        self.expect("_Z")
        if self.function_name():
            self.type()  # a function template's name is followed by its return type
        if self.pos == len(self.s):
            raise _GiveUp  # a variable, not a function
        if self.s[self.pos :] == "v":
            return ()
        out: list[ParamType] = []
        while self.pos < len(self.s):
            if self.take("Dp"):
                out.extend(self.pack_expansion())
                if self.pos != len(self.s):
                    raise _GiveUp  # only a trailing pack (the substitutions after it differ)
            else:
                out.append(self.type())
        return tuple(out)

    def function_name(self) -> bool:
        """Read the function's name; True where it ends in template arguments."""
        if self.take("N"):
            if self.peek() in ("r", "V", "K", "R", "O"):
                raise _GiveUp  # a member function's qualifiers: no kernel has them
            return self.nested(function=True) is None
        self.take("L")  # internal linkage
        name = "std::" + self.source_name() if self.take("St") else self.source_name()
        if self.peek() != "I":
            return False
        self.subs.append(_class(name))
        self.tparams = self.template_args()
        return True

    def nested(self, function: bool) -> str | None:
        """``N ... E`` (the ``N`` read): the qualified name; for a function, ``None`` where it
        ends in template arguments (which become the function's)."""
        name, pushed, last_args = "", 0, None
        while not self.take("E"):
            c = self.peek()
            if c == "S" and not name:
                name = "std" if self.take("St") else self.substitution().c_type
                continue
            if c == "I" and name:
                last_args = self.template_args()
                name = _with_args(name, last_args)
            elif c.isdigit() or c == "L":
                self.take("L")
                part = self.source_name()
                name = f"{name}::{part}" if name else part
                last_args = None
            else:
                raise _GiveUp
            self.subs.append(_class(name))
            pushed += 1
        if not pushed:
            raise _GiveUp
        self.subs.pop()  # the whole name is no candidate here (a type adds itself again)
        if function and last_args is not None:
            self.tparams = last_args
            return None
        return name

    def source_name(self) -> str:
        start = self.pos
        while self.peek().isdigit():
            self.pos += 1
        if start == self.pos:
            raise _GiveUp
        n = int(self.s[start : self.pos])
        name = self.s[self.pos : self.pos + n]
        if len(name) != n:
            raise _GiveUp
        self.pos += n
        return "(anonymous namespace)" if name.startswith("_GLOBAL__N") else name

    def template_args(self) -> list[Any]:
        self.expect("I")
        args = []
        while not self.take("E"):
            args.append(self.template_arg())
        return args

    def template_arg(self) -> Any:
        if self.take("J"):  # a pack
            items = []
            while not self.take("E"):
                item = self.template_arg()
                if isinstance(item, list):
                    raise _GiveUp
                items.append(item)
            return items
        if self.take("L"):  # a literal: L <type> <value> E
            if self.peek() == "_":
                raise _GiveUp  # an external name
            self.type()
            end = self.s.find("E", self.pos)
            if end < 0:
                raise _GiveUp
            value = self.s[self.pos : end]
            self.pos = end + 1
            return ParamType("-" + value[1:] if value.startswith("n") else value, "literal", None)
        if self.peek() == "X":
            raise _GiveUp  # an expression
        return self.type()

    def type(self) -> ParamType:
        c = self.peek()
        t = _BUILTINS.get(c)
        if t is not None:
            self.pos += 1
            return t
        if c == "D":
            for code, t in _D_BUILTINS:
                if self.take(code):
                    return t
            raise _GiveUp  # vectors, decltype, pack expansions inside a type, ...
        if c in _QUALIFIERS:
            quals = []
            while self.peek() in _QUALIFIERS:
                quals.append(_QUALIFIERS[self.s[self.pos]])
                self.pos += 1
            inner = self.type()
            words = " ".join(reversed(quals))  # mangled r V K: written const volatile
            c_type = (
                f"{inner.c_type} {words}" if inner.kind == "pointer" else f"{words} {inner.c_type}"
            )
            t = ParamType(c_type, inner.kind, inner.size)
        elif c == "P":
            self.pos += 1
            t = ParamType(self.type().c_type + "*", "pointer", _PTR)
        elif c == "T":
            t = self.template_param()
            if self.peek() == "I":
                raise _GiveUp  # a template template parameter
        elif c == "S":
            if self.take("St"):
                return self.class_type("std::" + self.source_name())
            t = self.substitution()
            if self.peek() != "I":
                return t  # a substitution is no new candidate
            t = _class(_with_args(t.c_type, self.template_args()))
        elif c == "N":
            self.pos += 1
            name = self.nested(function=False)
            assert name is not None
            t = _class(name)
        elif c.isdigit():
            return self.class_type(self.source_name())
        else:
            raise _GiveUp  # references, arrays, functions, member pointers, vendor types
        self.subs.append(t)
        return t

    def class_type(self, name: str) -> ParamType:
        if self.peek() == "I":
            self.subs.append(_class(name))  # the template's name
            name = _with_args(name, self.template_args())
        t = _class(name)
        self.subs.append(t)
        return t

    def template_param(self) -> ParamType:
        self.expect("T")
        if self.take("_"):
            index = 0
        else:
            start = self.pos
            while self.peek().isdigit():
                self.pos += 1
            if start == self.pos:
                raise _GiveUp
            index = int(self.s[start : self.pos]) + 1
            self.expect("_")
        if self.tparams is None or index >= len(self.tparams):
            raise _GiveUp
        t = self.tparams[index]
        if isinstance(t, list):  # a pack: only inside its expansion
            if self.expanding is None:
                raise _GiveUp
            if self.expanding < 0:
                if self.pack_len not in (None, len(t)):
                    raise _GiveUp
                self.pack_len = len(t)
                return _class("...")
            t = t[self.expanding]
        if t.kind == "literal":
            raise _GiveUp
        return t  # type: ignore[no-any-return]

    def substitution(self) -> ParamType:
        self.expect("S")
        m = _SEQ_ID.match(self.s, self.pos)
        seq = m.group() if m else ""
        self.pos += len(seq)
        self.expect("_")  # Sa, Ss, ... (std abbreviations other than St) end here
        index = int(seq, 36) + 1 if seq else 0
        if index >= len(self.subs):
            raise _GiveUp
        return self.subs[index]

    def pack_expansion(self) -> list[ParamType]:
        """``Dp <pattern>`` (the ``Dp`` read): the pattern once per element of its pack."""
        start, n_subs = self.pos, len(self.subs)
        self.expanding, self.pack_len = -1, None
        self.type()  # find the pack and its length
        n = self.pack_len
        if n is None:
            raise _GiveUp
        out = []
        for k in range(n):
            # Each element reads the pattern as written once: the substitutions the trial and
            # the earlier elements added are not the mangler's, so back-references skip them.
            del self.subs[n_subs:]
            self.pos, self.expanding = start, k
            out.append(self.type())
        self.expanding = None
        return out


def demangled_param_types(symbol: str) -> tuple[ParamType, ...] | None:
    """The parameter types encoded in an Itanium-mangled function symbol, or ``None`` where
    ``symbol`` is not one or uses a part of the mangling this reader does not know.

    >>> [t.c_type for t in demangled_param_types("_Z5scalePffm")]
    ['float*', 'float', 'unsigned long']
    """
    if not symbol.startswith("_Z"):
        return None
    try:
        return _Demangler(symbol).params()
    except (_GiveUp, ValueError, IndexError, RecursionError):
        return None


_PTX_TYPES = {
    "u8": ParamType("an 8-bit integer (.u8)", "int", 1),
    "s8": ParamType("an 8-bit integer (.s8)", "int", 1),
    "u16": ParamType("a 16-bit integer (.u16)", "int", 2),
    "s16": ParamType("a 16-bit integer (.s16)", "int", 2),
    "u32": ParamType("a 32-bit integer (.u32)", "int", 4),
    "s32": ParamType("a 32-bit integer (.s32)", "int", 4),
    "u64": ParamType("a pointer or 64-bit integer (.u64)", "word", 8),
    "s64": ParamType("a pointer or 64-bit integer (.s64)", "word", 8),
    "f16": ParamType("half (.f16)", "float", 2),
    "f32": ParamType("float (.f32)", "float", 4),
    "f64": ParamType("double (.f64)", "float", 8),
    # untyped bits: a float, an integer or a pointer alike
    "b8": ParamType(".b8", "other", 1),
    "b16": ParamType(".b16", "other", 2),
    "b32": ParamType(".b32", "other", 4),
    "b64": ParamType(".b64", "other", 8),
}
_PTX_SPACES = frozenset({".global", ".const", ".local", ".shared"})
_ARRAY = re.compile(r"\[(\d+)\]$")


def ptx_param_types(ptx: bytes, name: str) -> tuple[ParamType | None, ...] | None:
    """The parameter types of the ``.entry`` called ``name`` in ``ptx``, or ``None`` where it
    is not found (an aggregate, ``.b8 p[16]``, is an unchecked ``.b8[16]``; a parameter whose
    type is not known is ``None``).

    >>> ptx_param_types(b".entry k(.param .u64 k_0, .param .f32 k_1) {}", "k")[1].c_type
    'float (.f32)'
    """
    text = ptx.decode("latin-1")
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\(", text)
    if m is None:
        return None
    end = text.find(")", m.end())
    if end < 0:
        return None
    body = re.sub(r"//[^\n]*|/\*.*?\*/", "", text[m.end() : end], flags=re.S).strip()
    if not body:
        return ()
    out: list[ParamType | None] = []
    for entry in body.split(","):
        words = entry.split()
        if not words or words[0] != ".param":
            return None
        out.append(_ptx_param(words[1:]))
    return tuple(out)


def _ptx_param(words: list[str]) -> ParamType | None:
    """One parameter from the words after ``.param``: ``.u64 .ptr .global .align 4 name``."""
    t: ParamType | None = None
    word = ""
    pointer = False
    i = 0
    while i < len(words) - 1:  # the last word is the name
        w = words[i]
        if w == ".ptr":
            pointer = True
        elif w == ".align":
            i += 1
        elif w.startswith(".") and w[1:] in _PTX_TYPES:
            t, word = _PTX_TYPES[w[1:]], w
        elif w not in _PTX_SPACES:
            return None
        i += 1
    if t is None:
        return None
    m = _ARRAY.search(words[-1])
    if m is not None:
        n = int(m.group(1))
        return ParamType(f"{t.c_type}[{n}]", "other", None if t.size is None else t.size * n)
    if pointer:  # a pointer is 64 bits here: a narrower .ptr parameter is not one we know
        return ParamType(f"a pointer ({word} .ptr)", "pointer", 8) if t.size == 8 else None
    return t


def kernel_param_types(
    symbol: bytes | str, code: Any, code_type: str
) -> tuple[ParamType | None, ...] | None:
    """The parameter types of kernel ``symbol`` (a ``tuple`` of :class:`ParamType`, ``None``
    for a parameter whose type is not known), or ``None`` where none are known: from the
    mangled symbol, else from the ``.entry`` of PTX code given as bytes."""
    try:  # a reading that fails is an unknown signature, never a failed launch
        name = symbol.decode("latin-1") if isinstance(symbol, bytes) else str(symbol)
        types = demangled_param_types(name)
        if types is None and code_type == "ptx" and isinstance(code, bytes):
            return ptx_param_types(code, name)
        return types
    except Exception:
        return None
