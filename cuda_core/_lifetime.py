"""Keeping ctypes callbacks alive for the life of the process (:func:`immortal`).

Lifetimes of driver objects live in the handle layer (:mod:`cuda_core._handles._protocol` states
them; two backends implement them): each handle owns its driver object and frees it once, at ``release()``/``close()``
or when collected. This module holds the one lifetime rule that is not a handle's.
"""

from __future__ import annotations

import ctypes
from typing import Any

__all__: list[str] = []  # private module

_incref = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("Py_IncRef", ctypes.pythonapi))


def immortal(callback: Any) -> Any:
    """Keep a ctypes callback alive until the process ends, and return it.

    Foreign code holds the addresses of some callbacks (DLPack deleters and capsule
    destructors, driver host functions) and may call them during interpreter teardown, after
    this module's globals are gone: a freed ctypes thunk would then be a jump into freed memory.
    One reference that is never dropped keeps the thunk valid for the life of the process.
    """
    _incref(callback)
    return callback
