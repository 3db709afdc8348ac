"""Device resources for green contexts: SM partitions and work-queue configurations.

``Device.resources``, ``Context.resources`` and ``Stream.resources`` return a
:class:`DeviceResources` namespace; its :attr:`~DeviceResources.sm` is an :class:`SMResource`
that :meth:`SMResource.split` partitions into disjoint groups of SMs, and its
:attr:`~DeviceResources.workqueue` a :class:`WorkqueueResource` (CUDA 13.1+). A list of them in
:class:`~cuda_core.ContextOptions` makes a green context (:meth:`Device.create_context`).

Driver facts: ``cuDeviceGetDevResource`` / ``cuCtxGetDevResource`` / ``cuGreenCtxGetDevResource``
read resources; ``cuDevSmResourceSplit`` (CUDA 13.1+, per-group counts and co-scheduling) or
``cuDevSmResourceSplitByCount`` (CUDA 12.4+, equal groups) partitions them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _links
from ._compat import driver, has, missing, require
from ._errors import CUDAError
from ._utils import arg_error, check_or_create_options, handle_return
from .typing import WorkqueueSharingScopeType

if TYPE_CHECKING:
    from ._device import Device
    from .typing import WorkqueueSharingScopeType

__all__ = [
    "DeviceResources",
    "SMResource",
    "SMResourceOptions",
    "WorkqueueResource",
    "WorkqueueResourceOptions",
]

_TYPES = driver.CUdevResourceType
_SM = _TYPES.CU_DEV_RESOURCE_TYPE_SM
_WQ_CONFIG = getattr(_TYPES, "CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG", None)
_WQ = getattr(_TYPES, "CU_DEV_RESOURCE_TYPE_WORKQUEUE", None)
_SCOPES = getattr(driver, "CUdevWorkqueueConfigScope", None)
_BACKFILL = getattr(
    getattr(driver, "CUdevSmResourceGroup_flags", None), "CU_DEV_SM_RESOURCE_GROUP_BACKFILL", 1
)
_INVALID_CONFIG = driver.CUresult.CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION


def require_green_contexts() -> None:
    """Raise ``NotImplementedError`` unless the driver and bindings have green contexts (12.4+)."""
    require("green contexts", bindings=(12, 4), driver=(12, 4))


def _require_workqueue() -> None:
    require_green_contexts()
    require("WorkqueueResource", bindings=(13, 1), driver=(13, 1))
    if _WQ_CONFIG is None:
        raise NotImplementedError(
            "WorkqueueResource needs cuda-bindings with CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG"
        )


def _structured_split() -> bool:
    return has("cuDevSmResourceSplit")


def _needs_structured_split(feature: str) -> NotImplementedError:
    """The error for a split only ``cuDevSmResourceSplit`` (CUDA 13.1) can make."""
    why = missing(feature, bindings=(13, 1), driver=(13, 1))
    return NotImplementedError(why or f"{feature} needs cuDevSmResourceSplit (CUDA 13.1)")


# ---------------------------------------------------------------------------------------------
# Options.


def _is_sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray))


@dataclass
class SMResourceOptions:
    """Options for :meth:`SMResource.split`.

    Each field is a scalar (one group) or a sequence (one entry per group). ``count`` sets the
    number of groups: a scalar or ``None`` makes one group, a sequence ``len(count)`` groups;
    the other fields, when sequences, must have the same length. The values are checked by
    :meth:`SMResource.split` (as in ``cuda.core``).

    Attributes
    ----------
    count : int or sequence of int, optional
        SMs per group. ``None`` (or 0): discovery, the driver picks the count.
    coscheduled_sm_count : int or sequence of int, optional
        SMs guaranteed to be co-scheduled together in each group (CUDA 13.1+).
    preferred_coscheduled_sm_count : int or sequence of int, optional
        Preferred co-scheduled SM count; the driver falls back to ``coscheduled_sm_count``
        (CUDA 13.1+).
    backfill : bool or sequence of bool
        Let the driver relax co-scheduling to reach counts that are not multiples of the
        co-scheduling alignment (CUDA 13.1+; default ``False``).
    """

    count: int | Sequence[int] | None = None
    coscheduled_sm_count: int | Sequence[int] | None = None
    preferred_coscheduled_sm_count: int | Sequence[int] | None = None
    backfill: bool | Sequence[bool] = False

    def _groups(self) -> list[tuple[int, int, int, bool]]:
        """(count, coscheduled, preferred, backfill) per group, checked (0: driver's choice)."""
        count: Any = self.count
        if count is None or (isinstance(count, int) and not isinstance(count, bool)):
            n, scalar = 1, True
        elif _is_sequence(count):
            n, scalar = len(count), False
            if n == 0:
                raise arg_error(
                    "count",
                    "a non-empty sequence, an int or None",
                    count,
                    lead="count sequence must not be empty",
                )
        else:
            raise arg_error(
                "count",
                "an int, a sequence of ints or None",
                count,
                exc=TypeError,
                lead=f"count must be int, Sequence, or None, got {type(count).__name__}",
            )
        fields = {}
        for name in ("count", "coscheduled_sm_count", "preferred_coscheduled_sm_count", "backfill"):
            value: Any = getattr(self, name)
            if _is_sequence(value):
                if scalar:
                    raise arg_error(
                        name,
                        "a scalar, as count is scalar (make count a sequence for several groups)",
                        value,
                        lead=f"{name} is a Sequence but count is scalar; count must be a "
                        "Sequence to specify multiple groups",
                    )
                if len(value) != n:
                    raise arg_error(
                        name,
                        f"a sequence as long as count: expected {n} entries, one per group",
                        value,
                        lead=f"{name} has length {len(value)}, expected {n} (must match count)",
                    )
                items = list(value)
            else:
                items = [value] * n
            fields[name] = [_check_field(name, v) for v in items]
        return list(zip(fields["count"], fields["coscheduled_sm_count"], fields["preferred_coscheduled_sm_count"],
                        fields["backfill"]))  # type: ignore[arg-type]  # fmt: skip


def _check_field(name: str, value: Any) -> int | bool:
    if name == "backfill":
        if not isinstance(value, bool):
            raise arg_error(name, "a bool or a sequence of bools", value, exc=TypeError)
        return value
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise arg_error(
            name, "None, a non-negative int or a sequence of them", value, exc=TypeError
        )
    if value < 0:
        raise arg_error(
            name, "non-negative", value, lead=f"{name} must be non-negative, got {value}"
        )
    return value


@dataclass
class WorkqueueResourceOptions:
    """Options for :meth:`WorkqueueResource.configure`.

    Attributes
    ----------
    sharing_scope : WorkqueueSharingScopeType or str, optional
        ``"device_ctx"`` (work queues shared with the whole device) or
        ``"green_ctx_balanced"`` (balanced across green contexts). ``None``: unchanged.
    concurrency_limit : int, optional
        Expected maximum number of concurrent stream-ordered workloads, ``>= 1``. The driver
        caps it at ``CUDA_DEVICE_MAX_CONNECTIONS``. ``None``: unchanged.
    """

    sharing_scope: WorkqueueSharingScopeType | str | None = None
    concurrency_limit: int | None = None

    def __post_init__(self) -> None:
        if self.sharing_scope is not None:
            try:
                WorkqueueSharingScopeType(self.sharing_scope)
            except ValueError:
                # cuda.core's wording, which code written for it may match on
                raise ValueError(
                    f"{self.sharing_scope!r} is not a valid WorkqueueSharingScopeType. "
                    "Must be None, 'device_ctx' or 'green_ctx_balanced'"
                ) from None
        if self.concurrency_limit is not None:
            try:
                limit = int(self.concurrency_limit)
            except (TypeError, ValueError):
                raise arg_error(
                    "concurrency_limit",
                    "None or an int >= 1",
                    self.concurrency_limit,
                    exc=TypeError,
                ) from None
            if limit < 1:
                raise arg_error("concurrency_limit", ">= 1", self.concurrency_limit)
            self.concurrency_limit = limit


# ---------------------------------------------------------------------------------------------
# Resources.


class SMResource:
    """A set of SMs: a whole device's or context's, or one group of :meth:`split`.

    Obtained from :attr:`DeviceResources.sm` or :meth:`split`; not constructed directly. The
    object owns a copy of the driver's ``CUdevResource`` struct (:attr:`handle` is its address).
    """

    __slots__ = ("_device_id", "_res", "_usable")

    _res: Any  # driver.CUdevResource
    _device_id: int
    _usable: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "SMResource cannot be instantiated directly. Use dev.resources.sm or SMResource.split()"
        )

    @classmethod
    def _wrap(cls, res: Any, device_id: int, usable: bool = True) -> SMResource:
        self = object.__new__(cls)
        self._res = res
        self._device_id = device_id
        self._usable = usable
        return self

    @property
    def handle(self) -> int:
        """The address of the ``CUdevResource`` struct this object owns."""
        return int(self._res.getPtr())

    @property
    def sm_count(self) -> int:
        """The number of SMs in this resource."""
        return int(self._res.sm.smCount)

    @property
    def min_partition_size(self) -> int:
        """The smallest SM count a partition of this resource can have."""
        value = int(getattr(self._res.sm, "minSmPartitionSize", 0) or 0)
        return value or _granularity(self._device_id)

    @property
    def coscheduled_alignment(self) -> int:
        """The number of SMs guaranteed to be co-scheduled together (partitions are multiples)."""
        value = int(getattr(self._res.sm, "smCoscheduledAlignment", 0) or 0)
        return value or self.min_partition_size

    @property
    def flags(self) -> int:
        """The raw flags of the driver's SM resource."""
        return int(getattr(self._res.sm, "flags", 0) or 0)

    @property
    def device_id(self) -> int:
        """The ordinal of the device the SMs belong to."""
        return self._device_id

    def split(
        self, options: SMResourceOptions, *, dry_run: bool = False
    ) -> tuple[list[SMResource], SMResource]:
        """Split this resource into disjoint groups of SMs and a remainder.

        Parameters
        ----------
        options : SMResourceOptions or dict
            The groups: their SM counts and co-scheduling constraints.
        dry_run : bool, optional
            Keyword-only. Return the groups' metadata (SM counts) only: the results cannot
            make a context.

        Returns
        -------
        tuple
            ``(groups, remainder)``, a list of :class:`SMResource` and an :class:`SMResource`:
            each group holds SMs no other group holds; the remainder
            holds those left over (perhaps none). With the CUDA 12 split API the driver may
            return fewer groups than asked for when the SMs run out.

        Raises
        ------
        TypeError, ValueError
            Malformed options.
        CUDAError
            More SMs asked for than this resource has, or a configuration the driver refuses
            (``CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION``).
        NotImplementedError
            The driver or bindings lack green contexts (CUDA 12.4), or the options need the
            CUDA 13.1 split API (per-group counts, co-scheduling, backfill).
        """
        if options is None:
            raise arg_error("options", "an SMResourceOptions or a dict", options, exc=TypeError)
        opts = check_or_create_options(SMResourceOptions, options, "options")
        groups = opts._groups()
        if not self._usable:
            raise ValueError(
                "this SMResource came from a dry-run split: split the real resource instead"
            )
        require_green_contexts()
        asked = sum(g[0] for g in groups)
        if asked > self.sm_count:
            raise CUDAError(
                "SMResource.split",
                _INVALID_CONFIG.name,
                f"the groups ask for {asked} SMs in all but this resource has {self.sm_count}",
                int(_INVALID_CONFIG),
            )
        if _structured_split():
            return self._split_structured(groups, dry_run)
        return self._split_by_count(groups, dry_run)

    def _split_structured(
        self, groups: list[tuple[int, int, int, bool]], dry_run: bool
    ) -> tuple[list[SMResource], SMResource]:
        params = []
        for count, cosched, preferred, backfill in groups:
            p = driver.CU_DEV_SM_RESOURCE_GROUP_PARAMS()
            p.smCount = count
            p.coscheduledSmCount = cosched
            p.preferredCoscheduledSmCount = preferred
            p.flags = int(_BACKFILL) if backfill else 0
            params.append(p)
        result, remainder = handle_return(
            driver.cuDevSmResourceSplit(len(params), self._res, 0, params), "cuDevSmResourceSplit"
        )
        usable = not dry_run
        return [SMResource._wrap(r, self._device_id, usable) for r in result], SMResource._wrap(
            remainder, self._device_id, usable
        )

    def _split_by_count(
        self, groups: list[tuple[int, int, int, bool]], dry_run: bool
    ) -> tuple[list[SMResource], SMResource]:
        counts = {g[0] for g in groups}
        if any(g[1] or g[2] for g in groups):
            raise _needs_structured_split(
                "SMResource.split with coscheduled_sm_count or preferred_coscheduled_sm_count"
            )
        if any(g[3] for g in groups):
            raise _needs_structured_split("SMResource.split with backfill")
        if len(counts) > 1:
            raise _needs_structured_split(
                "SMResource.split into groups of different SM counts (give one count for all)"
            )
        result, n, remainder = handle_return(
            driver.cuDevSmResourceSplitByCount(len(groups), self._res, 0, counts.pop()),
            "cuDevSmResourceSplitByCount",
        )
        usable = not dry_run
        return [
            SMResource._wrap(r, self._device_id, usable) for r in list(result)[: int(n)]
        ], SMResource._wrap(remainder, self._device_id, usable)

    def __repr__(self) -> str:
        return f"<SMResource sm_count={self.sm_count} device={self._device_id}>"


def _granularity(device_id: int) -> int:
    """The SM partition granularity by architecture (drivers that do not report it)."""
    major = int(
        handle_return(
            driver.cuDeviceGetAttribute(
                driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                driver.CUdevice(device_id),
            ),
            "cuDeviceGetAttribute",
        )
    )
    return 8 if major >= 9 else 2


class WorkqueueResource:
    """The work-queue configuration of a device or green context (CUDA 13.1+).

    Obtained from :attr:`DeviceResources.workqueue`; not constructed directly. It merges the
    driver's ``CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG`` and ``CU_DEV_RESOURCE_TYPE_WORKQUEUE``
    resources; :meth:`configure` edits the configuration in place before it is passed to
    :class:`~cuda_core.ContextOptions`.
    """

    __slots__ = ("_config", "_device_id", "_wq")

    _config: Any
    _wq: Any
    _device_id: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "WorkqueueResource cannot be instantiated directly. Use dev.resources.workqueue"
        )

    @classmethod
    def _wrap(cls, config: Any, wq: Any, device_id: int) -> WorkqueueResource:
        self = object.__new__(cls)
        self._config = config
        self._wq = wq
        self._device_id = device_id
        return self

    @property
    def handle(self) -> int:
        """The address of the configuration ``CUdevResource`` struct this object owns."""
        return int(self._config.getPtr())

    @property
    def sharing_scope(self) -> WorkqueueSharingScopeType:
        """The sharing scope (see :class:`WorkqueueResourceOptions`)."""

        scope = int(self._config.wqConfig.sharingScope)
        if _SCOPES is not None and scope == int(_SCOPES.CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED):
            return WorkqueueSharingScopeType.GREEN_CTX_BALANCED
        return WorkqueueSharingScopeType.DEVICE_CTX

    @property
    def concurrency_limit(self) -> int:
        """The expected maximum number of concurrent stream-ordered workloads."""
        return int(self._config.wqConfig.wqConcurrencyLimit)

    @property
    def device(self) -> Device:
        """The :class:`~cuda_core.Device` the work queues are on."""
        Device = _links.Device

        return Device(self._device_id)

    def configure(self, options: WorkqueueResourceOptions) -> None:
        """Change the configuration in place (fields left ``None`` are unchanged).

        Raises
        ------
        TypeError, ValueError
            Malformed options.
        """
        if options is None:
            raise arg_error(
                "options", "a WorkqueueResourceOptions or a dict", options, exc=TypeError
            )
        opts = check_or_create_options(WorkqueueResourceOptions, options, "options")
        _require_workqueue()
        cfg = self._config.wqConfig
        scopes: Any = _SCOPES
        if opts.sharing_scope is not None:
            balanced = str(opts.sharing_scope) == "green_ctx_balanced"
            cfg.sharingScope = (
                scopes.CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED
                if balanced
                else scopes.CU_WORKQUEUE_SCOPE_DEVICE_CTX
            )
        if opts.concurrency_limit is not None:
            cfg.wqConcurrencyLimit = int(opts.concurrency_limit)

    def __repr__(self) -> str:
        return f"<WorkqueueResource device={self._device_id}>"


class DeviceResources:
    """The resources of a device, or those provisioned for a context or a stream's context.

    From :attr:`Device.resources` (the whole device), :attr:`Context.resources` and
    :attr:`Stream.resources` (a green context's own partition). Each property queries the
    driver when read. Not constructed directly.
    """

    __slots__ = ("_device_id", "_source")

    _source: Any  # ("device", None) | ("ctx", CUcontext) | ("green", CUgreenCtx)
    _device_id: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "DeviceResources cannot be instantiated directly. Use dev.resources or ctx.resources"
        )

    @classmethod
    def _of(cls, device_id: int, kind: str = "device", handle: Any = None) -> DeviceResources:
        self = object.__new__(cls)
        self._device_id = device_id
        self._source = (kind, handle)
        return self

    def _query(self, typename: Any) -> Any:
        kind, handle = self._source
        if kind == "green":
            return handle_return(
                driver.cuGreenCtxGetDevResource(handle, typename), "cuGreenCtxGetDevResource"
            )
        if kind == "ctx":
            return handle_return(
                driver.cuCtxGetDevResource(handle, typename), "cuCtxGetDevResource"
            )
        dev = driver.CUdevice(self._device_id)
        return handle_return(driver.cuDeviceGetDevResource(dev, typename), "cuDeviceGetDevResource")

    @property
    def sm(self) -> SMResource:
        """The :class:`SMResource` of this device or context."""
        require_green_contexts()
        return SMResource._wrap(self._query(_SM), self._device_id)

    @property
    def workqueue(self) -> WorkqueueResource:
        """The :class:`WorkqueueResource` of this device or context (CUDA 13.1+)."""
        _require_workqueue()
        return WorkqueueResource._wrap(self._query(_WQ_CONFIG), self._query(_WQ), self._device_id)

    def __repr__(self) -> str:
        return f"<DeviceResources of {self._source[0]} on device {self._device_id}>"
