"""CPU tier: every upward link is set once ``cuda_core`` is imported, to what defines it."""

from __future__ import annotations

import subprocess
import sys

import cuda_core
from cuda_core import _links
from cuda_core._memory._buffer import Buffer
from cuda_core._memory._device_resource import default_memory_resource
from cuda_core._memory._ipc import export_buffer, export_pool, import_buffer, reduce_buffer
from cuda_core._memory._managed import prefetch
from cuda_core._memory._resource import MemoryResource
from cuda_core.graph._builder import GraphBuilder


def test_links_are_the_defining_modules_objects():
    assert _links.Device is cuda_core.Device
    assert _links.Stream is cuda_core.Stream
    assert _links.as_stream is cuda_core._stream.as_stream
    assert _links.default_memory_resource is default_memory_resource
    assert _links.MemoryResource is MemoryResource and _links.Buffer is Buffer
    assert (_links.ipc.reduce_buffer, _links.ipc.export_buffer) == (reduce_buffer, export_buffer)
    assert (_links.ipc.import_buffer, _links.ipc.export_pool) == (import_buffer, export_pool)
    assert _links.prefetch is prefetch
    assert _links.GraphBuilder is GraphBuilder and callable(_links.graph_builder)
    assert sorted(vars(_links.textures)) == [
        "create_mipmapped_array",
        "create_opaque_array",
        "create_surface_object",
        "create_texture_object",
    ]
    assert callable(_links.system_device)


def test_importing_any_module_first_sets_every_link():
    # A user may import a submodule first; Python runs cuda_core/__init__ before it, so the
    # links are set whatever is imported first.
    code = (
        "import cuda_core.texture._surface, cuda_core._links as L\n"
        "assert L.Device is not None and L.Stream is not None and L.Buffer is not None\n"
        "assert L.GraphBuilder is not None and hasattr(L, 'system_device')\n"
        "assert hasattr(L.textures, 'create_texture_object') and hasattr(L.ipc, 'export_pool')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
