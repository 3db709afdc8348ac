"""StridedMemoryView: one description of a strided array from any producer.

A view is built from DLPack (``__dlpack__``), the CUDA Array Interface (v3), the NumPy array
interface, or a :class:`~cuda_core.Buffer` plus a shape. It records the pointer, shape, strides
(in elements), dtype and device, keeps the producer alive, and exports itself through DLPack.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy

from .._handles._backend import backend
from .._utils import BufferAttributeError, arg_error
from . import _array_interface as _ai
from . import _dlpack as _dl
from . import _fast_arrays as _bridge
from . import _view_ops as _ops
from ._view_fields import _FIELDS, buffer_view
from ._view_fields import _stream_ptr as _stream_ptr
from ._view_fields import _view_of as _view_of

# cuda.core 1.2 has both names in cuda.core.utils only (see _UTILS_EXPORTS); later releases also
# export StridedMemoryView from the top level, as this does.
__all__ = ["StridedMemoryView"]

_UTILS_EXPORTS = ["StridedMemoryView"]  # with args_viewable_as_strided_memory (_view_args)

# producer type -> kind (_bridge.KIND_*): DLPack, torch, cupy
_kinds: dict[type, int] = {}
_KIND_DLPACK = _bridge.KIND_DLPACK
_KIND_TORCH = _bridge.KIND_TORCH
_cupy_view = _bridge.cupy_view
# The backend's readers (see cuda_core/_handles/_protocol.py): views are instances of its ViewInfo.
_ViewBase: Any = backend.ViewInfo
_new_view = _ViewBase.__new__
_dlpack_view = backend.dlpack_view
_torch_view = backend.torch_view
_torch_fields = _bridge.torch_fields
_DTYPE_BY_WORD = _dl.DTYPE_BY_WORD
_NotImplemented: Any = NotImplemented


class StridedMemoryView(_ViewBase):
    """A description of a strided, dense array or tensor living on the host or a device.

    Build one with :meth:`from_dlpack`, :meth:`from_cuda_array_interface`,
    :meth:`from_array_interface`, :meth:`from_any_interface`, :meth:`from_buffer`, the
    :func:`args_viewable_as_strided_memory` decorator, or ``StridedMemoryView(obj, stream_ptr)``
    (DLPack first, then the CUDA Array Interface; deprecated, as in ``cuda.core`` 1.2, with a
    ``DeprecationWarning``: use :meth:`from_dlpack` or :meth:`from_any_interface`).

    **Stream semantics.** ``stream_ptr`` is the address of the *consumer* stream, the stream on
    which the caller will use the memory. For DLPack it is passed to ``obj.__dlpack__(stream=...)``
    and the producer orders its pending work before that stream. For the CUDA Array Interface,
    when the producer names a stream other than the consumer's, an event is recorded on the
    producer stream and the consumer stream waits for it on the device (no host
    synchronisation). ``stream_ptr=-1`` opts out of any ordering; ``None`` is refused for device
    memory (it would be ambiguous) and ignored for host memory. The address may be given as an
    ``int``, a ``CUstream`` (``stream.handle``), a NumPy integer or a :class:`Stream`: anything
    ``int()`` reads, as ``cuda.core`` takes it; other objects are a ``TypeError``.

    **Ownership.** The view keeps the producer (:attr:`exporting_obj`, and for DLPack the
    capsule) alive for as long as it lives; it owns nothing itself.

    Attributes
    ----------
    ptr : int
        Address of the first element.
    shape : tuple of int
        The extents.
    strides : tuple of int or None
        Strides in elements (not bytes), as the producer gave them (as in ``cuda.core`` 1.2):
        a DLPack producer's strides array, a CUDA/NumPy array interface's byte strides divided
        by the item size, a :meth:`from_buffer` or :meth:`view` layout's strides. ``None`` only
        when the producer gave none (NumPy's ``__array_interface__`` and the CUDA Array Interface
        leave them out for C-contiguous arrays; DLPack producers such as NumPy, CuPy and PyTorch
        usually give them), so test contiguity from ``shape`` and ``strides``, not ``is None``.
    device_id : int
        The device ordinal, or ``-1`` for host memory.
    is_device_accessible : bool
        Whether a kernel can address the memory.
    readonly : bool
        Whether the producer marked the memory read-only.
    exporting_obj : object
        The producer.
    """

    # Every field is the backend's ViewInfo's (see cuda_core/_handles/_protocol.py); strides included.
    __slots__ = ()

    def __init__(self, obj: object = None, stream_ptr: int | None = None) -> None:
        if obj is None:
            # cuda.core 1.2 makes an empty view, deprecated: no memory, no layout (reading
            # shape, strides or size raises), device_id 0, dtype None.
            warnings.warn(
                "Constructing an empty StridedMemoryView is deprecated; use StridedMemoryView.from_dlpack(), "
                "from_cuda_array_interface(), from_array_interface(), from_any_interface() or from_buffer()",
                DeprecationWarning,
                stacklevel=2,
            )
            empty = {
                "ptr": 0,
                "device_id": 0,
                "is_device_accessible": False,
                "readonly": False,
                "exporting_obj": None,
                "_dtype": None,
                "_capsule": None,
                "_dl_device_type": _dl.kDLCPU,
            }
            for name, value in empty.items():
                setattr(self, name, value)
            return
        if type(stream_ptr) is not int:
            stream_ptr = _stream_ptr(stream_ptr)
        if hasattr(obj, "__dlpack__"):
            _warn_direct("a DLPack-supporting object", "from_dlpack")
            src = _from_dlpack(obj, stream_ptr)
        elif hasattr(obj, "__cuda_array_interface__"):
            _warn_direct("a CUDA-array-interface-supporting object", "from_cuda_array_interface")
            src = _from_cai(obj, stream_ptr)
        else:
            raise BufferError(
                f"{type(obj).__name__} supports neither DLPack nor the CUDA Array Interface"
            )
        for name in _FIELDS:
            setattr(self, name, getattr(src, name))

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_dlpack(cls, obj: Any, stream_ptr: int | None = None) -> StridedMemoryView:
        """View an object through DLPack (``__dlpack__`` / ``__dlpack_device__``).

        Parameters
        ----------
        obj : object
            A DLPack producer (NumPy, CuPy, PyTorch, JAX, ... arrays).
        stream_ptr : int, optional
            The consumer stream's address, passed to ``obj.__dlpack__(stream=...)``; ``-1``
            opts out of stream ordering. Required for CUDA device memory, ignored for host memory.

        Returns
        -------
        StridedMemoryView

        Raises
        ------
        BufferError
            The producer cannot export, ``stream_ptr`` is ``None`` for device memory, or the
            dtype or device type is unsupported. For an object without ``__dlpack__`` or
            ``__dlpack_device__`` it is also an ``AttributeError`` (``cuda.core``'s class).
        """
        # The hot path: one backend call (exact torch.Tensor / cupy.ndarray producers are read
        # directly, see _fast_arrays).
        if type(stream_ptr) is not int:
            stream_ptr = _stream_ptr(stream_ptr)
        tp = obj.__class__
        kind = _kinds.get(tp)
        if kind is None:
            if not (hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__")):
                missing = "__dlpack__" if hasattr(obj, "__dlpack_device__") else "__dlpack_device__"
                raise BufferAttributeError(
                    f"'{tp.__name__}' object has no attribute '{missing}': it does not support "
                    "DLPack (no __dlpack__/__dlpack_device__)"
                )
            kind = _classify(tp)
        if kind == _KIND_DLPACK:
            return _dlpack_view(cls, obj, stream_ptr)  # type: ignore[no-any-return]
        if kind == _KIND_TORCH:
            view: Any = _torch_view(cls, obj, stream_ptr)  # NotImplemented, then None: declined
            if (
                view is _NotImplemented
            ):  # the native reader declined (see _handles): read the fields
                fields = _torch_fields(obj, stream_ptr)
                view = None if fields is None else _view_of(cls, fields, obj)
            if view is not None:
                return view  # type: ignore[no-any-return]
        else:
            fields = _cupy_view(obj, stream_ptr)
            if fields is not None:
                return _view_of(cls, fields, obj)
        return _dlpack_view(cls, obj, stream_ptr)  # type: ignore[no-any-return]

    @classmethod
    def from_cuda_array_interface(
        cls, obj: object, stream_ptr: int | None = None
    ) -> StridedMemoryView:
        """View an object through the CUDA Array Interface (v3, ``__cuda_array_interface__``).

        Parameters
        ----------
        obj : object
            An object with ``__cuda_array_interface__``.
        stream_ptr : int
            The consumer stream's address. When the interface names another producer stream,
            the consumer stream waits on an event recorded on it (device-side ordering);
            ``-1`` opts out.

        Returns
        -------
        StridedMemoryView

        Raises
        ------
        BufferError
            ``stream_ptr`` is ``None``, or the interface is malformed or masked.
        TypeError
            ``stream_ptr`` is not a stream address.
        """
        return _from_cai(obj, stream_ptr)

    @classmethod
    def from_array_interface(cls, obj: object) -> StridedMemoryView:
        """View host memory through the NumPy array interface (``__array_interface__``).

        Parameters
        ----------
        obj : object
            An object with ``__array_interface__`` (a NumPy array, ...).

        Returns
        -------
        StridedMemoryView
            A host view (``is_device_accessible`` False). Its ``device_id`` is the current
            context's device, as ``cuda.core`` gives it, or -1 where no context is current
            (``cuda.core`` raises there).

        Raises
        ------
        BufferError
            The interface is malformed or masked.
        """
        return _ai.array_interface_view(cls, obj)  # type: ignore[no-any-return]  # replaced below

    @classmethod
    def from_any_interface(cls, obj: object, stream_ptr: int | None = None) -> StridedMemoryView:
        """View an object through the best protocol it offers: DLPack, then CUDA Array Interface,
        then the NumPy array interface.

        Parameters
        ----------
        obj : object
            The producer.
        stream_ptr : int, optional
            The consumer stream's address (see the class description); ``-1`` opts out.

        Returns
        -------
        StridedMemoryView

        Raises
        ------
        BufferError
            The object supports none of the protocols.
        """
        if type(stream_ptr) is not int:
            stream_ptr = _stream_ptr(stream_ptr)
        if hasattr(obj, "__dlpack__"):
            return _from_dlpack(obj, stream_ptr)
        if hasattr(obj, "__cuda_array_interface__"):
            return _from_cai(obj, stream_ptr)
        if hasattr(obj, "__array_interface__"):
            return cls.from_array_interface(obj)
        raise BufferError(
            "the input object does not support any data exchange protocol: "
            f"{type(obj).__name__} supports no array protocol (DLPack, CUDA or NumPy array "
            "interface)"
        )

    @classmethod
    def from_buffer(
        cls,
        buffer: Any,
        shape: tuple[int, ...],
        strides: tuple[int, ...] | None = None,
        *,
        itemsize: int | None = None,
        dtype: Any = None,
        is_readonly: bool = False,
    ) -> StridedMemoryView:
        """View a :class:`~cuda_core.Buffer` as an array with ``shape`` (and ``strides``).

        No stream ordering is done: make sure the buffer's data is ready where the view is used.

        Parameters
        ----------
        buffer : Buffer
            The memory (allocated by a memory resource, or wrapped with ``Buffer.from_handle``);
            the view keeps it alive as :attr:`exporting_obj`.
        shape : tuple of int
            The extents.
        strides : tuple of int, optional
            Strides in elements; ``None`` for C-contiguous.
        itemsize : int, optional
            The element size in bytes, for a view without a dtype (:attr:`dtype` is then
            ``None`` and the view cannot be exported through DLPack).
        dtype : numpy.dtype or str, optional
            The element type; its item size must equal ``itemsize`` when both are given.
        is_readonly : bool
            Mark the view read-only.

        Returns
        -------
        StridedMemoryView

        Raises
        ------
        ValueError
            Neither ``itemsize`` nor ``dtype`` is given, they disagree, the shape/strides are
            malformed, or (for a buffer from a memory resource) they reach outside the buffer.
        """
        return buffer_view(cls, buffer, shape, strides, itemsize, dtype, is_readonly)

    # ------------------------------------------------------------------ properties

    @property
    def dtype(self) -> numpy.dtype[Any] | None:
        """The element type as a NumPy dtype (``None`` for a :meth:`from_buffer` view made with
        only an ``itemsize``)."""
        dt = self._dtype  # type: ignore[has-type]
        if dt.__class__ is int:  # the DLPack dtype word the readers store
            known = _DTYPE_BY_WORD.get(dt)
            # one with no NumPy equivalent raises BufferError
            dt = known if known is not None else _dl.dtype_from_word(dt)
            self._dtype = dt  # type: ignore[misc]
        return dt  # type: ignore[no-any-return]

    @property
    def size(self) -> int:
        """The number of elements."""
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __repr__(self) -> str:
        return (
            f"StridedMemoryView(ptr={self.ptr:#x}, shape={self.shape}, strides={self.strides}, "
            f"dtype={self.dtype}, device_id={self.device_id}, is_device_accessible={self.is_device_accessible}, "
            f"readonly={self.readonly})"
        )

    # ------------------------------------------------------------------ new views and copies

    def view(self, layout: Any = None, dtype: Any = None) -> StridedMemoryView:
        """A new view of the same memory with another layout and/or dtype (no copy).

        Parameters
        ----------
        layout : object, optional
            An object with ``shape``, ``strides`` (in elements; ``None`` for C-contiguous),
            ``itemsize`` and optionally ``slice_offset`` (elements from this view's pointer to
            the new first element), such as ``cuda.core``'s ``_StridedLayout``. ``None``: this
            view's layout.
        dtype : numpy.dtype or str, optional
            The element type; its item size must be the layout's (or this view's, without a
            layout). ``None``: this view's dtype.

        Returns
        -------
        StridedMemoryView
            Sharing this view's producer, device and read-only flag; this view itself when
            neither ``layout`` nor ``dtype`` is given (as in ``cuda.core``).

        Raises
        ------
        ValueError
            The item sizes disagree, the layout is malformed, or it reaches outside a
            memory-resource buffer this view was made from.
        TypeError
            ``layout`` is not a layout.
        """
        if layout is None and dtype is None:
            return self  # as cuda.core: nothing to change
        return _ops.make_view(self, layout, dtype)  # type: ignore[no-any-return]

    def as_tensor_map(
        self,
        box_dim: tuple[int, ...] | None = None,
        *,
        options: Any = None,
        element_strides: tuple[int, ...] | None = None,
        data_type: Any = None,
        interleave: Any = None,
        swizzle: Any = None,
        l2_promotion: Any = None,
        oob_fill: Any = None,
    ) -> Any:
        """A tiled :class:`~cuda_core.TensorMapDescriptor` (TMA) of this view.

        Pass ``box_dim`` (and the keywords of :class:`~cuda_core.TensorMapDescriptorOptions`)
        or ``options=``, not both. The view must be device-accessible, 16-byte aligned, rank
        1-5, contiguous in its last dimension, with other strides multiples of 16 bytes;
        ``box_dim`` fits inside the tensor. Any rule broken raises ``ValueError`` (``TypeError``
        for a wrong type) before the driver is called. See :class:`~cuda_core.TensorMapDescriptorOptions`.
        """
        from .._tensor_map import TensorMapDescriptor  # tensor maps are built on views

        return TensorMapDescriptor._from_tiled(
            self,
            box_dim,
            options=options,
            element_strides=element_strides,
            data_type=data_type,
            interleave=interleave,
            swizzle=swizzle,
            l2_promotion=l2_promotion,
            oob_fill=oob_fill,
        )

    def copy_from(
        self,
        other: StridedMemoryView,
        stream: Any,
        allocator: Any = None,
        blocking: bool | None = None,
    ) -> None:
        """Copy the elements of ``other`` into this view.

        Any strides work on either side (host, pinned, managed or device memory of one
        device); the views must have the same shape and item size (bytes are copied, no
        conversion), and this view must be writable. Views of device memory on two devices
        are copied when both are contiguous (an extension: ``cuda.core`` copies on one device
        only), directly where the pools grant access and as a peer copy otherwise.

        Parameters
        ----------
        other : StridedMemoryView
            The source.
        stream : Stream or GraphBuilder
            The stream the copy is ordered on (``None``: the device's default stream).
            Unused when both views are host-only memory (copied by NumPy, at once).
        allocator : MemoryResource, optional
            For temporary buffers; none are needed by this implementation.
        blocking : bool, optional
            ``True``: ``stream`` is synchronised before returning. ``False``: return once
            queued. ``None`` (default): non-blocking device-to-device, blocking when host
            memory is involved.

        Raises
        ------
        ValueError
            Shapes or item sizes differ, this view is read-only, neither view has a dtype, or
            the views are on two devices and one of them is not contiguous.
        TypeError
            ``other``, ``allocator``, ``blocking`` or ``stream`` has the wrong type.
        CUDAError
            The driver refused a copy.
        """
        if not isinstance(other, StridedMemoryView):
            raise arg_error("other", "a StridedMemoryView", other, exc=TypeError)
        _ops.copy_views(self, other, stream, allocator, blocking)

    def copy_to(
        self,
        other: StridedMemoryView,
        stream: Any = None,
        allocator: Any = None,
        blocking: bool | None = None,
    ) -> None:
        """Copy this view's elements into ``other``; see :meth:`copy_from`."""
        if not isinstance(other, StridedMemoryView):
            raise arg_error("other", "a StridedMemoryView", other, exc=TypeError)
        _ops.copy_views(other, self, stream, allocator, blocking)

    # ------------------------------------------------------------------ DLPack export

    def __dlpack_device__(self) -> tuple[int, int]:
        """The DLPack ``(device_type, device_id)`` of the viewed memory."""
        host = self._dl_device_type == _dl.kDLCPU or self.device_id < 0  # host memory: device 0
        return (self._dl_device_type, 0 if host else self.device_id)

    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """Export the view as a DLPack capsule (no copy); the capsule keeps the view alive.

        Parameters
        ----------
        stream : int, optional
            The consumer's stream. The view records no pending work, so nothing is ordered.
        max_version : (int, int), optional
            The highest DLPack version the consumer understands; ``>= (1, 0)`` yields a
            versioned capsule.
        dl_device : (int, int), optional
            Must be this view's device when given.
        copy : bool, optional
            ``True`` is refused (the view never copies).

        Returns
        -------
        PyCapsule

        Raises
        ------
        BufferError
            A copy or another device was requested.
        """
        dev_type, dev_id, versioned = _dl.export_args(
            "StridedMemoryView", self.__dlpack_device__(), max_version, dl_device, copy
        )
        dt = self.dtype
        if dt is None:
            raise BufferError(
                "Cannot export StridedMemoryView via DLPack without dtype information; create the "
                "view with dtype specified: this view has no dtype (from_buffer with only itemsize)"
            )
        return _dl.make_capsule(
            self.ptr,
            self.shape,
            _dl.dtype_to_dlpack(dt),
            dev_type,
            dev_id,
            owner=self,
            versioned=versioned,
            readonly=self.readonly,
            strides=self._raw_strides,
        )


# ---------------------------------------------------------------------------------------------
# Builders

# The native backend's ClassMethod is a classmethod that keeps the method it binds (from_dlpack
# and from_array_interface are hot calls; classmethod makes and frees a method per call).
_class_method: Any = getattr(backend, "ClassMethod", classmethod)
if hasattr(backend, "ViewEntry"):
    # The native backend: from_dlpack is its C entry, which reads a producer type classified
    # as plain DLPack, and a torch.Tensor its reader takes, without a Python frame, and hands
    # everything else to the function above.
    _from_dlpack_py = StridedMemoryView.__dict__["from_dlpack"].__func__
    _entry = backend.ViewEntry(_from_dlpack_py, _kinds, _KIND_DLPACK, _KIND_TORCH)
    functools.update_wrapper(_entry, _from_dlpack_py)
    StridedMemoryView.from_dlpack = _class_method(_entry)  # type: ignore[method-assign, assignment]
_from_dlpack = StridedMemoryView.from_dlpack
# from_array_interface is the reader itself (one frame less), documented as the method above.
_ai.VIEW = StridedMemoryView
functools.update_wrapper(
    _ai.array_interface_view, StridedMemoryView.__dict__["from_array_interface"].__func__
)
StridedMemoryView.from_array_interface = _class_method(_ai.array_interface_view)  # type: ignore[method-assign, assignment]


def _classify(tp: type) -> int:
    kind = _bridge.classify(tp)
    if len(_kinds) < 256:
        _kinds[tp] = kind
    return kind


def _from_fields(obj: Any, fields: _ai.Fields) -> StridedMemoryView:
    view = _new_view(StridedMemoryView)
    (
        view.ptr,
        view.shape,
        view._raw_strides,
        view._dtype,
        view.device_id,
        view.is_device_accessible,
        view.readonly,
        view._dl_device_type,
    ) = fields
    view.exporting_obj = obj
    view._capsule = None
    return view


def _from_cai(obj: Any, stream_ptr: Any) -> StridedMemoryView:
    if type(stream_ptr) is not int:
        stream_ptr = _stream_ptr(stream_ptr)
    return _from_fields(obj, _ai.read_cuda_array_interface(obj, stream_ptr))


def _warn_direct(what: str, method: str) -> None:
    # cuda.core 1.2 deprecates StridedMemoryView(obj, ...) for array producers (same category).
    warnings.warn(
        f"Constructing a StridedMemoryView directly from {what} is deprecated; use "
        f"StridedMemoryView.{method}() or StridedMemoryView.from_any_interface() instead",
        DeprecationWarning,
        stacklevel=3,
    )
