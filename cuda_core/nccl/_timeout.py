"""How long a communicator waits for NCCL before it aborts: the module default and its checks.

The default is 600 s (PyTorch's for its NCCL process groups). ``CUDA_CORE_NCCL_TIMEOUT``
(seconds) replaces it for the process, :func:`set_default_timeout` for the rest of the
program; ``Communicator.init(..., timeout=)`` for one communicator. ``math.inf`` waits forever
(NCCL's asynchronous errors are still checked).
"""

from __future__ import annotations

import math
import os
from typing import Any

from .._utils import arg_error

__all__ = ["get_default_timeout", "set_default_timeout"]

ENV = "CUDA_CORE_NCCL_TIMEOUT"
DEFAULT = 600.0
_RULE = "a number of seconds > 0 (math.inf: never)"
_set_by_user: float | None = None


def check_timeout(value: Any, name: str = "timeout") -> float:
    """``value`` as seconds: an int or float (not a bool), ``> 0``, not NaN; ``inf`` allowed."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise arg_error(name, _RULE, value, exc=TypeError)
    seconds = float(value)
    if math.isnan(seconds) or seconds <= 0:
        raise arg_error(name, _RULE, value)
    return seconds


def parse_env(text: str) -> float:
    """The seconds in the text of ``CUDA_CORE_NCCL_TIMEOUT`` (``"30"``, ``"2.5"``, ``"inf"``)."""
    try:
        seconds = float(text.strip())
    except ValueError:
        raise arg_error(ENV, _RULE, text, hint="unset it for the default of 600 s") from None
    if math.isnan(seconds) or seconds <= 0:
        raise arg_error(ENV, _RULE, text, hint="unset it for the default of 600 s")
    return seconds


def get_default_timeout() -> float:
    """The timeout, in seconds, of a communicator created without ``timeout=``.

    Returns
    -------
    float
        What :func:`set_default_timeout` set, else ``CUDA_CORE_NCCL_TIMEOUT`` (read now), else
        600.

    Raises
    ------
    ValueError
        ``CUDA_CORE_NCCL_TIMEOUT`` is not a number of seconds > 0.
    """
    if _set_by_user is not None:
        return _set_by_user
    text = os.environ.get(ENV, "")
    return parse_env(text) if text.strip() else DEFAULT


def set_default_timeout(seconds: float | None) -> None:
    """Set the timeout of the communicators created from now on without ``timeout=``.

    A collective of such a communicator that has not completed ``seconds`` after it became
    the oldest unfinished one (its ``init``, ``finalize`` and ``close`` likewise) aborts the
    communicator and raises :class:`NCCLTimeoutError`. Communicators already made keep theirs.

    Parameters
    ----------
    seconds : float or None
        Seconds ``> 0``; ``math.inf`` never times out. ``None``: back to
        ``CUDA_CORE_NCCL_TIMEOUT``, else 600.

    Raises
    ------
    TypeError, ValueError
        ``seconds`` is not a number of seconds > 0.

    Examples
    --------
    >>> from cuda_core import nccl
    >>> nccl.set_default_timeout(60)   # a hung rank is reported after a minute
    """
    global _set_by_user
    _set_by_user = None if seconds is None else check_timeout(seconds, "seconds")
