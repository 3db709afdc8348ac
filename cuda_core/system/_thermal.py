"""Temperature and cooling of a GPU: :class:`Temperature`, the thermal sensors
(:class:`ThermalSettings`, :class:`ThermalSensor`), the cooler (:class:`CoolerInfo`) and the
fans (:class:`FanInfo`).

:class:`ThermalQueries` holds the :class:`cuda_core.system.Device` members of this concept; the
device class inherits them.
"""

from __future__ import annotations

import ctypes
import warnings
from typing import Any

from .._utils import arg_error, check_int
from ._device_info import StructView, enum_arg, members_from_mask, scalar
from ._nvml import call, nvml
from .typing import (
    CoolerControl,
    CoolerTarget,
    FanControlPolicy,
    TemperatureThresholds,
    ThermalController,
    ThermalTarget,
)

__all__ = [
    "CoolerInfo",
    "FanInfo",
    "Temperature",
    "ThermalQueries",
    "ThermalSensor",
    "ThermalSettings",
]

_THRESHOLDS = {member: i for i, member in enumerate(TemperatureThresholds)}
# Thresholds NVML wants read through field values on Ada and newer (nvmlTemperatureThresholds_t
# 0..3); cuda.core warns when they are read with get_threshold there.
_FIELD_VALUE_THRESHOLDS = frozenset(
    (TemperatureThresholds.SHUTDOWN, TemperatureThresholds.SLOWDOWN,
     TemperatureThresholds.MEM_MAX, TemperatureThresholds.GPU_MAX)
)  # fmt: skip
_ADA = 8  # nvmlDeviceArchitecture_t of Ada
# nvmlThermalTarget_t and nvmlThermalController_t values.
_TARGETS = {
    ThermalTarget.NONE: 0, ThermalTarget.GPU: 1, ThermalTarget.MEMORY: 2,
    ThermalTarget.POWER_SUPPLY: 4, ThermalTarget.BOARD: 8, ThermalTarget.VCD_BOARD: 9,
    ThermalTarget.VCD_INLET: 10, ThermalTarget.VCD_OUTLET: 11, ThermalTarget.ALL: 15,
}  # fmt: skip
_TARGETS_BACK = {v: k for k, v in _TARGETS.items()}
# ThermalController lists NVML's controllers in their order (GPU_INTERNAL = 1 ...), then UNKNOWN.
_CONTROLLERS = {
    i + 1: member
    for i, member in enumerate(ThermalController)
    if member is not ThermalController.UNKNOWN
}
# nvmlCoolerControl_t values and nvmlCoolerTarget_t bits.
_COOLER_CONTROLS = {1: CoolerControl.TOGGLE, 2: CoolerControl.VARIABLE}
_COOLER_TARGETS = {
    1: CoolerTarget.NONE, 2: CoolerTarget.GPU, 4: CoolerTarget.MEMORY, 8: CoolerTarget.POWER_SUPPLY,
}  # fmt: skip
# nvmlFanControlPolicy_t values.
_FAN_POLICIES = {0: FanControlPolicy.TEMPERATURE_CONTROLLED, 1: FanControlPolicy.MANUAL}
_MAX_SENSORS = 3  # NVML_MAX_THERMAL_SENSORS_PER_GPU


class _Sensor(ctypes.Structure):
    # One element of nvmlGpuThermalSettings_t.sensor[] (an anonymous struct in NVML).
    _fields_ = [
        ("controller", ctypes.c_int32),
        ("defaultMinTemp", ctypes.c_int32),
        ("defaultMaxTemp", ctypes.c_int32),
        ("currentTemp", ctypes.c_int32),
        ("target", ctypes.c_int32),
    ]


class ThermalSensor(StructView):
    """One thermal sensor of a :class:`ThermalSettings` (read from its sample; made from the
    entry's address and the structure that owns it). Degrees C."""

    __slots__ = ()
    _layout = _Sensor

    @property
    def controller(self) -> ThermalController:
        """The chip that reads this sensor."""
        return _CONTROLLERS.get(int(self._raw.controller), ThermalController.UNKNOWN)

    @property
    def default_min_temp(self) -> int:
        """The lowest temperature the sensor reports by default, in degrees C."""
        return int(self._raw.defaultMinTemp)

    @property
    def default_max_temp(self) -> int:
        """The highest temperature the sensor reports by default, in degrees C."""
        return int(self._raw.defaultMaxTemp)

    @property
    def current_temp(self) -> int:
        """The reading when the settings were queried, in degrees C."""
        return int(self._raw.currentTemp)

    @property
    def target(self) -> ThermalTarget:
        """What the sensor measures."""
        return _TARGETS_BACK.get(int(self._raw.target), ThermalTarget.NONE)

    def __repr__(self) -> str:
        return f"ThermalSensor(target={self.target.value!r}, current_temp={self.current_temp})"


class ThermalSettings:
    """The thermal sensors :meth:`Temperature.get_thermal_settings` reported: a sequence of
    :class:`ThermalSensor` (at most three)."""

    __slots__ = ("_settings",)

    def __init__(self, thermal_settings: Any) -> None:  # an nvml.GpuThermalSettings
        self._settings = thermal_settings

    def __len__(self) -> int:
        return min(scalar(self._settings.count), _MAX_SENSORS)

    def __getitem__(self, idx: int) -> ThermalSensor:
        return ThermalSensor.element(
            self._settings.sensor, idx, len(self), self._settings, "thermal sensor"
        )


class Temperature:
    """Temperature readings of a GPU in degrees Celsius; each call asks NVML anew.

    Get one from :attr:`cuda_core.system.Device.temperature`.
    """

    __slots__ = ("_handle",)

    def __init__(self, handle: int) -> None:
        self._handle = handle

    def get_sensor(self) -> int:
        """The GPU core temperature, in degrees Celsius.

        Returns
        -------
        int
            The temperature in degrees Celsius.
        """
        return int(call(nvml.device_get_temperature_v, self._handle, 0))  # NVML_TEMPERATURE_GPU

    def get_threshold(self, threshold_type: TemperatureThresholds | str) -> int:
        """A temperature threshold of this GPU (``"slowdown"``, ``"shutdown"``, ...), in degrees C.

        On Ada and newer GPUs NVML prefers the ``FieldId.DEV_TEMPERATURE_*`` field values
        (:meth:`cuda_core.system.Device.get_field_values`) for ``shutdown``, ``slowdown``,
        ``mem_max`` and ``gpu_max``; reading those here warns with a
        :class:`DeprecationWarning` there, as ``cuda.core`` does.

        Parameters
        ----------
        threshold_type : TemperatureThresholds or str
            Which threshold.

        Returns
        -------
        int
            The threshold in degrees Celsius.

        Raises
        ------
        ValueError
            An unknown threshold type.
        """
        t = enum_arg(
            "threshold_type",
            threshold_type,
            TemperatureThresholds,
            _THRESHOLDS,
            "Invalid temperature threshold type",
        )
        member = TemperatureThresholds(threshold_type)
        if member in _FIELD_VALUE_THRESHOLDS:
            if int(call(nvml.device_get_architecture, self._handle)) >= _ADA:
                warnings.warn(
                    f"get_threshold is no longer recommended for the {member.value!r} temperature "
                    "threshold on Ada and newer GPUs (deprecated there): use "
                    "Device.get_field_values with the FieldId.DEV_TEMPERATURE_* fields",
                    DeprecationWarning,
                    stacklevel=2,
                )
        return int(call(nvml.device_get_temperature_threshold, self._handle, t))

    @property
    def margin(self) -> int:
        """Degrees Celsius left before the nearest slowdown threshold."""
        return int(call(nvml.device_get_margin_temperature, self._handle))

    def get_thermal_settings(self, sensor_index: ThermalTarget | str) -> ThermalSettings:
        """The thermal sensors of this GPU for one target (``"gpu"``, ``"memory"``, ``"all"``,
        ...), with their readings.

        Parameters
        ----------
        sensor_index : ThermalTarget or str
            The sensor target.

        Returns
        -------
        ThermalSettings
            The sensors, with their controller, range and current reading.

        Raises
        ------
        ValueError
            An unknown target.
        """
        target = enum_arg(
            "sensor_index", sensor_index, ThermalTarget, _TARGETS, "Invalid thermal sensor index"
        )
        return ThermalSettings(call(nvml.device_get_thermal_settings, self._handle, target))


class CoolerInfo:
    """The cooler of a GPU (a snapshot); boards without fans answer
    :class:`~cuda_core.system.NotSupportedError` when it is read."""

    __slots__ = ("_signal", "_target")

    def __init__(self, cooler_info: Any) -> None:  # an nvml.CoolerInfo_v1
        self._signal = scalar(cooler_info.signal_type)
        self._target = scalar(cooler_info.target)

    @property
    def signal_type(self) -> CoolerControl | None:
        """How the cooler is driven (``TOGGLE`` or ``VARIABLE``); ``None`` if NVML does not say."""
        return _COOLER_CONTROLS.get(self._signal)

    @property
    def target(self) -> list[CoolerTarget]:
        """What the cooler cools (GPU, memory, power supply, or several of these)."""
        return members_from_mask(self._target, _COOLER_TARGETS, "cooler target")

    def __repr__(self) -> str:
        return (
            f"CoolerInfo(signal_type={self.signal_type}, target={[t.value for t in self.target]})"
        )


class FanInfo:
    """One fan of a GPU's board; each property asks NVML anew.

    Get one from :meth:`cuda_core.system.Device.get_fan`. Speeds are percent of the board's
    maximum noise-tolerant speed (possibly above 100) unless said otherwise.
    """

    __slots__ = ("_fan", "_handle")

    def __init__(self, handle: int, fan: int) -> None:
        self._handle = handle
        self._fan = fan

    @property
    def speed(self) -> int:
        """The fan's intended speed in percent (a blocked fan is not detected). Setting it
        switches the fan to manual control (root only; watch the temperature yourself)."""
        return int(call(nvml.device_get_fan_speed_v2, self._handle, self._fan))

    @speed.setter
    def speed(self, speed: int) -> None:
        value = check_int("speed", speed, 0)
        call(nvml.device_set_fan_speed_v2, self._handle, self._fan, value)

    @property
    def speed_rpm(self) -> int:
        """The fan's intended speed in rotations per minute (Maxwell or newer)."""
        return int(call(nvml.device_get_fan_speed_rpm, self._handle, self._fan))

    @property
    def target_speed(self) -> int:
        """The speed the driver steers the fan towards, in percent."""
        return int(call(nvml.device_get_target_fan_speed, self._handle, self._fan))

    @property
    def min_max_speed(self) -> tuple[int, int]:
        """``(min, max)``: the range :attr:`speed` may be set to, in percent (all fans)."""
        lo, hi = call(nvml.device_get_min_max_fan_speed, self._handle)
        return (int(lo), int(hi))

    @property
    def control_policy(self) -> FanControlPolicy:
        """The fan's control policy, ``TEMPERATURE_CONTROLLED`` (set by the driver) or ``MANUAL``."""
        value = int(call(nvml.device_get_fan_control_policy_v2, self._handle, self._fan))
        try:
            return _FAN_POLICIES[value]
        except KeyError:
            raise ValueError(f"NVML reported an unknown fan control policy {value}") from None

    def set_default_speed(self) -> None:
        """Give the fan back to the driver's default control (root only).

        Returns
        -------
        None
        """
        call(nvml.device_set_default_fan_speed_v2, self._handle, self._fan)

    def __repr__(self) -> str:
        return f"FanInfo(fan={self._fan})"


class ThermalQueries:
    """The temperature and cooling members of :class:`cuda_core.system.Device`."""

    __slots__ = ()
    _handle: int

    @property
    def temperature(self) -> Temperature:
        """A :class:`Temperature` for this GPU's temperature readings."""
        return Temperature(self._handle)

    @property
    def cooler(self) -> CoolerInfo:
        """The cooler of this GPU, a :class:`CoolerInfo` (Maxwell or newer; boards without
        fans answer :class:`~cuda_core.system.NotSupportedError`)."""
        return CoolerInfo(call(nvml.device_get_cooler_info, self._handle))

    @property
    def num_fans(self) -> int:
        """The number of fans on this GPU's board (0 for passively cooled boards)."""
        return int(call(nvml.device_get_num_fans, self._handle))

    def get_fan(self, fan: int = 0) -> FanInfo:
        """A :class:`FanInfo` for one fan of this GPU's board.

        Parameters
        ----------
        fan : int, optional
            The fan, ``0`` (default) to :attr:`num_fans` ``- 1``.

        Returns
        -------
        FanInfo
            Queries of that fan.

        Raises
        ------
        TypeError
            ``fan`` is not an int.
        ValueError
            The board has no fan ``fan`` (passively cooled boards have none).
        """
        index = check_int("fan", fan)
        count = self.num_fans
        if not 0 <= index < count:
            rule = (
                f"a fan index from 0 to {count - 1}"
                if count
                else "a fan index, but this device has no fans"
            )
            raise arg_error("fan", rule, fan)
        return FanInfo(self._handle, index)
