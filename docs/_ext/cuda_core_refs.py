"""Cross-references for a nitpicky (``-n -W``) build that needs no network.

Nothing here ignores a warning. Four rules resolve references, each narrow enough that a
wrong or misspelt reference still fails the build:

* **cuda_core's own names** are documented under ``docs/api/``. :func:`documented_names` reads
  the autodoc directives there. A reference that starts with the short name of a documented
  object, unique among them, resolves to that entry from any module's docstring: a
  numpy-style type ``stream : Stream`` links to ``cuda_core.Stream`` and
  ``:meth:`Program.compile``` to ``cuda_core.Program.compile`` (the member must exist).
  Another public name of a documented object (``cuda_core.graph.Graph`` for
  ``cuda_core.Graph``) resolves to its entry.
* **Base classes** that are private (``_PoolResource``, ``ViewInfo``, ...) are not shown:
  ``Bases:`` lists the nearest documented ancestors instead. A third-party base defined in a
  private module (``cuda.pathfinder._dynamic_libs...``) is shown under the public module that
  exports it.
* **Type variables** of cuda_core's signatures (the ``F`` of a decorator that returns the
  function it is given) are placeholders with no entry: they are shown as their name.
* **Names outside cuda_core** (the standard library, NumPy, ``cuda.bindings``) have no
  inventory offline (intersphinx would need the network), so a reference to one is rendered as
  code text without a link, *after* checking that the name really imports. So are the few
  words numpy-style types use for a kind of object (:data:`_PROSE_TYPES`: "sequence of int",
  "file-like object"). A ``cuda_core`` name never becomes plain text: it resolves to its API
  entry or the build fails.

Two docstring fixes run before napoleon: an Attributes entry ``a, b : int`` becomes one entry
per name (so each is a target), and a constant re-exported from a private module
(``cuda_core.LEGACY_DEFAULT_STREAM``) keeps the docstring written at its definition instead of
its class's.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any, TypeVar

from docutils import nodes
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer

_DIRECTIVE = re.compile(r"^\s*\.\.\s+auto(\w+)::\s+([\w.]+)((?:\n[ \t]+:[\w-]+:.*)*)", re.MULTILINE)
_API = Path(__file__).resolve().parent.parent / "api"

# numpy-style docstrings may name a kind of object in words ("sequence of int", "file-like
# object"); these are shown as written. Anything else that is not a name must be fixed.
_PROSE_TYPES = frozenset(
    {
        "sequence",
        "mapping",
        "iterable",
        "iterator",
        "callable",
        "file-like object",
        "host object",
        "buffer-protocol object",
        "device array",
        "ctypes function pointer",
        "bytes-like object",
    }
)


def _resolve(target: str) -> Any:
    """The object a dotted name imports as; ``LookupError`` when it does not."""
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            break
        return obj
    raise LookupError(target)


def documented_names() -> dict[str, Any]:
    """Every name documented under ``docs/api`` (automodule members included) -> its object."""
    out: dict[str, Any] = {}
    for path in sorted(_API.glob("*.rst")):
        for kind, target, options in _DIRECTIVE.findall(path.read_text()):
            if ":no-index:" in options:  # a second spelling of an entry: it makes no link target
                continue
            obj = _resolve(target)
            out[target] = obj
            if kind == "module":
                for name in getattr(obj, "__all__", ()):
                    out[f"{target}.{name}"] = getattr(obj, name)
    return out


def short_names() -> dict[str, str]:
    """Short name -> documented full name, for documented objects whose short name is unique.

    A class documented twice (``cuda_core.Graph`` is also ``cuda_core.graph.Graph``) counts once,
    under its shortest name. An ambiguous short name (``cuda_core.Device`` and
    ``cuda_core.system.Device``) is left out: the docstring must spell it out.
    """
    by_obj: dict[int, str] = {}
    for full, obj in documented_names().items():
        prev = by_obj.get(id(obj))
        if prev is None or len(full) < len(prev):
            by_obj[id(obj)] = full
    by_short: dict[str, set[str]] = {}
    for full in by_obj.values():
        by_short.setdefault(full.rsplit(".", 1)[1], set()).add(full)
    return {short: next(iter(fulls)) for short, fulls in by_short.items() if len(fulls) == 1}


def _public_name(cls: type) -> str | None:
    """``module.Name`` for a third-party class, under the shortest public module exporting it."""
    module = cls.__module__
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        if any(p.startswith("_") for p in parts[:i]):
            break
        try:
            if getattr(importlib.import_module(prefix), cls.__name__, None) is cls:
                return f"{prefix}.{cls.__name__}"
        except ImportError:
            continue
    return None


_documented_ids: set[int] = set()


def _process_bases(app: Any, name: str, obj: Any, options: Any, bases: list[Any]) -> None:
    if not _documented_ids:
        _documented_ids.update(id(o) for o in documented_names().values())
    documented = _documented_ids

    def shown(base: Any) -> list[Any]:
        if not isinstance(base, type):
            return [base]
        if base.__module__.split(".")[0] == "cuda_core":
            if id(base) in documented:
                return [base]
            return [b for parent in base.__bases__ for b in shown(parent)]
        if (
            any(p.startswith("_") for p in base.__module__.split("."))
            and base.__module__ != "builtins"
        ):
            public = _public_name(base)
            return [f":py:class:`{public}`"] if public else [base]
        return [base]

    new: list[Any] = []
    for base in bases:
        for b in shown(base):
            if b not in new:
                new.append(b)
    bases[:] = new


_NAMES = re.compile(r"^(\s*)(\w+(?:, \w+)+) : (.*)$")


def _split_attribute_lines(
    app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """Give each name of a numpy-style ``a, b : int`` entry under Attributes its own entry.

    Napoleon turns every Attributes entry into an ``.. attribute::`` target, but keeps
    ``a, b`` as one name. Runs before napoleon (priority 400 < 500).
    """
    out: list[str] = []
    i, section = 0, ""
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and lines[i + 1].strip() and set(lines[i + 1].strip()) == {"-"}:
            section = line.strip()
        m = _NAMES.match(line) if section == "Attributes" else None
        if not m:
            out.append(line)
            i += 1
            continue
        indent, names, typ = m.groups()
        body = []
        i += 1
        while i < len(lines) and (
            not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(indent)
        ):
            body.append(lines[i])
            i += 1
        for n in names.split(", "):
            out += [f"{indent}{n} : {typ}", *body]
    lines[:] = out


def _reexported_data_docstring(
    app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """A constant documented under a re-exported name keeps the docstring of its definition.

    ``cuda_core.LEGACY_DEFAULT_STREAM`` is defined (with its docstring) in ``cuda_core._stream``;
    autodoc looks in ``cuda_core`` only and falls back to the docstring of the value's class.
    """
    cls_doc = getattr(type(obj), "__doc__", None)
    if (
        what != "data"
        or not lines
        or not cls_doc
        or lines[0].strip() != cls_doc.strip().splitlines()[0]
    ):
        return
    attr = name.rpartition(".")[2]
    for modname, module in sorted(sys.modules.items()):
        if modname.split(".")[0] == "cuda_core" and getattr(module, attr, None) is obj:
            try:
                docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
            except PycodeError:
                continue
            if ("", attr) in docs:
                lines[:] = list(docs[("", attr)])
                return


_short: dict[str, str] = {}
_by_id: dict[int, str] = {}


def _missing_reference(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    head, _, rest = target.partition(".")
    if not _short:
        _short.update(short_names())
        _by_id.update(
            {
                id(obj): full
                for full, obj in documented_names().items()
                if not isinstance(obj, (bool, int, float, str, bytes, type(None)))
            }
        )
    if head == "cuda_core":
        try:
            placeholder = isinstance(_resolve(target), TypeVar)
        except LookupError:
            placeholder = False
        if placeholder:  # a signature's type variable (``range(name: F) -> F``): no entry
            name = target.rsplit(".", 1)[1]
            return contnode if isinstance(contnode, nodes.literal) else nodes.literal("", name)
        # Another public name of a documented object (cuda_core.graph.Graph is cuda_core.Graph).
        parts = target.split(".")
        for i in range(len(parts), 1, -1):
            try:
                obj = _resolve(".".join(parts[:i]))
            except LookupError:
                continue
            full = _by_id.get(id(obj))
            if full and full != ".".join(parts[:i]):
                return env.get_domain("py").resolve_xref(
                    env,
                    node["refdoc"],
                    app.builder,
                    node["reftype"],
                    ".".join([full, *parts[i:]]),
                    node,
                    contnode,
                )
        return None
    if head in _short:
        full = _short[head] + (f".{rest}" if rest else "")
        return env.get_domain("py").resolve_xref(
            env, node["refdoc"], app.builder, node["reftype"], full, node, contnode
        )
    if node.get("reftype") == "class" and target in _PROSE_TYPES:
        return contnode
    if "." not in target and node.get("reftype") != "mod":
        return None  # a bare word ("them", "split") is a docstring mistake, not a module
    try:
        _resolve(target)
    except LookupError:
        return None
    # Code text without a link: the name exists, its documentation is not reachable offline.
    return contnode if isinstance(contnode, nodes.literal) else nodes.literal("", contnode.astext())


def _second_spelling(
    app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """A ``:no-index:`` entry is a second spelling of one documented elsewhere (under its index
    name): show a link to that entry instead of the docstring again, whose relative references
    would have no targets under this spelling."""
    if not ("no-index" in options or "noindex" in options) or what != "class":
        return
    others = [full for full, o in documented_names().items() if o is obj and full != name]
    if others:
        lines[:] = [f"The same class as :class:`{others[0]}`; documented there.", ""]


def setup(app: Any) -> dict[str, Any]:
    app.connect("autodoc-process-docstring", _second_spelling, priority=380)
    app.connect("autodoc-process-docstring", _reexported_data_docstring, priority=390)
    app.connect("autodoc-process-docstring", _split_attribute_lines, priority=400)
    app.connect("autodoc-process-bases", _process_bases)
    app.connect("missing-reference", _missing_reference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
