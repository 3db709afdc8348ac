"""Kernel launches: :func:`launch` and :class:`PreparedLaunch`.

On the native backend the steady state runs in C: ``launch`` is the backend's ``LaunchEntry``,
which takes a ``Stream``, a ``LaunchConfig`` whose ``LaunchConfigHandle`` for that stream is its
last one (``_last``), a ``Kernel`` whose ``LaunchPlan`` (``_fast``: the plan of the argument
types launched last) matches the argument types, packs the values in C and calls
``cuLaunchKernelEx``; ``PreparedLaunch`` derives from ``PreparedLaunchBase``, whose calls do the
same with the bound state. Anything else (a first launch, other argument types, a graph
builder, a dict config, a device's default stream, a value that does not pack, a closed stream)
runs the Python path below, which owns every check and message; a status other than success
comes back to it too (:func:`_fast_failed`).

The Python path does little per call: the ``LaunchConfigHandle`` (the native ``CUlaunchConfig``,
bound to the stream's handle) comes from the config's last-used entry (else a per-stream
cache), the packing plan from a per-(kernel, argument types) cache, and one generated function
writes the values with one ``struct.pack_into`` and calls the handle's ``launch``. When the
driver reports a context mismatch, the launch is retried once with the stream's context pushed.
"""

from __future__ import annotations

import contextlib
import functools
import struct
import warnings
from typing import TYPE_CHECKING, Any, cast

from . import _links
from ._compat import driver
from ._errors import CUDAError
from ._handles._backend import NATIVE, backend
from ._handles._protocol import NativeBackend
from ._kernel import Kernel
from ._kernel_arg_handler import MISS, Plan, kernel_label, make_plan, set_arg
from ._launch_config import LaunchConfig
from ._launch_errors import explain_launch_failure
from ._stream import Stream, _DeviceDefaultStream, as_stream
from ._utils import arg_error, handle_return

__all__ = ["PreparedLaunch", "launch"]

# The native backend's launch fast path (LaunchEntry, LaunchPlan, PreparedLaunchBase), or None.
_FAST: NativeBackend | None = cast(NativeBackend, backend) if NATIVE else None

_CUresult = driver.CUresult
# Statuses that can mean "the current context is not the stream's": retried in its context.
_CONTEXT_ERRORS = frozenset(
    int(e)
    for e in (
        _CUresult.CUDA_ERROR_INVALID_CONTEXT,
        _CUresult.CUDA_ERROR_INVALID_HANDLE,
        _CUresult.CUDA_ERROR_CONTEXT_IS_DESTROYED,
    )
)
_MAX_PLANS_PER_KERNEL = 64
_PACK_ERRORS = (struct.error, OverflowError, TypeError, AttributeError, ValueError)


_STREAM_RULE = "a Stream, a GraphBuilder or an object with __cuda_stream__"


def _as_stream(obj: Any) -> Any:
    if obj is None:
        raise arg_error("stream", _STREAM_RULE, obj, exc=TypeError)
    return as_stream(obj, "stream")


# cuda.core 1.2's words (code and tests written for it match on them), then ours.
_FOREIGN_STREAM_WARNING = (
    "Passing foreign stream objects to this function via the stream protocol is deprecated. "
    "Convert the object explicitly using Stream(obj) instead. (stream type: {}; Stream(obj) or "
    "Device.create_stream(obj) wraps it once, for every launch.)"
)


def _launch_stream(obj: Any) -> Any:
    """launch()'s stream: a foreign one (PyTorch, CuPy, any ``__cuda_stream__`` object) is
    accepted with the ``DeprecationWarning`` ``cuda.core`` 1.2's ``launch`` gives for it."""
    stream = _as_stream(obj)
    if stream is not obj and stream is not getattr(obj, "_cuda_core_stream", None):
        tp = type(obj)
        warnings.warn(
            _FOREIGN_STREAM_WARNING.format(f"{tp.__module__}.{tp.__qualname__}"),
            DeprecationWarning,
            stacklevel=3,
        )
    return stream


# ---------------------------------------------------------------------------------------------
# Per-kernel state: the CUfunction handle, the parameter layout, the plans by argument types.
# It hangs off the Kernel itself (its ``_launch`` slot), so it lives exactly as long as the
# kernel and launch() finds it with one attribute read.


class _KernelEntry:
    __slots__ = ("func", "layout", "name", "param_types", "plans", "run")

    def __init__(self, kernel: Any) -> None:
        handle = getattr(kernel, "_handle", None)
        if handle is None or not hasattr(kernel, "_param_layout"):
            raise _kernel_error(kernel)
        self.func = int(handle)
        try:
            self.layout = kernel._param_layout()
        except CUDAError:
            self.layout = None
        types = getattr(kernel, "_param_types", None)  # where known: each argument's kind checked
        self.param_types = None if types is None else types()
        self.name: str | None = None
        self.plans: dict[tuple[type, ...], Plan] = {}
        # The run function of the plan used last: launch() tries it first (it returns MISS for
        # arguments of other types).
        self.run: Any = _miss

    def kernel_name(self, kernel: Any) -> str | None:
        if self.name is None:
            name = getattr(kernel, "_label", None) or getattr(kernel, "name", None)
            if not isinstance(name, str):
                try:
                    raw = handle_return(driver.cuKernelGetName(kernel._handle), "cuKernelGetName")
                    name = raw.decode() if isinstance(raw, bytes) else str(raw)
                except Exception:  # only for messages: an unnamed kernel is fine
                    name = None
            self.name = name or ""
        return self.name or None

    def plan(self, kernel: Any, args: tuple[Any, ...]) -> Plan:
        types = tuple(map(type, args))
        plan = self.plans.get(types)
        if plan is None:
            plan = make_plan(types, args, self.layout, self.kernel_name(kernel), self.param_types)
            plan.bind_launch(self.func)
            if len(self.plans) >= _MAX_PLANS_PER_KERNEL:
                self.plans.clear()
            self.plans[types] = plan
        return plan


def _miss(cfg: Any, args: tuple[Any, ...]) -> int:
    return MISS


def _entry(kernel: Any) -> _KernelEntry:
    try:
        entry = kernel._launch
    except AttributeError:
        raise _kernel_error(kernel) from None
    if entry is None:
        entry = kernel._launch = _KernelEntry(kernel)
    return entry  # type: ignore[no-any-return]


def _in_context_of(stream: Any, call: Any) -> Any:
    """``call()`` run with the context of ``stream`` (a device's default stream) current."""

    def scoped() -> Any:
        with stream._scope():
            return call()

    return scoped


def _device_of(stream: Any) -> Any:
    ordinal = stream._device_id
    # default streams follow the current context
    return stream.device if ordinal < 0 else _links.Device(ordinal)


def _check_config(config: Any) -> LaunchConfig:
    """``config`` as cuda.core 1.2's ``launch`` reads it: a LaunchConfig (or a subclass), a dict
    of its arguments, or ``None`` (``LaunchConfig()``, which refuses the missing grid)."""
    if isinstance(config, LaunchConfig):
        return config
    if isinstance(config, dict):
        return LaunchConfig(**config)
    if config is None:
        return LaunchConfig()
    raise arg_error(
        "config",
        "a LaunchConfig or a dict of its arguments",
        config,
        exc=TypeError,
        lead=_typed_lead("config", "LaunchConfig", config),
    )


def _typed_lead(name: str, expected: str, value: Any) -> str:
    """What ``cuda.core`` (Cython) says of an argument of the wrong type."""
    return f"Argument '{name}' has incorrect type (expected {expected}, got {type(value).__name__})"


def _kernel_error(kernel: Any) -> Exception:
    return arg_error(
        "kernel",
        "a Kernel (from ObjectCode.get_kernel())",
        kernel,
        exc=TypeError,
        lead=_typed_lead("kernel", "Kernel", kernel),
    )


# ---------------------------------------------------------------------------------------------
# launch()


def launch(stream: Any, config: LaunchConfig, kernel: Any, *kernel_args: Any) -> None:
    """Launch ``kernel`` on ``stream`` with the shape ``config`` and arguments ``kernel_args``.

    Parameters
    ----------
    stream : Stream, GraphBuilder or IsStreamType
        Where the launch is ordered. A graph builder records the launch as a kernel node. A
        foreign stream (PyTorch, CuPy, any object with ``__cuda_stream__``) still works but is
        deprecated, as in ``cuda.core`` 1.2 (``DeprecationWarning``): wrap it once with
        ``Stream(obj)``.
    config : LaunchConfig or dict
        Grid, cluster, block, dynamic shared memory and cooperation; a dict of
        :class:`LaunchConfig`'s arguments is turned into one per call (as in ``cuda.core``).
    kernel : Kernel
        From :meth:`ObjectCode.get_kernel`.
    *kernel_args
        The arguments, packed by the rules of the type table in "Launching kernels":
        ``int`` is a 64-bit value (pointers), ``float`` a ``double``, NumPy/ctypes scalars keep
        their width, structs pass by value, arrays and ``Buffer`` pass their device pointer. An
        integer for an integer parameter of another width is passed at the parameter's width
        (as ``cuda.core``'s launches deliver it), when its value fits.

    Raises
    ------
    TypeError
        ``stream`` is ``None`` or not a stream; ``config`` is neither a :class:`LaunchConfig`
        nor a dict;
        an argument has an unsupported type, or (where the kernel's parameter layout is known)
        the argument count or an argument's size differs from the kernel's signature.
    OverflowError
        A value does not fit its C type (or its integer parameter).
    ValueError
        ``config`` exceeds a limit of the stream's device (the message names the limit), or an
        argument is a closed ``Buffer``.
    CUDAError
        The driver refused the launch (the message says why, e.g. a cooperative grid too
        large to be co-resident, with the numbers: that error is also the ``ValueError``
        ``cuda.core`` raises for it).

    Examples
    --------
    >>> launch(s, LaunchConfig(grid=(n + 255) // 256, block=256), ker, a, b, c, np.uint64(n))
    """
    if type(stream) is not Stream:
        stream = _launch_stream(stream)
        if type(stream) is _DeviceDefaultStream:
            # A device's default stream: its token means "the current context's", so the launch
            # runs (on the plain twin) with the device's context current.
            with stream._scope():
                launch(stream._plain, config, kernel, *kernel_args)
            return
    if type(config) is not LaunchConfig:
        config = _check_config(config)
    try:
        entry = kernel._launch
    except AttributeError:
        entry = None
    if entry is None:
        entry = _entry(kernel)
    cfg = config._last
    if cfg is None or cfg.stream is not stream._h:  # a closed stream's launch refuses
        cfg = config._native_for(stream)
    run = entry.run
    try:
        err = run(cfg, kernel_args)
    except _PACK_ERRORS as exc:
        raise _pack_error(entry, kernel, kernel_args, exc) from None
    if err:
        _launch_other(err, stream, config, kernel, entry, cfg, kernel_args, run)


def _launch_other(
    err: Any,
    stream: Any,
    config: LaunchConfig,
    kernel: Any,
    entry: _KernelEntry,
    cfg: Any,
    args: tuple[Any, ...],
    run: Any,
) -> None:
    """launch() past its first try: other argument types (find or make their plan), or a failure."""
    if err == MISS:
        plan = entry.plan(kernel, args)  # checks the arguments against the kernel
        run = entry.run = plan.run
        kernel._fast = plan.native  # what the native entry tries first
        try:
            err = run(cfg, args)
        except _PACK_ERRORS as exc:
            raise _pack_error(entry, kernel, args, exc) from None
        if not err:
            return
    _launch_failed(err, stream, config, kernel, entry, lambda: run(cfg, args))


def _fast_failed(err: int, stream: Any, config: LaunchConfig, kernel: Any, *args: Any) -> None:
    """The native entry launched and the driver refused with status ``err``: the Python path's
    retry in the stream's context, and its error."""
    entry, cfg = kernel._launch, config._last
    run = entry.run  # the plan whose LaunchPlan the entry used
    _launch_failed(err, stream, config, kernel, entry, lambda: run(cfg, args))


def _pack_error(
    entry: _KernelEntry, kernel: Any, args: tuple[Any, ...], exc: Exception
) -> Exception:
    plan = entry.plans.get(tuple(map(type, args)))
    return plan.explain(args, exc) if plan is not None else exc


def _launch_failed(
    err: Any, stream: Any, config: LaunchConfig, kernel: Any, entry: _KernelEntry, again: Any
) -> None:
    """Retry once in the stream's context where that may help; else raise a helpful error."""
    if int(err) in _CONTEXT_ERRORS:
        with _device_of(stream)._scope():
            err = again()
        if not err:
            return
    raise _explain_failure(err, stream, config, kernel, entry)


def _explain_failure(
    err: Any, stream: Any, config: LaunchConfig, kernel: Any, entry: _KernelEntry
) -> CUDAError:
    label = kernel_label(entry.kernel_name(kernel))
    try:
        dev = _device_of(stream)
    except Exception:  # the details are a bonus; report the launch failure itself
        dev = None
    return explain_launch_failure(err, dev, config, kernel, label)


# ---------------------------------------------------------------------------------------------
# PreparedLaunch

if TYPE_CHECKING:  # what either base gives PreparedLaunch
    from ._handles._protocol import PreparedLaunchBase as _PreparedBase
elif _FAST is not None:
    _PreparedBase = _FAST.PreparedLaunchBase  # calls launch in C (see the module docstring)
else:

    class _PreparedBase:
        """The pure-Python backend's base: the bound arguments; every call runs in Python."""

        __slots__ = ("_args",)

        def _fast_set(self, *state: Any) -> None:
            pass


class PreparedLaunch(_PreparedBase):
    """A launch with kernel, config and stream bound once; calling it launches.

    Parameters
    ----------
    stream : Stream, GraphBuilder or IsStreamType
        As for :func:`launch`.
    config : LaunchConfig
        As for :func:`launch`.
    kernel : Kernel
        As for :func:`launch`.
    *kernel_args
        The arguments to bind now (checked and packed once). They may be omitted here and
        given at the first call instead.

    Raises
    ------
    TypeError, OverflowError, ValueError
        As for :func:`launch`, at construction for the bound arguments.

    Notes
    -----
    ``p()`` launches with the bound arguments: only ``cuLaunchKernelEx`` is called (on the
    native backend straight from C), so it is the cheapest way to launch from Python.
    ``p(*args)`` binds new arguments and launches (packed in place when their types are those
    bound before). Either call raises as :func:`launch` does (``TypeError``, ``OverflowError``,
    ``ValueError``, ``CUDAError``), a call with no arguments before any were bound a
    ``TypeError`` unless the kernel takes none, and a call once the stream is closed a
    ``RuntimeError``. ``p.set_arg(i, value)`` changes one argument in place. The object keeps references to its arguments, so buffers passed by
    pointer stay alive while it does. One ``PreparedLaunch`` must not be called from two
    threads at once (it owns one argument buffer); each thread can prepare its own. Setting a
    field of the bound :class:`LaunchConfig` (``config.grid = 64``) takes effect at the next
    call, which checks the new shape against the device.

    Examples
    --------
    >>> step = PreparedLaunch(s, LaunchConfig(grid=64, block=256), ker, buf, np.float32(0.5))
    >>> for _ in range(1000):
    ...     step()
    >>> step.set_arg(1, np.float32(0.25))
    >>> step()
    """

    __slots__ = (  # _args: the base's
        "__weakref__",
        "_call",
        "_cfg",
        "_config",
        "_entry",
        "_kernel",
        "_plan",
        "_slot",
        "_stream",
    )

    def __init__(self, stream: Any, config: LaunchConfig, kernel: Any, *kernel_args: Any) -> None:
        if type(stream) is not Stream:
            stream = _as_stream(stream)
        if type(config) is not LaunchConfig:
            config = _check_config(config)
        self._stream = stream
        self._config = config
        self._kernel = kernel
        self._entry = _entry(kernel)
        # Its own LaunchConfigHandle, which holds the stream's handle: whatever happens to the
        # config's per-stream cache later, this launch keeps its stream. When a field of the
        # config is set, the config tells this object (_config_changed) and the next call
        # builds the handle again from the new values.
        self._cfg: Any = config._native_for(stream)
        config._bind_prepared(self)
        self._plan: Plan | None = None
        self._slot: tuple[Any, ...] = ()
        self._args: tuple[Any, ...] = ()
        self._call: Any = self._first_call
        if kernel_args or self._entry.layout == ():
            self._bind(kernel_args)

    def _first_call(self) -> Any:
        self._bind(())  # no arguments were bound: the kernel must take none
        return self._call()

    def _bind(self, args: tuple[Any, ...]) -> None:
        plan = self._plan
        if plan is None or plan.types != tuple(map(type, args)):
            plan = self._entry.plan(self._kernel, args)
            slot = plan.new_slot()
            plan.pack(slot, args)
            self._use(plan, slot)
        else:
            try:
                plan.pack(self._slot, args)
            except BaseException:
                # Some values were written: the bound bytes go back to the bound arguments.
                with contextlib.suppress(Exception):
                    plan.pack(self._slot, self._args)
                raise
        self._args = args

    def _use(self, plan: Plan, slot: tuple[Any, ...]) -> None:
        # Everything the launch passes is fixed now: the call is one driver call.
        self._plan, self._slot = plan, slot
        cfg = self._cfg
        if cfg is None:  # the config changed since the handle was built
            cfg = self._cfg = self._config._native_for(self._stream)
        call = functools.partial(cfg.launch, self._entry.func, slot[1])
        default = type(self._stream) is _DeviceDefaultStream
        if default:  # its token needs its context current
            call = _in_context_of(self._stream, call)
        if default or plan.native is None:
            self._fast_set(None, None, None, 0, 0)
        else:  # the native base launches this in C (slot: the view, void**, storage, ..., bytes)
            self._fast_set(cfg, plan.native, slot, slot[4], slot[1])
        self._call = call

    def _config_changed(self) -> None:
        """A field of the config was set: the next call builds the launch from the new values
        (here, nothing is checked yet: a config the device cannot run raises at that call)."""
        self._cfg = None
        self._call = self._rebuild_call
        self._fast_set(None, None, None, 0, 0)

    def _rebuild_call(self) -> Any:
        self._cfg = self._config._native_for(self._stream)  # checks the new values on the device
        if self._plan is None:
            self._call = self._first_call
        else:
            self._use(self._plan, self._slot)
        return self._call()

    def _call_py(self, *kernel_args: Any) -> None:
        """A call in Python: launch with the bound arguments or with ``kernel_args`` (which are
        then bound). The native base's calls come here for anything but the steady state."""
        if kernel_args:
            self._bind(kernel_args)
        try:
            err = self._call()
        except RuntimeError:
            if self._stream._h.is_released:
                raise RuntimeError(
                    "Stream has been closed: the stream this PreparedLaunch was made for"
                ) from None
            raise
        if err:
            self._failed(err)

    def _failed(self, err: int) -> None:
        """The driver refused the launch with status ``err``: retry or explain (as launch())."""
        _launch_failed(err, self._stream, self._config, self._kernel, self._entry, self._call)

    if TYPE_CHECKING or _FAST is None:
        __call__ = _call_py  # the native base's call is in C

    def set_arg(self, index: int, value: Any) -> None:
        """Replace argument ``index`` in the packed buffer (no repacking of the others).

        Parameters
        ----------
        index : int
            The parameter's position (negative counts from the end).
        value : Any
            The new value; a different type is allowed if it still fits the parameter.

        Raises
        ------
        IndexError
            ``index`` is out of range or no arguments are bound yet.
        TypeError, OverflowError
            As for :func:`launch`.
        """
        if self._plan is None:
            raise IndexError(
                "no arguments are bound yet; call the PreparedLaunch with its arguments first"
            )
        args, plan, slot = set_arg(
            self._plan,
            self._slot,
            self._args,
            index,
            value,
            self._entry.layout,
            self._entry.kernel_name(self._kernel),
            self._entry.param_types,
        )
        if slot is not self._slot:
            self._use(plan, slot)
        self._args = args

    @property
    def args(self) -> tuple[Any, ...]:
        """The bound arguments."""
        return self._args

    @property
    def stream(self) -> Any:
        """The stream the launches are ordered on."""
        return self._stream

    @property
    def config(self) -> LaunchConfig:
        """The launch configuration."""
        return self._config

    @property
    def kernel(self) -> Any:
        """The kernel launched."""
        return self._kernel

    def __repr__(self) -> str:
        return f"PreparedLaunch({self._config!r}, {len(self._args)} args)"


if _FAST is not None and not TYPE_CHECKING:
    # The native backend: launch() is its C entry, which hands the Python function above
    # anything but the steady state (``launch.__wrapped__`` is that function).
    _PreparedBase._handlers(PreparedLaunch._call_py, PreparedLaunch._failed)
    _launch_py = launch
    launch = _FAST.LaunchEntry(
        _launch_py,
        _fast_failed,
        Stream,
        Stream._h,
        LaunchConfig,
        LaunchConfig._last,
        Kernel,
        Kernel._fast,
    )
    functools.update_wrapper(launch, _launch_py)
