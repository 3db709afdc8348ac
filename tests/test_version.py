"""``cuda_core.__version__`` names the API level: major.minor of the cuda.core release it implements."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.version import Version

import cuda_core

ROOT = Path(__file__).resolve().parent.parent


def test_version_is_major_minor_patch_of_the_cuda_core_api():
    assert re.fullmatch(r"\d+\.\d+\.\d+", cuda_core.__version__), cuda_core.__version__
    assert cuda_core.__version__.startswith("1.3.")


def test_code_gating_on_the_version_takes_the_1x_path():
    # What libraries written for cuda.core check before calling a 1.x-only form.
    v = Version(cuda_core.__version__)
    assert v >= Version("1.0.0") and v >= Version("1.2")


def test_migration_page_and_changelog_say_which_release_the_version_matches():
    major_minor = ".".join(cuda_core.__version__.split(".")[:2])
    page = (ROOT / "docs" / "migration.rst").read_text()
    row = re.search(r"\* - (\d+\.\d+)\.x\n\s+- (\d+\.\d+) \(", page)
    assert row is not None and row.groups() == (major_minor, major_minor)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"`{cuda_core.__version__}`" in changelog and f"cuda.core` {major_minor}" in changelog


def test_the_package_metadata_reads_the_same_version():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'version = { attr = "cuda_core._version.__version__" }' in text
