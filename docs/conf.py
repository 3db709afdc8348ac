"""Sphinx configuration for the cuda_core documentation (``python -m sphinx -W -b html docs out``)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # document the checkout, installed or not
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

from cuda_core import __version__  # noqa: E402

project = "cuda_core"
author = "cuda_core developers"
copyright = "the cuda_core developers; Apache-2.0"
version = release = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "cuda_core_refs",  # docs/_ext: how references resolve offline (read its docstring)
    "examples_table",  # docs/_ext: the examples page's table, from examples/README.md
]

# numpy-style docstrings only.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_ivar = False
napoleon_use_rtype = False
# "int, optional" and "{'ptx', 'cubin'}" become markup, not references to "optional" or "{'ptx'".
napoleon_preprocess_types = True

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": True}
# A signature longer than this is set one parameter per line (ProgramOptions' would be one line
# of over 2,000 characters).
maximum_signature_line_length = 99
autoclass_content = "class"

# Every reference must resolve; nothing is suppressed or ignored. Names outside cuda_core
# render as code text (no inventory is reachable offline): see docs/_ext/cuda_core_refs.py.
nitpicky = True

html_theme = "alabaster"
# Room for ~100-column code beside the sidebar; docs/_static/cuda_core.css makes anything wider
# scroll with a visible scrollbar instead of being clipped.
html_theme_options = {"page_width": "1180px", "body_max_width": "none", "code_font_size": "0.85em"}
html_title = f"cuda_core {release}"
html_static_path = ["_static"]
html_css_files = ["cuda_core.css"]  # not custom.css: alabaster already links its own, empty one
exclude_patterns = ["_build"]
templates_path: list[str] = []
master_doc = "index"
