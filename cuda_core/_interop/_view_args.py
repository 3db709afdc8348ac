"""``args_viewable_as_strided_memory``: a decorator that hands chosen arguments to a function as
proxies, whose ``view(stream_ptr)`` gives their :class:`~cuda_core.utils.StridedMemoryView`
ordered on the stream the function chooses (``cuda.core.utils`` has it too)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._utils import arg_error
from ._memoryview import StridedMemoryView, _from_cai, _from_dlpack, _stream_ptr

__all__: list[str] = []  # public in cuda_core.utils
_UTILS_EXPORTS = ["args_viewable_as_strided_memory"]


class _StridedMemoryViewProxy:
    """Stands in for an argument until the function asks for its view with a stream."""

    __slots__ = ("_has_dlpack", "obj")

    def __init__(self, obj: object) -> None:
        self.obj = obj
        self._has_dlpack = hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__")

    def view(self, stream_ptr: int | None = None) -> StridedMemoryView:
        """The argument's :class:`StridedMemoryView`, ordered on the consumer stream ``stream_ptr``."""
        if type(stream_ptr) is not int:
            stream_ptr = _stream_ptr(stream_ptr)
        if self._has_dlpack:
            return _from_dlpack(self.obj, stream_ptr)
        if hasattr(self.obj, "__cuda_array_interface__"):
            return _from_cai(self.obj, stream_ptr)
        return StridedMemoryView.from_any_interface(self.obj, stream_ptr)


def args_viewable_as_strided_memory(
    arg_indices: tuple[int, ...],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a function so that some positional arguments arrive as viewable proxies.

    Each argument at a position in ``arg_indices`` is replaced by a proxy whose
    ``view(stream_ptr=None)`` method returns a :class:`StridedMemoryView` of it, so the function
    chooses the consumer stream when it takes the view.

    Parameters
    ----------
    arg_indices : tuple of int
        Positions of the arguments to wrap.

    Returns
    -------
    callable
        The decorator.

    Raises
    ------
    TypeError
        ``arg_indices`` is not a tuple of ints.

    Examples
    --------
    >>> @args_viewable_as_strided_memory((0,))
    ... def total(arr, stream):
    ...     view = arr.view(int(stream.handle))
    ...     return view.shape
    """
    if not isinstance(arg_indices, tuple) or not all(isinstance(i, int) for i in arg_indices):
        raise arg_error("arg_indices", "a tuple of ints", arg_indices, exc=TypeError)

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            items = list(args)
            for i in arg_indices:
                items[i] = _StridedMemoryViewProxy(items[i])
            return func(*items, **kwargs)

        return wrapper

    return decorate
