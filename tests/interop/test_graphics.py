"""GraphicsResource: argument checking (CPU tier) and OpenGL buffer interop through a headless
EGL context (GPU tier): a GL buffer is registered, mapped, written by a CUDA kernel, unmapped
and read back with ``glGetBufferSubData``."""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import pytest

from cuda_core import GraphicsResource
from cuda_core._interop._graphics import _parse_register_flags

# -- CPU tier ---------------------------------------------------------------------------------


def test_not_constructible():
    with pytest.raises(RuntimeError, match="from_gl_buffer"):
        GraphicsResource()


def test_register_flags():
    assert _parse_register_flags(None) == 0
    assert _parse_register_flags("none") == 0
    assert _parse_register_flags("read_only") == 1
    assert _parse_register_flags(("read_only", "surface_load_store")) == 5
    assert _parse_register_flags(["write_discard", "texture_gather"]) == 10
    with pytest.raises(ValueError, match="flags must be made of"):
        _parse_register_flags("readonly")
    with pytest.raises(ValueError, match="flags must be made of"):
        _parse_register_flags(["read_only", 3])


@pytest.mark.parametrize("bad, exc", [("1", TypeError), (1.0, TypeError), (None, TypeError), (-1, OverflowError),
                                      (2**32, OverflowError)])  # fmt: skip
def test_gl_names_checked_before_the_driver(bad, exc):
    with pytest.raises(exc, match="gl_buffer must be"):
        GraphicsResource.from_gl_buffer(bad)
    with pytest.raises(exc, match="image must be"):
        GraphicsResource.from_gl_image(bad, 0x0DE1)
    with pytest.raises(ValueError, match="flags must be"):
        GraphicsResource.from_gl_buffer(1, flags="bogus")
    with pytest.raises(TypeError, match="stream must be"):
        GraphicsResource.from_gl_buffer(1, stream=object())


# -- GPU tier: a headless OpenGL context through EGL --------------------------------------------

EGL_DEFAULT_DISPLAY = 0
EGL_NONE = 0x3038
EGL_SURFACE_TYPE, EGL_PBUFFER_BIT = 0x3033, 0x0001
EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT = 0x3040, 0x0008
EGL_WIDTH, EGL_HEIGHT = 0x3057, 0x3056
EGL_OPENGL_API = 0x30A2
EGL_PLATFORM_DEVICE_EXT = 0x313F
GL_ARRAY_BUFFER, GL_DYNAMIC_DRAW = 0x8892, 0x88E8


def _load(names):
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


class _EGLContext:
    """A pbuffer-backed OpenGL context on EGL (device platform first, then the default display)."""

    def __init__(self):
        egl = _load(["libEGL.so.1", "libEGL.so"])
        if egl is None:
            pytest.skip("no EGL library (libEGL.so.1) on this machine")
        gl = _load(["libOpenGL.so.0", "libGL.so.1"])
        if gl is None:
            pytest.skip("no OpenGL library (libOpenGL.so.0 or libGL.so.1) on this machine")
        self.egl, self.gl = egl, gl
        egl.eglGetProcAddress.restype = ctypes.c_void_p
        egl.eglGetProcAddress.argtypes = [ctypes.c_char_p]
        egl.eglGetDisplay.restype = ctypes.c_void_p
        egl.eglGetDisplay.argtypes = [ctypes.c_void_p]
        egl.eglInitialize.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        egl.eglChooseConfig.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                        ctypes.POINTER(ctypes.c_int)]  # fmt: skip
        egl.eglCreatePbufferSurface.restype = ctypes.c_void_p
        egl.eglCreatePbufferSurface.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        egl.eglCreateContext.restype = ctypes.c_void_p
        egl.eglCreateContext.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        egl.eglMakeCurrent.argtypes = [ctypes.c_void_p] * 4
        egl.eglDestroyContext.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        egl.eglDestroySurface.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        egl.eglTerminate.argtypes = [ctypes.c_void_p]
        self.display = self._display()
        if not self.display or not egl.eglInitialize(self.display, None, None):
            pytest.skip("no EGL display could be initialised (no GPU-backed EGL driver)")
        attrs = (ctypes.c_int * 5)(
            EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_NONE
        )
        config = ctypes.c_void_p()
        n = ctypes.c_int()
        if (
            not egl.eglChooseConfig(self.display, attrs, ctypes.byref(config), 1, ctypes.byref(n))
            or n.value < 1
        ):
            pytest.skip("EGL has no config for an OpenGL pbuffer")
        pb = (ctypes.c_int * 5)(EGL_WIDTH, 16, EGL_HEIGHT, 16, EGL_NONE)
        self.surface = egl.eglCreatePbufferSurface(self.display, config, pb)
        if not egl.eglBindAPI(EGL_OPENGL_API):
            pytest.skip("EGL cannot bind the OpenGL API")
        self.context = egl.eglCreateContext(self.display, config, None, None)
        if not self.context or not egl.eglMakeCurrent(
            self.display, self.surface, self.surface, self.context
        ):
            pytest.skip("no OpenGL context could be made current through EGL")

    def _display(self):
        egl = self.egl
        query = egl.eglGetProcAddress(b"eglQueryDevicesEXT")
        get_platform = egl.eglGetProcAddress(b"eglGetPlatformDisplayEXT")
        if query and get_platform:
            q = ctypes.CFUNCTYPE(ctypes.c_uint, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_int))(query)  # fmt: skip
            p = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(
                get_platform
            )
            devices = (ctypes.c_void_p * 8)()
            n = ctypes.c_int()
            if q(8, devices, ctypes.byref(n)) and n.value:
                for i in range(n.value):
                    display = p(EGL_PLATFORM_DEVICE_EXT, devices[i], None)
                    if display:
                        return display
        return egl.eglGetDisplay(EGL_DEFAULT_DISPLAY)

    def close(self):
        egl = self.egl
        egl.eglMakeCurrent(self.display, None, None, None)
        egl.eglDestroyContext(self.display, self.context)
        egl.eglDestroySurface(self.display, self.surface)
        egl.eglTerminate(self.display)


@pytest.fixture
def gl_context():
    ctx = _EGLContext()
    yield ctx
    ctx.close()


FILL_SRC = r"""
extern "C" __global__ void fill(unsigned int* out, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i * 3u + 7u;
}
"""


@pytest.mark.gpu
def test_gl_buffer_written_by_a_kernel(dev, gl_context):
    from cuda_core import LaunchConfig, Program, ProgramOptions, launch

    gl = gl_context.gl
    gl.glGenBuffers.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint)]
    gl.glBindBuffer.argtypes = [ctypes.c_uint, ctypes.c_uint]
    gl.glBufferData.argtypes = [ctypes.c_uint, ctypes.c_ssize_t, ctypes.c_void_p, ctypes.c_uint]
    gl.glGetBufferSubData.argtypes = [
        ctypes.c_uint,
        ctypes.c_ssize_t,
        ctypes.c_ssize_t,
        ctypes.c_void_p,
    ]
    gl.glDeleteBuffers.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint)]
    n = 4096
    vbo = ctypes.c_uint()
    gl.glGenBuffers(1, ctypes.byref(vbo))
    gl.glBindBuffer(GL_ARRAY_BUFFER, vbo.value)
    gl.glBufferData(GL_ARRAY_BUFFER, 4 * n, None, GL_DYNAMIC_DRAW)
    gl.glFinish()
    kernel = Program(FILL_SRC, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin").get_kernel("fill")  # fmt: skip
    s = dev.create_stream()
    resource = GraphicsResource.from_gl_buffer(vbo.value, flags="write_discard")
    try:
        assert not resource.is_mapped and resource.handle
        with resource.map(stream=s) as buf:
            assert resource.is_mapped and buf.size >= 4 * n
            with pytest.raises(RuntimeError, match=r"^GraphicsResource is already mapped"):
                resource.map(stream=s)
            launch(s, LaunchConfig(grid=(n + 255) // 256, block=256), kernel, buf, np.uint32(n))
        assert buf.is_closed and not resource.is_mapped
        s.sync()
        with pytest.raises(RuntimeError, match="not mapped"):
            resource.unmap()
        out = np.zeros(n, dtype=np.uint32)
        gl.glBindBuffer(GL_ARRAY_BUFFER, vbo.value)
        gl.glGetBufferSubData(GL_ARRAY_BUFFER, 0, 4 * n, out.ctypes.data)
        np.testing.assert_array_equal(out, np.arange(n, dtype=np.uint32) * 3 + 7)
        buf2 = resource.map(stream=s)  # mapped again, then closed while mapped: unmapped first
        resource.close()
        assert buf2.is_closed and resource.is_closed and resource.handle == 0
        resource.close()  # idempotent
        with pytest.raises(RuntimeError, match="closed"):
            resource.map(stream=s)
    finally:
        resource.close()
        gl.glDeleteBuffers(1, ctypes.byref(vbo))
        s.close()


@pytest.mark.gpu
def test_gl_buffer_context_manager_maps_on_entry(dev, gl_context):
    gl = gl_context.gl
    gl.glGenBuffers.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint)]
    gl.glBindBuffer.argtypes = [ctypes.c_uint, ctypes.c_uint]
    gl.glBufferData.argtypes = [ctypes.c_uint, ctypes.c_ssize_t, ctypes.c_void_p, ctypes.c_uint]
    vbo = ctypes.c_uint()
    gl.glGenBuffers(1, ctypes.byref(vbo))
    gl.glBindBuffer(GL_ARRAY_BUFFER, vbo.value)
    gl.glBufferData(GL_ARRAY_BUFFER, 1024, None, GL_DYNAMIC_DRAW)
    s = dev.create_stream()
    res = GraphicsResource.from_gl_buffer(vbo.value, stream=s)
    with res as buf:
        assert buf.size >= 1024 and res.is_mapped
    assert res.is_closed and buf.is_closed
    s.sync()
    s.close()
