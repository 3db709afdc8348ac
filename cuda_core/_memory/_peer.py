"""Peer access to a device's memory pool: ``DeviceMemoryResource.peer_accessible_by``.

Kernels and copies on another device can use a pool's memory once that device is granted
access to the pool (``cuMemPoolSetAccess``; the device must be able to reach the owner's memory,
``cuDeviceCanAccessPeer``). Access is a property of the pool, not of the resource object: every
resource over the same pool (the device's current pool, an imported pool) sees one state, which
is why ``peer_accessible_by`` is a live view that asks the driver at every read and writes each
change in one driver call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, MutableSet
from typing import Any

from .. import _links
from .._utils import arg_error, ordinal_lead
from ._pool import device_count, has_access, set_access

__all__: list[str] = []  # reached through DeviceMemoryResource.peer_accessible_by

_RULE = "a Device or a device ordinal"


def resolve_device(value: Any, name: str = "peer_accessible_by") -> int:
    """The ordinal of ``value``: a Device, an int (or an object with ``__index__``) in range, or
    ``None`` (the current device, as ``Device(None)``)."""
    Device = _links.Device

    if isinstance(value, Device):
        return value._id
    if value is None:
        return Device()._id
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise arg_error(name, _RULE, value, exc=TypeError)
    ordinal = value.__index__()
    n = device_count()
    if not 0 <= ordinal < n:
        raise arg_error(name, f"{_RULE} in [0, {n})", value, lead=ordinal_lead(ordinal, n))
    return int(ordinal)


def _resolve_or_none(value: Any) -> int | None:
    try:
        return resolve_device(value)
    except (TypeError, ValueError):
        return None


def plan_peer_access(
    owner: int,
    current: Iterable[int],
    wanted: Iterable[int],
    can_access: Callable[[int, int], bool],
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(grant, revoke)``: the device ordinals that turn the access set ``current`` into
    ``wanted`` (the owner dropped from both), each sorted.

    Raises
    ------
    ValueError
        A device to be granted access cannot reach the owner's memory
        (``can_access(peer, owner)`` is false); the message names every such device.
    """
    target = set(wanted) - {owner}
    have = set(current) - {owner}
    grant = tuple(sorted(target - have))
    bad = [d for d in grant if not can_access(d, owner)]
    if bad:
        names = ", ".join(str(d) for d in bad)
        raise ValueError(
            f"peer_accessible_by must name devices that can access device {owner}'s memory "
            f"(got device {names}, which cannot: Device({bad[0]}).can_access_peer({owner}) is False)"
        )
    return grant, tuple(sorted(have - target))


def _can_access(peer: int, owner: int) -> bool:
    Device = _links.Device

    return Device(peer).can_access_peer(owner)


def current_peers(mr: Any) -> tuple[int, ...]:
    """The ordinals of the devices other than the owner that can read and write the pool."""
    pool = mr._live_pool()
    owner = mr._dev_id
    return tuple(d for d in range(device_count()) if d != owner and has_access(pool, d))


def apply_peer_access(mr: Any, grant: Iterable[int] = (), revoke: Iterable[int] = ()) -> None:
    """Grant the devices ``grant`` (checked: they can reach the owner's memory) and revoke the
    devices ``revoke``, in one driver call (none when nothing changes)."""
    pool = mr._live_pool()
    current = current_peers(mr)
    wanted = (set(current) | set(grant)) - set(revoke)
    to_grant, to_revoke = plan_peer_access(mr._dev_id, current, wanted, _can_access)
    if to_grant or to_revoke:
        set_access(pool, list(to_grant), revoke=to_revoke)


def replace_peer_access(mr: Any, devices: Any) -> None:
    """``mr.peer_accessible_by = devices``: exactly ``devices`` (the owner ignored) get access."""
    if isinstance(devices, (str, bytes)) or not isinstance(devices, Iterable):
        raise arg_error(
            "peer_accessible_by",
            "an iterable of Devices or device ordinals",
            devices,
            exc=TypeError,
        )
    wanted = {resolve_device(d) for d in devices}
    pool = mr._live_pool()
    current = current_peers(mr)
    grant, revoke = plan_peer_access(mr._dev_id, current, wanted, _can_access)
    if grant or revoke:
        set_access(pool, list(grant), revoke=revoke)


class PeerAccessibleBySetProxy(MutableSet):  # type: ignore[type-arg]
    """The devices granted access to a :class:`DeviceMemoryResource`'s pool: a live set.

    Reading (``in``, iteration, ``len``) asks the driver (``cuMemPoolGetAccess``); changing it
    (``add``, ``discard``, ``update``, ``clear``, ``|=``, ``-=``, ``&=``, ``^=``) calls
    ``cuMemPoolSetAccess`` once. Nothing is cached, so every resource over the same pool sees
    the same state. Iteration gives :class:`cuda_core.Device` objects in ordinal order; the methods take
    a ``Device`` or an ordinal; the owning device is never a member and is ignored when given.
    Binary operators (``|``, ``&``, ``-``, ``^``) return plain ``set`` objects.

    Raises
    ------
    ValueError
        Granting access to a device that cannot reach the owner's memory
        (``Device.can_access_peer``), or an ordinal out of range.
    TypeError
        Something that is neither a ``Device`` nor an ordinal (``add``).
    RuntimeError
        The resource is closed.
    """

    __slots__ = ("_mr",)

    def __init__(self, mr: Any) -> None:
        self._mr = mr

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> set[Any]:
        return set(it)

    def __contains__(self, value: object) -> bool:
        mr = self._mr
        pool = mr._live_pool()
        d = _resolve_or_none(value)
        return d is not None and d != mr._dev_id and has_access(pool, d)

    def __iter__(self) -> Iterator[Any]:
        Device = _links.Device

        return iter([Device(d) for d in current_peers(self._mr)])

    def __len__(self) -> int:
        return len(current_peers(self._mr))

    def add(self, value: Any) -> None:
        """Grant ``value`` (a Device or ordinal) read-write access to the pool's memory."""
        apply_peer_access(self._mr, grant=(resolve_device(value),))

    def discard(self, value: Any) -> None:
        """Revoke ``value``'s access (nothing for a device without access or a bad value)."""
        d = _resolve_or_none(value)
        if d is not None:
            apply_peer_access(self._mr, revoke=(d,))

    def clear(self) -> None:
        """Revoke every peer's access (one driver call)."""
        apply_peer_access(self._mr, revoke=current_peers(self._mr))

    def update(self, *others: Iterable[Any]) -> None:
        """Grant access to every device of ``others`` (one driver call)."""
        apply_peer_access(self._mr, grant=[resolve_device(v) for other in others for v in other])

    def difference_update(self, *others: Iterable[Any]) -> None:
        """Revoke access from every device of ``others`` (one driver call)."""
        ids = (_resolve_or_none(v) for other in others for v in other)
        apply_peer_access(self._mr, revoke=[d for d in ids if d is not None])

    def intersection_update(self, *others: Iterable[Any]) -> None:
        """Keep access only for devices in every one of ``others`` (one driver call)."""
        if not others:
            return
        keep: set[int] | None = None
        for other in others:
            ids = {d for d in map(_resolve_or_none, other) if d is not None}
            keep = ids if keep is None else keep & ids
        apply_peer_access(
            self._mr, revoke=[d for d in current_peers(self._mr) if d not in (keep or set())]
        )

    def symmetric_difference_update(self, other: Iterable[Any]) -> None:
        """Toggle access for every device of ``other`` (one driver call)."""
        toggle = {d for d in map(_resolve_or_none, other) if d is not None}
        current = set(current_peers(self._mr))
        apply_peer_access(self._mr, grant=sorted(toggle - current), revoke=sorted(toggle & current))

    def __ior__(self, other: Any) -> PeerAccessibleBySetProxy:  # type: ignore[override,misc]
        self.update(other)
        return self

    def __iand__(self, other: Any) -> PeerAccessibleBySetProxy:  # type: ignore[override,misc]
        self.intersection_update(other)
        return self

    def __isub__(self, other: Any) -> PeerAccessibleBySetProxy:  # type: ignore[override,misc]
        if other is self:
            self.clear()
        else:
            self.difference_update(other)
        return self

    def __ixor__(self, other: Any) -> PeerAccessibleBySetProxy:  # type: ignore[override,misc]
        self.symmetric_difference_update(other)
        return self

    def __repr__(self) -> str:
        return f"PeerAccessibleBySetProxy({set(self)!r})"
