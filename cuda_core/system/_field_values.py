"""NVML field values: many device counters and facts read (or cleared) in one call.

:meth:`cuda_core.system.Device.get_field_values` takes field ids (``FieldId`` members, i.e.
``cuda.bindings.nvml.FieldId``, or ``(field_id, scope_id)`` pairs, where the scope is e.g. an
NVLink link) and returns :class:`FieldValues`. NVML answers each field on its own: one field
may fail while the others succeed, so a failed field raises only when its ``value`` is read
(or on :meth:`FieldValues.validate`). :class:`FieldValueQueries` holds the device members.
"""

from __future__ import annotations

from typing import Any

from .._utils import TypeValueError, arg_error, check_int
from ._device_info import scalar, sequence_index
from ._nvml import call, nvml, raise_for_status

__all__ = ["FieldValue", "FieldValueQueries", "FieldValues"]

_API = "nvmlDeviceGetFieldValues"
# nvmlValueType_t -> the member of nvmlValue_t that holds the value, and its Python type.
_VALUE_MEMBERS: dict[int, tuple[str, type]] = {
    0: ("d_val", float),
    1: ("ui_val", int),
    2: ("ul_val", int),
    3: ("ull_val", int),
    4: ("sll_val", int),
    5: ("si_val", int),
    6: ("us_val", int),
}


def _field_id(value: int) -> Any:
    # A FieldId member where the installed bindings know the id (a newer driver may not).
    try:
        return nvml.FieldId(value)
    except (AttributeError, ValueError):
        return value


class FieldValue:
    """One field of :class:`FieldValues` (a snapshot of NVML's answer).

    Parameters
    ----------
    field_value : cuda.bindings.nvml.FieldValue
        A one-element NVML field-value array.
    """

    __slots__ = ("_raw",)

    def __init__(self, field_value: Any) -> None:
        if len(field_value) != 1:
            raise arg_error("field_value", "a one-element nvml.FieldValue", field_value)
        self._raw = field_value

    @property
    def field_id(self) -> Any:
        """The field, as a ``FieldId`` member (a plain ``int`` for ids the bindings do not know)."""
        return _field_id(scalar(self._raw.field_id))

    @property
    def scope_id(self) -> int:
        """The scope the field was read for (e.g. the NVLink link; 0 where none applies)."""
        return scalar(self._raw.scope_id)

    @property
    def timestamp(self) -> int:
        """When NVML sampled the value, in microseconds since 1970 (CPU clock)."""
        return scalar(self._raw.timestamp)

    @property
    def latency_usec(self) -> int:
        """How long NVML took to update the value, in microseconds (may be averaged over the
        fields served by one driver call)."""
        return scalar(self._raw.latency_usec)

    def _check(self) -> None:
        """Raise the field's NVML error, if NVML could not read it (the message only then)."""
        status = scalar(self._raw.nvml_return)
        if status:
            raise_for_status(status, _API, self._what())

    @property
    def value(self) -> int | float:
        """The value (an ``int``, or a ``float`` for floating-point fields).

        Raises the field's own NVML error (e.g. :class:`~cuda_core.system.NotSupportedError`)
        when NVML could not read it.
        """
        self._check()
        kind = scalar(self._raw.value_type)
        try:
            member, convert = _VALUE_MEMBERS[kind]
        except KeyError:
            raise ValueError(
                f"NVML reported an unknown value type {kind} for field {self.field_id!r}"
            ) from None
        raw = getattr(self._raw.value, member)
        item = getattr(raw, "item", None)
        return convert(item() if item is not None else raw)

    def _what(self) -> str:
        fid = self.field_id
        name = getattr(fid, "name", None)
        return f"field {name or fid} ({int(fid)}), scope {self.scope_id}"

    def __repr__(self) -> str:
        return f"FieldValue(field_id={self.field_id!r}, scope_id={self.scope_id})"


class FieldValues:
    """The fields one :meth:`cuda_core.system.Device.get_field_values` call read: a sequence
    of :class:`FieldValue`, in the order they were asked for.

    Parameters
    ----------
    field_values : cuda.bindings.nvml.FieldValue
        The NVML field-value array.
    """

    __slots__ = ("_raw",)

    def __init__(self, field_values: Any) -> None:
        self._raw = field_values

    def __len__(self) -> int:
        return 0 if self._raw is None else len(self._raw)

    def __getitem__(self, idx: int) -> FieldValue:
        i = sequence_index(idx, len(self), "field value")
        return FieldValue(self._raw[i])

    def validate(self) -> None:
        """Raise the NVML error of the first field NVML could not read, if any.

        Returns
        -------
        None

        Raises
        ------
        NvmlError
            The first failed field's error (e.g. :class:`~cuda_core.system.NotSupportedError`).
        """
        for i in range(len(self)):
            self[i]._check()

    def get_all_values(self) -> list[int | float]:
        """The values of every field, in order.

        Returns
        -------
        list of int or float
            One value per field.

        Raises
        ------
        NvmlError
            The first failed field's error.
        """
        return [self[i].value for i in range(len(self))]

    def __repr__(self) -> str:
        return f"FieldValues({[self[i].field_id for i in range(len(self))]!r})"


def _field_ids(field_ids: Any) -> list[Any]:
    """``field_ids`` checked and normalised to ``(field_id, scope_id)`` pairs, scope 0 where none
    is given: cuda-bindings 13.3 leaves the scope of a bare field id uninitialised, and NVML then
    refuses a scoped field such as ``DEV_POWER_INSTANT`` (seen on an H100, driver 580)."""
    rule = "a list of FieldId values or (FieldId, scope_id) pairs"
    if isinstance(field_ids, (str, bytes)) or not hasattr(field_ids, "__iter__"):
        raise arg_error("field_ids", rule, field_ids, exc=TypeValueError)
    out: list[Any] = []
    for i, item in enumerate(field_ids):
        name = f"field_ids[{i}]"
        if isinstance(item, tuple):
            if len(item) != 2:
                raise arg_error(name, "a (field_id, scope_id) pair", item, exc=TypeValueError)
            fid, scope = item
            out.append((_nonnegative(name + "[0]", fid), _nonnegative(name + "[1]", scope)))
        else:
            out.append((_nonnegative(name, item), 0))
    return out


def _nonnegative(name: str, value: Any) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise arg_error(name, "an int (a FieldId value)", value, exc=TypeValueError)
    return check_int(name, value, 0)


class FieldValueQueries:
    """The field-value members of :class:`cuda_core.system.Device`."""

    __slots__ = ()
    _handle: int

    def get_field_values(self, field_ids: list[int | tuple[int, int]]) -> FieldValues:
        """Read several NVML fields of this GPU in one call.

        Each field succeeds or fails on its own: a failed field raises its NVML error when its
        ``value`` is read; :meth:`FieldValues.validate` checks them all.

        Parameters
        ----------
        field_ids : list of FieldId or tuple of FieldId and int
            The fields, each a ``FieldId`` member (``cuda_core.system.typing.FieldId``, which is
            ``cuda.bindings.nvml.FieldId``) or a ``(field_id, scope_id)`` pair. An empty list
            gives an empty result without asking NVML.

        Returns
        -------
        FieldValues
            One :class:`FieldValue` per requested field, in order.

        Raises
        ------
        TypeError, ValueError
            ``field_ids`` is not a list of field ids or pairs (the error is both classes).

        Examples
        --------
        >>> from cuda_core.system import Device
        >>> from cuda_core.system.typing import FieldId
        >>> values = Device(index=0).get_field_values([FieldId.DEV_NVLINK_LINK_COUNT])  # doctest: +SKIP
        >>> values[0].value  # doctest: +SKIP
        18
        """
        ids = _field_ids(field_ids)
        if not ids:
            return FieldValues(None)
        return FieldValues(call(nvml.device_get_field_values, self._handle, ids))

    def clear_field_values(self, field_ids: list[int | tuple[int, int]]) -> None:
        """Reset several NVML fields (counters) of this GPU in one call.

        Parameters
        ----------
        field_ids : list of FieldId or tuple of FieldId and int
            The fields, as for :meth:`get_field_values`. An empty list does nothing.

        Returns
        -------
        None

        Raises
        ------
        TypeError, ValueError
            ``field_ids`` is not a list of field ids or pairs.
        NvmlError
            NVML refused (e.g. :class:`~cuda_core.system.NotSupportedError` for a field that
            cannot be cleared, :class:`~cuda_core.system.NoPermissionError` without root).
        """
        ids = _field_ids(field_ids)
        if ids:
            call(nvml.device_clear_field_values, self._handle, ids)
