"""GraphicsResource: an OpenGL buffer or image registered for CUDA access (graphics interop).

``cuGraphicsGLRegisterBuffer`` / ``cuGraphicsGLRegisterImage`` register the GL object once;
:meth:`GraphicsResource.map` maps it on a stream (``cuGraphicsMapResources``) and returns a
:class:`~cuda_core.Buffer` over the mapped pointer whose close unmaps it
(``cuGraphicsUnmapResources``), stream-ordered; :meth:`GraphicsResource.close` (or collection)
unmaps if needed and unregisters once (``cuGraphicsUnregisterResource``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._compat import driver
from .._handles._driver import ensure_driver
from .._handles._owned import OwnedHandle
from .._memory import Buffer
from .._stream import Stream, as_stream
from .._utils import arg_error, handle_return, note_failed_rollback

__all__ = ["GraphicsResource"]

_FLAGS = driver.CUgraphicsRegisterFlags
_REGISTER_FLAGS = {
    "none": int(_FLAGS.CU_GRAPHICS_REGISTER_FLAGS_NONE),
    "read_only": int(_FLAGS.CU_GRAPHICS_REGISTER_FLAGS_READ_ONLY),
    "write_discard": int(_FLAGS.CU_GRAPHICS_REGISTER_FLAGS_WRITE_DISCARD),
    "surface_load_store": int(_FLAGS.CU_GRAPHICS_REGISTER_FLAGS_SURFACE_LDST),
    "texture_gather": int(_FLAGS.CU_GRAPHICS_REGISTER_FLAGS_TEXTURE_GATHER),
}


def _parse_register_flags(flags: str | Sequence[str] | None) -> int:
    """The ``CU_GRAPHICS_REGISTER_FLAGS_*`` bits of a flag name or a sequence of them."""
    if flags is None:
        return 0
    names = (flags,) if isinstance(flags, str) else flags
    if not isinstance(names, Sequence):
        raise arg_error(
            "flags", "None, a flag name or a sequence of flag names", flags, exc=TypeError
        )
    bits = 0
    for name in names:
        try:
            bits |= _REGISTER_FLAGS[name]
        except (KeyError, TypeError):
            raise arg_error(
                "flags",
                f"made of {', '.join(sorted(_REGISTER_FLAGS))}",
                name,
                lead=f"Unknown register flag {name!r}",
            ) from None
    return bits


def _gl_name(name: str, value: Any) -> int:
    """A GL object name or enum (``GLuint``/``GLenum``): an int in [0, 2**32)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise arg_error(name, "an int (an OpenGL name)", value, exc=TypeError)
    v = value.__index__()
    if not 0 <= v < 2**32:
        raise arg_error(name, "in [0, 2**32) (a GLuint)", value, exc=OverflowError)
    return int(v)


def _unregister(address: int) -> Any:
    return driver.cuGraphicsUnregisterResource(driver.CUgraphicsResource(address))


class _Unmap:
    """The release function of a mapped buffer: unmaps the resource on the given stream."""

    __slots__ = ("reg",)

    def __init__(self, reg: OwnedHandle) -> None:
        self.reg = reg

    def __call__(self, ptr: int, size: int, stream: Any) -> None:
        address = self.reg.value
        if address is None:
            return  # unregistered already: that unmapped it
        h = driver.CUstream(0) if stream is None else stream.handle
        res = driver.CUgraphicsResource(address)
        handle_return(driver.cuGraphicsUnmapResources(1, res, h), "cuGraphicsUnmapResources")


class GraphicsResource:
    """An OpenGL buffer or image registered for CUDA access (``CUgraphicsResource``).

    Made by :meth:`from_gl_buffer` or :meth:`from_gl_image` (with the GL context current on
    the calling thread); not constructed directly. :meth:`map` returns a
    :class:`~cuda_core.Buffer` over the GL memory whose close (or ``with`` exit) unmaps it;
    :meth:`close` unmaps if needed and unregisters. Also unregistered when collected.

    Examples
    --------
    >>> with GraphicsResource.from_gl_buffer(vbo) as resource:   # doctest: +SKIP
    ...     with resource.map(stream=s) as buf:
    ...         launch(s, config, kernel, buf, n)
    """

    __slots__ = ("__weakref__", "_buf", "_cm_stream", "_entered", "_int", "_reg")

    _reg: OwnedHandle  # the CUgraphicsResource address: unregistered once (close or collection)
    _int: int
    _buf: Buffer | None
    _cm_stream: Stream | None
    _entered: Buffer | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "GraphicsResource objects cannot be instantiated directly. Use GraphicsResource.from_gl_buffer() "
            "or GraphicsResource.from_gl_image()"
        )

    @classmethod
    def _wrap(cls, raw: Any, stream: Stream | None) -> GraphicsResource:
        self = object.__new__(cls)
        self._int = int(raw)
        self._reg = OwnedHandle("graphics resource", self._int, _unregister)
        self._buf = None
        self._cm_stream = stream
        self._entered = None
        return self

    @classmethod
    def from_gl_buffer(
        cls,
        gl_buffer: int,
        *,
        flags: str | tuple[str, ...] | list[str] | None = None,
        stream: Stream | None = None,
    ) -> GraphicsResource:
        """Register the OpenGL buffer object ``gl_buffer`` (a ``GLuint``) for CUDA access.

        Parameters
        ----------
        gl_buffer : int
            The GL buffer name.
        flags : str or sequence of str, optional
            ``"none"``, ``"read_only"``, ``"write_discard"``, ``"surface_load_store"``,
            ``"texture_gather"``, or several of them.
        stream : Stream, optional
            With it, ``with GraphicsResource.from_gl_buffer(vbo, stream=s) as buf:`` maps on
            entry and yields the mapped :class:`~cuda_core.Buffer`; without it, ``with``
            yields the resource. Either way the resource is closed on exit.

        Raises
        ------
        CUDAError
            Registration failed (no current GL context, a bad buffer name).
        ValueError
            An unknown flag.
        """
        name = _gl_name("gl_buffer", gl_buffer)
        bits = _parse_register_flags(flags)
        s = None if stream is None else as_stream(stream)
        ensure_driver()
        raw = handle_return(
            driver.cuGraphicsGLRegisterBuffer(name, bits), "cuGraphicsGLRegisterBuffer"
        )
        return cls._wrap(raw, s)

    @classmethod
    def from_gl_image(
        cls,
        image: int,
        target: int,
        *,
        flags: str | tuple[str, ...] | list[str] | None = None,
    ) -> GraphicsResource:
        """Register an OpenGL texture or renderbuffer ``image`` of type ``target``
        (e.g. ``GL_TEXTURE_2D``, ``GL_RENDERBUFFER``) for CUDA access.

        Raises
        ------
        CUDAError
            Registration failed.
        ValueError
            An unknown flag.
        """
        name = _gl_name("image", image)
        tgt = _gl_name("target", target)
        bits = _parse_register_flags(flags)
        ensure_driver()
        raw = handle_return(
            driver.cuGraphicsGLRegisterImage(name, tgt, bits), "cuGraphicsGLRegisterImage"
        )
        return cls._wrap(raw, None)

    # -- mapping ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._reg.is_released:
            raise RuntimeError("GraphicsResource has been closed")

    def _get_mapped_buffer(self) -> Buffer | None:
        buf = self._buf
        if buf is not None and buf.is_closed:
            buf = self._buf = None
        return buf

    def map(self, *, stream: Stream) -> Buffer:
        """Map the resource on ``stream`` and return a :class:`~cuda_core.Buffer` over it.

        Closing the buffer (or leaving ``with resource.map(stream=s) as buf:``) unmaps the
        resource, ordered on the mapping stream (or the stream given to ``close``).

        Raises
        ------
        RuntimeError
            The resource is mapped already, or closed.
        CUDAError
            Mapping failed (an image has no pointer: ``CUDA_ERROR_NOT_MAPPED_AS_POINTER``).
        """
        self._check_open()
        if self._get_mapped_buffer() is not None:
            raise RuntimeError("GraphicsResource is already mapped; unmap it first")
        s = as_stream(stream)
        res = driver.CUgraphicsResource(self._int)
        handle_return(driver.cuGraphicsMapResources(1, res, s.handle), "cuGraphicsMapResources")
        try:
            ptr, size = handle_return(
                driver.cuGraphicsResourceGetMappedPointer(res), "cuGraphicsResourceGetMappedPointer"
            )
        except BaseException as exc:
            result = driver.cuGraphicsUnmapResources(1, res, s.handle)
            note_failed_rollback(exc, result, "cuGraphicsUnmapResources")
            raise
        buf = self._buf = Buffer._owned(int(ptr), int(size), None, s, _Unmap(self._reg))  # type: ignore[arg-type]
        return buf

    def get_mapped_array(self, array_index: int = 0, mip_level: int = 0) -> driver.CUarray:
        """The ``CUarray`` of a mapped image (``cuGraphicsSubResourceGetMappedArray``); valid
        until the resource is unmapped. An extension of cuda_core.

        Raises
        ------
        RuntimeError
            The resource is not mapped, or closed.
        """
        self._check_open()
        if self._get_mapped_buffer() is None:
            raise RuntimeError("GraphicsResource is not mapped")
        return handle_return(  # type: ignore[no-any-return]
            driver.cuGraphicsSubResourceGetMappedArray(
                driver.CUgraphicsResource(self._int), array_index, mip_level
            ),
            "cuGraphicsSubResourceGetMappedArray",
        )

    def unmap(self, *, stream: Stream | None = None) -> None:
        """Unmap the resource: closes the buffer :meth:`map` returned, ordered on ``stream``
        (default: the mapping stream). The buffer must not be used afterwards.

        Raises
        ------
        RuntimeError
            The resource is not mapped, or closed.
        """
        self._check_open()
        buf = self._get_mapped_buffer()
        if buf is None:
            raise RuntimeError("GraphicsResource is not mapped")
        self._buf = None
        buf.close(stream=stream)

    def close(self, stream: Stream | None = None) -> None:
        """Unmap (on ``stream``, default the mapping stream) if mapped, then unregister; idempotent."""
        if self._reg.is_released:
            return
        buf = self._get_mapped_buffer()
        if buf is not None:
            self._buf = None
            buf.close(stream=stream)
        self._cm_stream = None
        self._entered = None
        address = self._reg.take()
        if address is not None:
            handle_return(_unregister(address), "cuGraphicsUnregisterResource")

    def __enter__(self) -> Any:
        if self._cm_stream is None:
            return self
        self._entered = self.map(stream=self._cm_stream)
        return self._entered

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- facts --------------------------------------------------------------------------------

    @property
    def is_mapped(self) -> bool:
        """Whether the resource is mapped (its mapped buffer is open)."""
        return self._get_mapped_buffer() is not None

    @property
    def handle(self) -> int:
        """The ``CUgraphicsResource`` address (``0`` once closed)."""
        return self._reg.value or 0

    @property
    def resource_handle(self) -> int:
        """Alias of :attr:`handle`."""
        return self.handle

    @property
    def is_closed(self) -> bool:
        """Whether the resource was unregistered."""
        return self._reg.is_released

    def __repr__(self) -> str:
        state = (" mapped" if self.is_mapped else "") + (" closed" if self.is_closed else "")
        return f"<GraphicsResource handle=0x{self.handle:x}{state}>"
