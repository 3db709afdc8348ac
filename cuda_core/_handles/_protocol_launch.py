"""The handle layer's protocol, continued: the native backend's launch fast path.

Only the native backend has these (:class:`~cuda_core._handles._protocol.NativeBackend` names
them; :mod:`cuda_core._handles._protocol` re-exports them). ``cuda_core.launch`` is a
:class:`LaunchEntry` there and ``PreparedLaunch`` derives from :class:`PreparedLaunchBase`: the
steady state of a launch runs in C without a Python frame, and everything else in the Python
path of :mod:`cuda_core._launcher`, which owns every check and message. A change here bumps
``ABI_VERSION`` like any change to the protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

__all__: list[str] = []  # private module

ARG_KINDS = (
    "fit",
    "signed",
    "unsigned",
    "float",
    "complex",
    "bool",
    "bytes",
    "call_index",
    "call_bytes",
)
"""How the native launch path turns an argument into parameter bytes (a :class:`LaunchPlan`'s
``kinds`` are indices into this tuple; the native module's ``ARG_KINDS`` must equal it):

* ``fit``: an integer (``__index__``) that fits the size signed or unsigned, as its low bytes
  (a Python ``int``; an integer for an integer parameter of another width);
* ``signed``, ``unsigned``: an integer in that range of the size (NumPy integers);
* ``float``: ``float(value)`` as IEEE binary16, 32 or 64 (size 2, 4 or 8), as ``struct`` packs it;
* ``complex``: ``complex(value)`` as two floats of half the size each;
* ``bool``: the truth value, one byte;
* ``bytes``: the object's buffer, exactly the size (ctypes objects, NumPy structured scalars);
* ``call_index``: ``getter(value)``, an integer in the unsigned range of 8 bytes (pointers);
* ``call_bytes``: ``getter(value)``, ``bytes`` or ``bytearray`` of exactly the size.
"""


class LaunchPlan(Protocol):
    """How arguments of exact types pack in C for one kernel: the native launch path's plan.

    ``LaunchPlan(function, types, kinds, offsets, sizes, getters, size)``: the ``CUfunction``
    address launches call; for each argument its exact type, its kind (an index into
    :data:`ARG_KINDS`), its offset and size in the packed bytes, and its getter (a callable for
    the ``call_*`` kinds, else ``None``); ``size``, the bytes of the packed parameters
    (padding is zero). ``ValueError`` for a kind, size or offset that does not fit.
    """

    def __init__(
        self,
        function: int,
        types: tuple[type, ...],
        kinds: tuple[int, ...],
        offsets: tuple[int, ...],
        sizes: tuple[int, ...],
        getters: tuple[Callable[[Any], Any] | None, ...],
        size: int,
    ) -> None: ...

    @property
    def function(self) -> int:
        """The ``CUfunction`` address."""
        ...

    @property
    def types(self) -> tuple[type, ...]:
        """The exact type of each argument."""
        ...

    @property
    def size(self) -> int:
        """Bytes of the packed parameters."""
        ...

    @property
    def shortcuts(self) -> tuple[str, ...]:
        """Per argument, the shortcut its packing takes: ``""`` none, ``"f64"`` (a float's
        value), ``"slot"`` (a pointer slot read in place), ``"inline"`` (a NumPy scalar's value
        read in place; ``"inline?"`` before the first value confirms it, ``"inline-off"`` where
        it did not)."""
        ...

    def pack(self, args: tuple[Any, ...], /) -> bytes:
        """The parameter bytes a launch with ``args`` (of the plan's types) hands the driver;
        the exception of the value that does not pack (not the user-facing one)."""
        ...


class LaunchEntry(Protocol):
    """``launch(stream, config, kernel, *args)`` in C: ``cuda_core.launch`` on the native backend.

    ``LaunchEntry(fallback, failed, stream_type, stream_slot, config_type, config_slot,
    kernel_type, kernel_slot)``. A call whose first three arguments have exactly these types,
    whose stream's handle (read through ``stream_slot``, a member descriptor) is the one of the
    config's last ``LaunchConfigHandle`` (``config_slot``) and is open, and whose arguments
    have exactly the types of the kernel's :class:`LaunchPlan` (``kernel_slot``), is packed and
    launched in C, the GIL released around ``cuLaunchKernelEx``; a status other than success
    calls ``failed(status, stream, config, kernel, *args)``. Every other call, and any failure
    to pack, calls ``fallback(stream, config, kernel, *args)`` (keywords too), which owns the
    checks and the messages. Instances take attributes (``functools.update_wrapper``).
    """

    def __init__(
        self,
        fallback: Callable[..., Any],
        failed: Callable[..., Any],
        stream_type: type,
        stream_slot: Any,
        config_type: type,
        config_slot: Any,
        kernel_type: type,
        kernel_slot: Any,
    ) -> None: ...


class PreparedLaunchBase(Protocol):
    """The native base of ``PreparedLaunch``: its calls launch in C.

    A call with no argument launches the state given to :meth:`_fast_set`; a call with
    arguments of exactly the plan's types packs them in place into the bound storage, makes
    them ``_args`` and launches. A status other than success calls ``failed(self, status)``;
    every other call (no state, other types, keywords, a value that does not pack, a closed
    stream) calls ``slow(self, *args, **kwargs)`` (see :meth:`_handlers`).
    """

    _args: tuple[Any, ...]
    """The bound arguments."""

    def _fast_set(
        self,
        cfg: Any,
        plan: LaunchPlan | None,
        keep: Any,
        bytes: int,
        params: int,
        /,
    ) -> None:
        """What calls launch with: ``cfg`` (a ``LaunchConfigHandle``) and ``plan`` (either
        ``None``: every call runs in Python), the bound parameter bytes at address ``bytes``
        and their ``void*`` array at ``params``, both owned by ``keep``."""
        ...

    @classmethod
    def _handlers(cls, slow: Callable[..., Any], failed: Callable[..., Any], /) -> None:
        """The Python functions calls go to (set once)."""
        ...
