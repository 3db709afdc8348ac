"""Sphinx configuration for the cuda_core documentation (``python -m sphinx -W -b html docs out``)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # document the checkout, installed or not

from cuda_core import __version__  # noqa: E402

project = "cuda_core"
author = "cuda_core developers"
copyright = "the cuda_core developers; Apache-2.0"
version = release = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

# numpy-style docstrings only.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_ivar = True
napoleon_use_rtype = False

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": True}
autoclass_content = "class"

nitpicky = False
# References into cuda.bindings and other third-party types cannot be resolved here.
suppress_warnings = ["ref.python", "ref.class", "ref.obj"]

html_theme = "alabaster"
html_title = f"cuda_core {release}"
html_static_path: list[str] = []
exclude_patterns = ["_build"]
templates_path: list[str] = []
master_doc = "index"
