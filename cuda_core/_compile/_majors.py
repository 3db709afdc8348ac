"""An environment that mixes two CUDA majors: found from the installed wheels, with its remedy.

Each extra installs ``cuda-bindings`` of one CUDA major with that major's compiler wheels
(``[cu13]``: ``cuda-toolkit``, ``nvidia-cuda-nvrtc``, ``nvidia-nvjitlink``, ...; ``[cu12]``: the
same libraries as ``-cu12`` wheels). Running both install lines, or installing the other
major's ``cuda-bindings`` by hand, leaves both majors' compiler wheels beside one
``cuda-bindings``. ``cuda.pathfinder`` may then load the other major's NVRTC, which cuda_core
refuses where it is newer than the bindings (:func:`cuda_core._compat.foreign_compiler`), and the
usual remedy, ``pip install "cudacore[cu12]"``, does nothing: everything it names is installed.

:func:`mixed` reads the installed distributions once (no library is loaded) and returns a
:class:`Mix` naming both majors' wheels and the commands that leave one major, or ``None``.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass

from .._compat import BINDINGS_MAJOR, BINDINGS_TEXT, install_hint
from .._utils import run_once

__all__: list[str] = []

# The compiler wheels each extra brings (through cuda-bindings[all]), by CUDA major. The CUDA 13
# wheels carry no major in their name: their version says it, except cuFile's (1.x), which goes
# with the other unsuffixed wheels.
_WHEELS: dict[int, tuple[str, ...]] = {
    12: (
        "nvidia-cuda-nvrtc-cu12",
        "nvidia-nvjitlink-cu12",
        "nvidia-cuda-nvcc-cu12",
        "nvidia-nvfatbin-cu12",
        "nvidia-cufile-cu12",
    ),
    13: (
        "cuda-toolkit",
        "nvidia-cuda-nvrtc",
        "nvidia-nvjitlink",
        "nvidia-nvvm",
        "nvidia-nvfatbin",
        "nvidia-cufile",
    ),
}
_UNVERSIONED = frozenset({"nvidia-cufile"})  # its version is not a CUDA version


@dataclass(frozen=True)
class Mix:
    """``cuda-bindings`` of one CUDA major beside compiler wheels of another.

    ``wheels`` maps each major to the ``(name, version)`` of its compiler wheels found.
    """

    bindings: str
    bindings_major: int
    other_major: int
    wheels: dict[int, tuple[tuple[str, str], ...]]

    @property
    def harmful(self) -> bool:
        """Whether the mix stops compiling: the other major is newer than the bindings, so its
        NVRTC and nvJitLink, where loaded, are refused (an older one is used)."""
        return self.other_major > self.bindings_major

    def describe(self) -> str:
        """One sentence: which majors are mixed, naming the other major's wheels."""
        found = ", ".join(f"{n} {v}" for n, v in self.wheels[self.other_major])
        return (
            f"this environment mixes two CUDA majors: cuda-bindings {self.bindings} (CUDA "
            f"{self.bindings_major}) beside the CUDA {self.other_major} compiler wheels "
            f"({found}), as running both install commands leaves it"
        )

    def keep(self, major: int) -> str:
        """The commands that leave only ``major``'s wheels (and its ``cuda-bindings``)."""
        drop = self.wheels.get(
            self.bindings_major if major == self.other_major else self.other_major, ()
        )
        uninstall = "pip uninstall -y " + " ".join(n for n, _ in drop) if drop else ""
        install = install_hint(major)
        if major == self.bindings_major:  # the wheels in the way first, then what may be missing
            return f"{uninstall} && {install}" if uninstall else install
        return f"{install} && {uninstall}" if uninstall else install

    def remedy(self) -> str:
        """Both ways out: keep the bindings' major, or move to the other one."""
        a, b = self.bindings_major, self.other_major
        return (
            f"keep one major: for CUDA {a}, run `{self.keep(a)}`; or, for CUDA {b} (a driver for "
            f"CUDA {b}.0 or newer), run `{self.keep(b)}`"
        )


def find_mix(installed: dict[str, str], bindings: str, bindings_major: int) -> Mix | None:
    """The :class:`Mix` of ``installed`` (distribution name -> version, names normalised to
    lower case with dashes) beside ``cuda-bindings`` ``bindings``, or ``None``."""
    wheels: dict[int, list[tuple[str, str]]] = {}
    for name in _WHEELS[12]:
        if name in installed:
            wheels.setdefault(12, []).append((name, installed[name]))
    for name in _WHEELS[13]:
        head = installed.get(name, "").split(".", 1)[0]
        if name not in _UNVERSIONED and head.isdigit() and int(head) >= 13:
            wheels.setdefault(int(head), []).append((name, installed[name]))
    others = sorted(m for m in wheels if m != bindings_major)
    if not others:
        return None
    unsuffixed = [m for m in wheels if m >= 13]
    for name in _UNVERSIONED:
        if name in installed and unsuffixed:
            wheels[max(unsuffixed)].append((name, installed[name]))
    return Mix(
        bindings=bindings,
        bindings_major=bindings_major,
        other_major=others[-1],
        wheels={m: tuple(w) for m, w in wheels.items()},
    )


def _installed() -> dict[str, str]:
    out = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-").replace(".", "-")
        if name:
            out[name] = dist.version
    return out


@run_once
def mixed() -> Mix | None:
    """The mix of CUDA majors of this environment, or ``None``; read once per process."""
    try:
        return find_mix(_installed(), BINDINGS_TEXT, BINDINGS_MAJOR)
    except Exception:  # metadata is a hint: a broken distribution never stops cuda_core
        return None
