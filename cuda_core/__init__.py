"""cuda_core: a Pythonic CUDA toolkit on NVIDIA's cuda-bindings.

Compile CUDA C++ at run time, allocate memory and launch kernels on streams, without raw
driver handles::

    from cuda_core import Device, LaunchConfig, Program, ProgramOptions, launch

    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    prog = Program(code, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
    ker = prog.compile("cubin", name_expressions=("add<float>",)).get_kernel("add<float>")
    launch(s, LaunchConfig(grid=4, block=256), ker, a.data.ptr, b.data.ptr, n)

Each public name lives in one private module (``_device``, ``_stream``, ...) and is
re-exported here; ``__all__`` is the public surface.
"""

from __future__ import annotations

import sys as _sys

from . import (
    _context,
    _device,
    _device_resources,
    _errors,
    _event,
    _kernel,
    _kernel_arg_handler,
    _launch_config,
    _launcher,
    _memory,
    _stream,
    _tensor_map,
)
from . import _host_callbacks as _callbacks
from . import _mp_reduction as _mp_reduction  # registers the multiprocessing reducers (IPC)
from . import graph as graph  # registers the explicit-graph API with GraphBuilder and Graph
from . import system as system
from . import texture as texture
from . import utils as utils
from ._compile import _linker, _program
from ._compile import _object_code as _module
from ._compile import _options as _program_options
from ._compile._linker import *
from ._compile._object_code import *
from ._compile._options import *
from ._compile._program import *
from ._context import *
from ._device import *
from ._device_resources import *
from ._errors import *
from ._event import *
from ._host_callbacks import *
from ._interop import _graphics, _memoryview
from ._interop._graphics import *
from ._interop._memoryview import *
from ._kernel import *
from ._kernel_arg_handler import *
from ._launch_config import *
from ._launcher import *
from ._memory import *
from ._report import _environment as _config
from ._report._environment import *
from ._stream import *
from ._tensor_map import *
from ._version import __version__ as __version__
from .graph import _builder as _graph
from .graph import _options as _graph_options
from .graph._builder import *
from .graph._options import *

__all__ = sorted(
    {
        *_callbacks.__all__,
        *_config.__all__,
        *_context.__all__,
        *_device.__all__,
        *_device_resources.__all__,
        *_errors.__all__,
        *_event.__all__,
        *_graph.__all__,
        *_graph_options.__all__,
        *_graphics.__all__,
        *_kernel.__all__,
        *_kernel_arg_handler.__all__,
        *_launch_config.__all__,
        *_launcher.__all__,
        *_linker.__all__,
        *_memory.__all__,
        *_memoryview.__all__,
        *_module.__all__,
        *_program.__all__,
        *_program_options.__all__,
        *_stream.__all__,
        *_tensor_map.__all__,
    }
)

# Pickles made before the wings became subpackages name these module paths (options dataclasses,
# ObjectCode's rebuild function): they keep loading.
for _old_path, _moved in (
    ("cuda_core._graph_options", graph._options),
    ("cuda_core._linker", _linker),
    ("cuda_core._module", _module),
    ("cuda_core._program_options", _program_options),
):
    _sys.modules.setdefault(_old_path, _moved)
del _old_path, _moved
