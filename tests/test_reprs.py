"""The repr of the main objects, in the format cuda.core 1.2 gives them (code and logs written
for it may parse them): ``<Kind handle=0x... detail=...>``."""

from __future__ import annotations

import re

import pytest

from cuda_core import Program, ProgramOptions


def _matches(pattern: str, obj: object) -> None:
    assert re.fullmatch(pattern, repr(obj)), repr(obj)


def test_program_and_object_code():
    src = 'extern "C" __global__ void k() {}'
    p = Program(src, "c++", ProgramOptions(arch="sm_90"))
    _matches(r"<Program backend='NVRTC'>", p)
    for fmt in ("cubin", "ptx", "ltoir"):
        opts = ProgramOptions(arch="sm_90", link_time_optimization=fmt == "ltoir")
        _matches(
            rf"<ObjectCode handle=0x[0-9a-f]+ code_type='{fmt}'>",
            Program(src, "c++", opts).compile(fmt),
        )
    ptx = Program(src, "c++", ProgramOptions(arch="sm_90")).compile("ptx").code
    _matches(
        r"<Program backend='(nvJitLink|driver)'>",
        Program(ptx.decode() if isinstance(ptx, bytes) else ptx, "ptx"),
    )
    p.close()
    assert repr(p) == "<Program backend='NVRTC' closed>"


@pytest.mark.gpu
def test_stream_context_graph_definition_and_condition(dev):
    import cuda_core.graph as G

    s = dev.create_stream()
    _matches(r"<Stream handle=0x[0-9a-f]+ context=0x[0-9a-f]+>", s)
    _matches(rf"<Context handle=0x[0-9a-f]+ device={dev.device_id}>", dev.context)
    g = G.GraphDefinition()
    _matches(r"<GraphDefinition handle=0x[0-9a-f]+>", g)
    _matches(r"<GraphCondition handle=0x[0-9a-f]+>", g.create_condition(default_value=1))
    s.close()
    _matches(r"<Stream handle=0x[0-9a-f]+ closed>", s)
