"""The public surface: ``__all__`` matches the modules, and every public name is documented."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import warnings
from pathlib import Path

import pytest

import cuda_core

DOCS = Path(__file__).resolve().parent.parent / "docs"
API = DOCS / "api"
PKG = Path(cuda_core.__file__).resolve().parent
# ``.. autoclass:: cuda_core.Device`` and kin; ``.. automodule:: cuda_core.system``; an explicit
# signature may follow the name (``.. autoclass:: cuda_core.MemoryPoolAttributes()``).
_DIRECTIVE = re.compile(r"^\s*\.\.\s+auto(\w+)::\s+([\w.]+)", re.MULTILINE)
# Public modules that are documented as modules, not star-exported into cuda_core.
_PUBLIC_MODULES = {"system", "utils", "graph", "experimental", "checkpoint", "__main__"}
# Private modules that export nothing and need no __all__.
_NO_ALL = {"_version", "_native"}  # the compiled module and the version file
# Modules of the public graph wing that cuda_core re-exports (as cuda.core does).
_GRAPH_REEXPORTED = ("graph._builder", "graph._options")


def _directives() -> list[tuple[str, str, str]]:
    """(kind, target, file) for every autodoc directive under docs/api."""
    out = []
    for path in sorted(API.glob("*.rst")):
        for kind, target in _DIRECTIVE.findall(path.read_text()):
            out.append((kind, target, path.name))
    return out


def _private_modules() -> list[str]:
    """The private modules at any depth of the private packages (the hall, ``_compile``,
    ``_interop``, ...), and the modules of the graph wing whose names ``cuda_core`` re-exports."""
    names = list(_GRAPH_REEXPORTED)
    with warnings.catch_warnings():  # walking imports cuda_core.experimental, which warns
        warnings.simplefilter("ignore", DeprecationWarning)
        infos = list(pkgutil.walk_packages(cuda_core.__path__, prefix="cuda_core."))
    for info in infos:
        parts = info.name.split(".")[1:]
        if (
            all(p.startswith("_") for p in parts)
            and parts[0] not in _PUBLIC_MODULES | _NO_ALL
            and parts[-1] not in _NO_ALL
        ):
            if parts[-1] != "__main__":
                names.append(".".join(parts))
    return sorted(names)


def _all_bindings(tree: ast.Module) -> list[ast.Assign | ast.AnnAssign | ast.AugAssign]:
    """The module-level statements that bind or extend ``__all__``."""
    out = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                out.append(node)
    return out


def _literal_all(tree: ast.Module) -> list[str] | None:
    """The module's ``__all__`` where its first binding is a literal list of strings."""
    bindings = _all_bindings(tree)
    value = bindings[0].value if bindings else None
    if isinstance(value, ast.List) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
    ):
        return [e.value for e in value.elts if isinstance(e, ast.Constant)]
    return None


def _re_exports(path: Path) -> dict[str, str]:
    """Name -> absolute module of every ``from M import Name as Name`` at the top of *path*."""
    package = ".".join(path.relative_to(PKG.parent).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.removesuffix(".__init__")
    else:
        package = package.rpartition(".")[0]
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module) if p)
            for alias in node.names:
                if alias.asname == alias.name:
                    out[alias.name] = module
    return out


def test_api_pages_have_directives():
    assert API.is_dir(), "docs/api is missing"
    assert _directives(), "no autodoc directive found under docs/api"


def test_all_is_sorted_and_unique():
    assert list(cuda_core.__all__) == sorted(cuda_core.__all__)
    assert len(set(cuda_core.__all__)) == len(cuda_core.__all__)


def test_all_equals_union_of_module_alls():
    # The top level re-exports whole modules: the hall's modules (cuda_core/_x.py) and the wing
    # modules it imports names from (cuda_core/_memory, cuda_core/_compile/_program.py, ...).
    union: set[str] = set()
    modules = {name for name in _private_modules() if not (PKG / name).is_dir()}
    modules |= {
        module.removeprefix("cuda_core.")
        for name, module in _re_exports(PKG / "__init__.py").items()
        if not name.startswith("_") and not inspect.ismodule(getattr(cuda_core, name))
    }
    for name in sorted(modules):
        mod = importlib.import_module(f"cuda_core.{name}")
        names = getattr(mod, "__all__", None)
        assert names is not None, f"cuda_core.{name} has no __all__"
        union.update(names)
    assert set(cuda_core.__all__) == union
    for name in cuda_core.__all__:
        assert not name.startswith("_"), name
        assert hasattr(cuda_core, name), name


@pytest.mark.parametrize("modname", _private_modules())
def test_each_module_all_is_sorted_and_defined(modname):
    mod = importlib.import_module(f"cuda_core.{modname}")
    names = list(getattr(mod, "__all__", []))
    assert names == sorted(names), f"cuda_core.{modname}.__all__ is not sorted"
    for name in names:
        assert hasattr(mod, name), f"cuda_core.{modname}.__all__ names missing {name}"


# The public faces list their names in a literal, sorted ``__all__`` and re-export each one
# explicitly (``from ._x import Name as Name``): the forms that mypy and pyright follow.
FACES = (
    "__init__.py",
    "_memory/__init__.py",
    "graph/__init__.py",
    "nccl/__init__.py",
    "profiler/__init__.py",
    "system/__init__.py",
    "texture/__init__.py",
    "utils.py",
)


@pytest.mark.parametrize("face", FACES)
def test_face_re_exports_each_name_explicitly(face):
    path = PKG / face
    tree = ast.parse(path.read_text())
    stars = [
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.names[0].name == "*"
    ]
    assert not stars, f"cuda_core/{face}: star imports from {stars}"
    names = _literal_all(tree)
    assert names is not None, f"cuda_core/{face}: __all__ is not a literal list of strings"
    assert names == sorted(set(names)), f"cuda_core/{face}: __all__ is not sorted and unique"
    re_exported = _re_exports(path)
    missing = [n for n in names if n not in re_exported]
    assert not missing, (
        f"cuda_core/{face}: not re-exported as 'from M import Name as Name': {missing}"
    )
    modname = ".".join(path.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__")
    mod = importlib.import_module(modname)
    assert list(mod.__all__) == names, f"{modname}.__all__ changes after its literal"
    unlisted = [
        n
        for n in re_exported
        if not n.startswith("_") and n not in names and not inspect.ismodule(getattr(mod, n))
    ]
    assert not unlisted, f"{modname} re-exports names its __all__ lacks: {unlisted}"


# The pre-1.0 namespace repeats no list: each of its faces star-imports one face above and
# extends ``__all__`` with that face's ``__all__`` (``__all__ += m.__all__``, a form mypy and
# pyright follow; tests/test_typing_api.py checks both see every name).
FOLDED_FACES = {
    "experimental/__init__.py": ("cuda_core", ["system", "utils"]),
    "experimental/utils.py": ("cuda_core.utils", []),
}


@pytest.mark.parametrize("face", sorted(FOLDED_FACES))
def test_folded_face_takes_its_names_from_one_list(face):
    source, extra = FOLDED_FACES[face]
    tree = ast.parse((PKG / face).read_text())
    stars = [
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.names[0].name == "*"
    ]
    assert stars == [source], f"cuda_core/{face}: star imports {stars}"
    bindings = _all_bindings(tree)
    assert _literal_all(tree) == extra and len(bindings) == 2, f"cuda_core/{face}: __all__"
    grow = bindings[1]
    assert isinstance(grow, ast.AugAssign) and ast.unparse(grow.value).endswith(".__all__")
    modname = ".".join((PKG / face).relative_to(PKG.parent).with_suffix("").parts)
    mod = importlib.import_module(modname.removesuffix(".__init__"))
    assert list(mod.__all__) == extra + list(importlib.import_module(source).__all__)


def _module_files() -> list[str]:
    return sorted(
        str(p.relative_to(PKG))
        for p in PKG.rglob("*.py")
        if str(p.relative_to(PKG)) not in FOLDED_FACES
    )


@pytest.mark.parametrize("relpath", _module_files())
def test_every_module_all_is_a_literal_sorted_list(relpath):
    tree = ast.parse((PKG / relpath).read_text())
    bindings = _all_bindings(tree)
    if not bindings:
        public = [
            n.name
            for n in tree.body
            if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and not n.name.startswith("_")
        ]
        assert not public, f"cuda_core/{relpath} has public names but no __all__: {public}"
        return
    names = _literal_all(tree)
    assert names is not None, f"cuda_core/{relpath}: __all__ is not a literal list of strings"
    assert names == sorted(names), f"cuda_core/{relpath}: __all__ is not sorted"
    assert len(bindings) == 1, f"cuda_core/{relpath}: __all__ is bound more than once"
    # Where a name exists only with some bindings, ``__all__.remove(name)`` keeps it sorted;
    # append/extend/sort/+= are computed lists that type checkers may not follow.
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "__all__"
        ):
            assert node.attr == "remove", f"cuda_core/{relpath}: __all__.{node.attr}(...)"
        if isinstance(node, ast.AugAssign) and getattr(node.target, "id", None) == "__all__":
            pytest.fail(f"cuda_core/{relpath}: __all__ is extended with +=")


def test_every_public_name_is_documented():
    documented = {target for _, target, _ in _directives()}
    missing = [n for n in cuda_core.__all__ if f"cuda_core.{n}" not in documented]
    assert not missing, f"not in any autodoc directive under docs/api: {missing}"


def test_every_utils_name_is_documented():
    try:
        utils = importlib.import_module("cuda_core.utils")
    except ModuleNotFoundError:
        pytest.skip("cuda_core.utils does not exist yet")
    documented = {target for _, target, _ in _directives()}
    public = getattr(utils, "__all__", [n for n in vars(utils) if not n.startswith("_")])
    missing = [n for n in public if f"cuda_core.utils.{n}" not in documented]
    assert not missing, f"cuda_core.utils names not documented: {missing}"


def test_system_module_is_documented_with_members():
    text = (API / "system.rst").read_text()
    assert re.search(r"^\.\. automodule:: cuda_core\.system\s*\n\s+:members:", text, re.MULTILINE)
    from cuda_core import system

    for name in system.__all__:
        obj = getattr(system, name)
        if isinstance(obj, type):
            # Classes: a docstring (the NVML error classes are cuda.bindings.nvml's own).
            if not issubclass(obj, system.NvmlError):
                assert (obj.__doc__ or "").strip(), f"cuda_core.system.{name} has no docstring"
            continue
        if not callable(obj):  # a constant: documented with its own directive
            assert re.search(rf"^\.\. autodata:: cuda_core\.system\.{name}\n", text, re.M), name
            continue
        doc = obj.__doc__ or ""
        assert "Returns" in doc, f"cuda_core.system.{name} lacks a numpy-style docstring"


def test_checkpoint_module_is_documented():
    from cuda_core import checkpoint

    documented = {target for _, target, _ in _directives()}
    for name in checkpoint.__all__:
        assert f"cuda_core.checkpoint.{name}" in documented, name


def _resolve(target: str) -> object:
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(target)


def test_every_documented_name_exists():
    for kind, target, page in _directives():
        assert target.startswith("cuda_core"), f"{page}: {target} is not a cuda_core name"
        try:
            _resolve(target)
        except (AttributeError, ModuleNotFoundError) as exc:
            pytest.fail(f"{page}: auto{kind}:: {target} does not exist ({exc})")


def test_public_names_have_docstrings():
    for name in cuda_core.__all__:
        obj = getattr(cuda_core, name)
        if isinstance(obj, type) or callable(obj):
            assert (obj.__doc__ or "").strip(), f"cuda_core.{name} has no docstring"


def test_index_toctree_lists_the_pages():
    text = (DOCS / "index.rst").read_text()
    trees = text.split(".. toctree::")[1:]
    pages = re.findall(r"^\s{3}(\S+)\s*$", trees[0], re.MULTILINE)
    expected = [
        "install",
        "quickstart",
        "tutorial_cupy",
        "tutorial_pytorch",
        "migration",
        "cpu_walkthrough",
        "devices",
        "streams_events",
        "green_contexts",
        "memory",
        "ipc",
        "multi_gpu",
        "compiling",
        "launching",
        "interop",
        "external_memory",
        "external_semaphores",
        "graphs",
        "nccl",
        "profiling",
        "system",
        "tma",
        "textures",
        "troubleshooting",
        "examples",
        "environment",
        "release_notes",
        "api/index",
    ]
    assert [p for p in pages if not p.startswith(":")] == expected
    # The contributor guide is in the build too, under its own caption.
    assert len(trees) == 2 and ":caption: Contributing" in trees[1]
    assert re.findall(r"^\s{3}(dev/\S+)\s*$", trees[1], re.MULTILINE) == ["dev/index"]
    for page in expected:
        assert (DOCS / f"{page}.rst").is_file(), page


def test_contributing_points_only_into_the_repository():
    root = DOCS.parent
    text = (root / "CONTRIBUTING.md").read_text()
    assert "shared folder" not in text and "DESIGN.md" not in text and "STYLE.md" not in text
    for target in re.findall(r"\]\(([^)]+)\)", text):
        if not target.startswith("http"):
            assert (root / target).is_file(), f"CONTRIBUTING.md links to a missing file: {target}"
    for page in ("architecture", "testing", "benchmarks", "style"):
        assert f"docs/dev/{page}.rst" in text


def test_every_graph_name_is_documented():
    # cuda_core.graph's names: the four capture classes are documented under cuda_core.<Name>,
    # the explicit-graph API under cuda_core.graph.<Name>.
    graph = importlib.import_module("cuda_core.graph")
    documented = {target for _, target, _ in _directives()}
    missing = [
        n
        for n in graph.__all__
        if f"cuda_core.graph.{n}" not in documented and f"cuda_core.{n}" not in documented
    ]
    assert not missing, f"cuda_core.graph names not documented: {missing}"


def test_every_nccl_name_is_documented():
    nccl = importlib.import_module("cuda_core.nccl")
    documented = {target for _, target, _ in _directives()}
    missing = [n for n in nccl.__all__ if f"cuda_core.nccl.{n}" not in documented]
    assert not missing, f"cuda_core.nccl names not documented: {missing}"
    for name in nccl.__all__:
        assert (getattr(nccl, name).__doc__ or "").strip(), (
            f"cuda_core.nccl.{name} has no docstring"
        )


def test_every_profiler_name_is_documented():
    profiler = importlib.import_module("cuda_core.profiler")
    documented = {target for _, target, _ in _directives()}
    missing = [n for n in profiler.__all__ if f"cuda_core.profiler.{n}" not in documented]
    assert not missing, f"cuda_core.profiler names not documented: {missing}"
    for name in profiler.__all__:
        doc = getattr(profiler, name).__doc__ or ""
        assert "Raises" in doc or name == "Range", f"cuda_core.profiler.{name}: no Raises section"


def test_every_texture_name_is_documented():
    texture = importlib.import_module("cuda_core.texture")
    documented = {target for _, target, _ in _directives()}
    missing = [n for n in texture.__all__ if f"cuda_core.texture.{n}" not in documented]
    assert not missing, f"cuda_core.texture names not documented: {missing}"


def test_cpu_walkthrough_runs_without_a_gpu():
    text = (DOCS / "cpu_walkthrough.rst").read_text()
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", text)
    assert len(blocks) >= 4
    src = "\n".join("\n".join(line[4:] for line in b.splitlines()) for b in blocks)
    exec(compile(src, "docs/cpu_walkthrough.rst", "exec"), {"print": lambda *a, **k: None})


def test_troubleshooting_covers_the_first_hour():
    text = (DOCS / "troubleshooting.rst").read_text()
    for topic in (
        "No NVIDIA driver",
        "NVRTC, nvJitLink or libNVVM missing",
        "Wrong or missing architecture",
        "The compile cache",
        "The native backend is off",
        "CUDA errors and what they mean",
        'pip install "cudacore[cu13]"',
        "--clear-cache",
        "CUDA_CORE_BACKEND",
    ):
        assert topic in text, topic


def test_sphinx_is_nitpicky_and_suppresses_nothing():
    # Every reference resolves (docs/_ext/cuda_core_refs.py says how, offline); none is ignored.
    text = (DOCS / "conf.py").read_text()
    assert re.search(r"^nitpicky = True$", text, re.MULTILINE)
    for knob in ("suppress_warnings", "nitpick_ignore"):
        assert knob not in text, f"docs/conf.py sets {knob}"
    ci = (DOCS.parent / ".ci" / "run").read_text()
    assert "python -m sphinx -n -W" in ci


@pytest.mark.parametrize(
    "page, script",
    [("tutorial_cupy", "cupy_tutorial.py"), ("tutorial_pytorch", "pytorch_tutorial.py")],
)
def test_tutorials_show_only_the_tested_example(page, script):
    # The tutorial's code is the example that tests/test_examples.py runs, included piece by
    # piece between "# [name]" / "# [/name]" markers, so the page cannot drift from it.
    text = (DOCS / f"{page}.rst").read_text()
    assert "code-block" not in text and not re.search(r"::\n\n    \S", text), (
        "inline code in a tutorial"
    )
    assert re.findall(r"literalinclude:: \.\./examples/(\S+)", text) and all(
        name == script for name in re.findall(r"literalinclude:: \.\./examples/(\S+)", text)
    )
    src = (DOCS.parent / "examples" / script).read_text()
    shown = re.findall(r":start-after: # \[(\w+)\]\n\s+:end-before: # \[/(\w+)\]", text)
    assert shown and all(start == end for start, end in shown)
    marked = re.findall(r"^\s*# \[(\w+)\]$", src, re.MULTILINE)
    assert sorted(marked) == sorted(start for start, _ in shown), "every marked part is shown once"
    for name in marked:
        assert src.count(f"# [{name}]\n") == 1 and src.count(f"# [/{name}]\n") == 1, name


def test_code_blocks_scroll_instead_of_being_clipped():
    conf = (DOCS / "conf.py").read_text()
    assert re.search(r'^html_css_files = \["cuda_core\.css"\]', conf, re.MULTILINE)
    css = (DOCS / "_static" / "cuda_core.css").read_text()
    assert re.search(r"div\.highlight pre \{[^}]*overflow-x: auto", css)


def test_every_environment_variable_read_is_on_the_environment_page():
    # The names the package and its build read from os.environ (quoted in the source), each
    # documented as a term of docs/environment.rst.
    root = DOCS.parent
    sources = [*sorted((root / "cuda_core").rglob("*.py")), root / "setup.py"]
    read = set()
    for path in sources:
        text = path.read_text(encoding="utf-8")
        if "environ" in text:
            read |= set(re.findall(r"[\"']((?:CUDA_CORE|CUDA_PYTHON)_[A-Z0-9_]+)[\"']", text))
    assert {"CUDA_CORE_BACKEND", "CUDA_CORE_CACHE", "CUDA_CORE_CACHE_DIR"} <= read
    page = (DOCS / "environment.rst").read_text()
    missing = sorted(n for n in read | {"XDG_CACHE_HOME"} if f"\n``{n}``" not in page)
    assert missing == [], f"document these in docs/environment.rst: {missing}"


def test_the_release_notes_page_shows_the_changelog():
    page = (DOCS / "release_notes.rst").read_text()
    assert ".. literalinclude:: ../CHANGELOG.md" in page
    assert (DOCS.parent / "CHANGELOG.md").is_file()
    index = (DOCS / "index.rst").read_text()
    assert "   environment\n" in index and "   release_notes\n" in index


def test_long_signatures_are_wrapped():
    # ProgramOptions' signature is over 2,000 characters on one line otherwise (issue 23).
    conf = (DOCS / "conf.py").read_text()
    m = re.search(r"^maximum_signature_line_length = (\d+)$", conf, re.MULTILINE)
    assert m and int(m.group(1)) <= 100


def test_the_examples_page_lists_every_example_from_its_index():
    # docs/examples.rst sets examples/README.md's table (docs/_ext/examples_table.py): one
    # index, every script in it.
    import sys

    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        import examples_rows
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    scripts = sorted(p.name for p in (DOCS.parent / "examples").glob("[!_]*.py"))
    rows = examples_rows.read_rows()
    assert sorted(r[0] for r in rows) == scripts
    assert all(shows and needs for _, shows, needs in rows)
    assert ".. examples-table::" in (DOCS / "examples.rst").read_text()
    assert examples_rows.rst("`Buffer`s and `x`/`y`") == "``Buffer``\\ s and ``x``/``y``"


def test_the_install_page_leaves_the_backend_internals_to_the_developer_guide():
    install = (DOCS / "install.rst").read_text()
    assert "_handles._native" not in install and "stale" not in install
    assert ":doc:`environment`" in install and ":doc:`dev/architecture`" in install
    dev = (DOCS / "dev" / "architecture.rst").read_text()
    assert "The native backend at install\n-----------------------------\n" in dev
    assert "``cuda_core._handles._native``" in dev
