"""CPU tier: pickles that name the module paths of before the wings became subpackages load."""

from __future__ import annotations

import pickle

import pytest

import cuda_core
from cuda_core import GraphCompleteOptions, LinkerOptions, ObjectCode, ProgramOptions


def _as_if_old(obj, new_path: str, old_path: str) -> bytes:
    data = pickle.dumps(obj, protocol=0)  # GLOBAL opcodes spell the module path as text
    assert new_path.encode() in data
    return data.replace(new_path.encode(), old_path.encode())


@pytest.mark.parametrize(
    ("obj", "new_path", "old_path"),
    [
        (
            ProgramOptions(arch="sm_90", std="c++17"),
            "cuda_core._compile._options",
            "cuda_core._program_options",
        ),
        (LinkerOptions(arch="sm_90"), "cuda_core._compile._linker_options", "cuda_core._linker"),
        (  # the path of 1.3.0 before LinkerOptions got its own module
            LinkerOptions(arch="sm_90"),
            "cuda_core._compile._linker_options",
            "cuda_core._compile._linker",
        ),
        (
            GraphCompleteOptions(auto_free_on_launch=True),
            "cuda_core.graph._options",
            "cuda_core._graph_options",
        ),
    ],
)
def test_old_module_paths_unpickle(obj, new_path, old_path):
    back = pickle.loads(_as_if_old(obj, new_path, old_path))
    assert type(back) is type(obj)
    assert back == obj


def test_object_code_pickled_under_the_old_path():
    code = ObjectCode.from_ptx(".version 8.0\n.target sm_90\n.address_size 64\n", name="empty")
    back = pickle.loads(_as_if_old(code, "cuda_core._compile._object_code", "cuda_core._module"))
    assert isinstance(back, ObjectCode)
    assert back.code == code.code and back.code_type == "ptx" and back.name == "empty"


def test_old_paths_are_the_new_modules():
    import sys

    assert sys.modules["cuda_core._program_options"] is cuda_core._compile._options
