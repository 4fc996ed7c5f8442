"""The real GPUs, through NVML (NVIDIA's ``nvidia-ml-py``, imported as ``pynvml``).

This is the only module that imports ``pynvml``, and only when a backend is opened: never at
import. Every ``NVMLError`` becomes a value: a field NVML refuses is ``None`` with the reason in
``unavailable`` (``"Not Supported"``), a GPU that fell off the bus is ``state="lost"``, and a
failed ``nvmlInit`` is ``NvmlUnavailable`` with a reason the API shows (the caller serves the
no-GPU state). Problems are logged once when they start, not every tick.

It reads the groups of ``readings/catalog.py`` (``read_group``). Per tick and device, the fast
group (each call 1 to 6 us on an H200 with driver 580, except the process list): utilization,
memory, power, enforced power limit, temperature, SM clock and the compute and graphics
processes. The ``pcie`` group is PCIe throughput (21 ms per call there: NVML samples a 20 ms
window); ``gpm`` is SM/tensor/DRAM activity (GPM, Hopper and newer, 0.5 to 3.4 ms per GPU);
``nvlink`` is NVLink data throughput from NVML's field values (``nvlink.py``).
Every read is of one device and group, so that the sampler can give each its own thread and
deadline (``deadline.py``): a call hung on one GPU never holds up another's.

Memory is NVML's v2 memory info (``nvmlDeviceGetMemoryInfo_v2``), whose ``used`` is what
``nvidia-smi`` shows: v1's ``used`` also counts memory the driver reserves (11,382 MiB where
``nvidia-smi`` said 10,767 on an H200). Where v2 is missing (older drivers or nvidia-ml-py), a
GPU falls back to v1 once, and says so in the log.

With MIG mode on, each MIG instance is a device of its own: its memory and processes are its
own; NVML gives no utilization (nor power or temperature) for an instance, so those read
``None`` with ``unavailable`` saying "Not Supported".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from jupyter_gpu.nvml.gpm import GpmReader
from jupyter_gpu.nvml.nvlink import NvlinkReader
from jupyter_gpu.nvml.session import CALLS_OUT, Closed, NvmlSession, Stuck
from jupyter_gpu.nvml.topology import read_with
from jupyter_gpu.readings.backend import Backend
from jupyter_gpu.readings.deadline import (
    NOT_RESPONDING_MESSAGE,
    READ_DEADLINE_S,
    DeadlineReader,
    not_responding,
)
from jupyter_gpu.readings.records import (
    BackendInfo,
    BackendName,
    DeviceInfo,
    GroupReading,
    MigInfo,
    ProcessSample,
)
from jupyter_gpu.readings.topology import Topology

T = TypeVar("T")

LOST_MESSAGE = (
    "NVML reports this GPU as lost (it fell off the bus or stopped answering); "
    "its processes have likely failed, and it needs a reset or a reboot"
)


class NvmlUnavailable(Exception):
    """NVML cannot be used here; ``reason`` says why in words the API can show."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Lost(Exception):
    """A read met NVML_ERROR_GPU_IS_LOST: the rest of this device's reads are pointless."""


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _init_failure_reason(nvml: Any, err: Exception) -> str:
    code = getattr(err, "value", None)
    if code == nvml.NVML_ERROR_LIBRARY_NOT_FOUND:
        return "NVML Shared Library Not Found"
    if code == nvml.NVML_ERROR_DRIVER_NOT_LOADED:
        return "NVIDIA driver is not loaded"
    if code == nvml.NVML_ERROR_NO_PERMISSION:
        return "No permission to use NVML (Insufficient Permissions)"
    if code == nvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return "NVML and the NVIDIA kernel driver differ in version (reload the driver or reboot)"
    return f"NVML failed to initialise: {err}"


class NvmlBackend(Backend):
    """Reads every GPU NVML sees, one device per call (the sampler reads each in its own thread).

    Every call on a GPU goes through the session (``nvml_calls.py``) and is counted while it is
    out: a GPU whose call of one kind (fast, GPM, PCIe, open) has been out past ``deadline_s``
    is not asked for that kind again until it returns (a fast read then answers "not
    responding" at once), and ``close`` never waits for a call. NVML has one ``nvmlShutdown``
    for every GPU, and calling it while a call is out could wait on that call or pull the
    library from under it: so ``close`` frees what the other GPUs hold (their GPM buffers) at
    once, and ``nvmlShutdown`` runs when the last call out returns (at once when none is out).
    A call that never returns leaves NVML to the process's exit.

    Opening reads each GPU (its handle, MIG instances, identity) in its own thread too: a GPU
    that does not answer within ``deadline_s`` is a device of its own, unnamed, that reads as
    not responding and then as an error ("it did not answer when the backend opened"), until
    the backend is opened again.

    Args:
        nvml: an object with pynvml's interface (default: ``pynvml`` itself); tests pass a fake
            that raises real ``pynvml.NVMLError`` instances.
        log: where state changes (a GPU lost, a field not supported) are reported once.
        deadline_s: how long a call on a GPU may be out before that GPU is not responding.

    Raises:
        NvmlUnavailable: nvidia-ml-py missing, ``nvmlInit`` failed, or no GPU.
    """

    name: BackendName = "nvml"

    def __init__(
        self,
        nvml: Any = None,
        log: logging.Logger | None = None,
        deadline_s: float = READ_DEADLINE_S,
    ) -> None:
        if nvml is None:
            try:
                import pynvml
            except ImportError as err:
                raise NvmlUnavailable(
                    "nvidia-ml-py is not installed, so NVML cannot be used"
                ) from err
            nvml = pynvml
        self._nvml = nvml
        self._log = log or logging.getLogger("jupyter_gpu")
        self._error = nvml.NVMLError
        self._deadline_s = deadline_s
        self._physical: list[int] = []  # device index -> physical GPU index
        self._gpm: GpmReader | None = None
        try:
            self._session = NvmlSession(nvml, deadline_s, self._log, release=self._release)
        except nvml.NVMLError as err:
            raise NvmlUnavailable(_init_failure_reason(nvml, err)) from err
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as err:
            self.close()
            raise NvmlUnavailable(f"NVML could not count the GPUs: {err}") from err
        if count == 0:
            self.close()
            raise NvmlUnavailable("No NVIDIA GPU found")
        self._reported: set[tuple[int, str, str]] = set()
        self._state: dict[int, str] = {}
        self._memory_v1: set[int] = set()  # GPUs where v2 memory info is missing
        # One entry per device we show: a whole GPU, or each MIG instance of a GPU in MIG mode.
        self._handles: list[Any] = []
        self._migs: list[tuple[int, Any] | None] = []  # (physical index, parent handle)
        self._open_errors: dict[int, Exception | str] = {}
        devices: list[DeviceInfo] = []
        for i, opened in enumerate(self._open_gpus(count)):
            if isinstance(opened, list):
                entries = opened
            else:  # one unnamed device that reads as why
                unnamed = DeviceInfo(len(devices), None, None, None, None, None)
                entries = [(None, None, unnamed)]
                self._open_errors[len(self._handles)] = opened or (
                    f"it did not answer within {deadline_s:g} s when the backend opened; it is "
                    "read again when the backend opens again (a server restart)"
                )
                if opened is not None:
                    self._log.warning("jupyter_gpu: NVML cannot open GPU %d: %s", i, opened)
            for handle, mig, info in entries:
                self._handles.append(handle)
                self._migs.append(mig)
                self._physical.append(i)
                devices.append(replace(info, index=len(devices)))
        self._devices = tuple(devices)
        self._gpm = GpmReader(self._nvml, self._handles, self._log)
        self._gpu_count = count
        nvlink = NvlinkReader(self._nvml, self._handles, self._log)
        # Each group of readings/catalog.py that NVML reads, and how.
        self._readers: dict[str, Callable[[DeviceInfo], GroupReading | None]] = {
            "fast": self._read_fast,
            "gpm": self._read_gpm,
            "pcie": self._read_pcie,
            "nvlink": lambda info: nvlink.read(info.index),  # field values (nvlink.py)
        }
        self._info = BackendInfo(
            backend="nvml",
            simulated=False,
            reason=None,
            driver_version=self._system(nvml.nvmlSystemGetDriverVersion),
            cuda_driver_version=self._cuda_version(),
            devices=self._devices,
        )

    def _open_gpus(self, count: int) -> list[list[tuple[Any, Any, DeviceInfo]] | Exception | None]:
        """Each GPU's devices (one, or its MIG instances), opened in parallel with the deadline.

        ``None`` for a GPU that did not answer in time, the ``NVMLError`` for one that failed.
        """

        def open_gpu(i: int) -> list[tuple[Any, Any, DeviceInfo]] | Exception:
            try:
                return self._session.call(i, "open", lambda: self._open_gpu(i))
            except self._error as err:
                failed: Exception = err
                return failed
            except Stuck as stuck:
                return stuck

        self._open_started = time.monotonic()
        reader: DeadlineReader[list[tuple[Any, Any, DeviceInfo]] | Exception] = DeadlineReader(
            "jupyter-gpu-open",
            range(count),
            open_gpu,
            self._deadline_s,
            self._log,
            what="opening it in NVML",
        )
        self._opener = reader  # its worker of a GPU that did not answer is still in the call
        try:
            reader.read(self._deadline_s)
            answers = reader.answers()
        finally:
            reader.close()
        out: list[list[tuple[Any, Any, DeviceInfo]] | Exception | None] = []
        for i in range(count):
            answer = answers.get(i)
            value = answer.value if answer is not None else None
            out.append(None if isinstance(value, Stuck) else value)
        return out

    def _open_gpu(self, i: int) -> list[tuple[Any, Any, DeviceInfo]]:
        nvml = self._nvml
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        instances = self._mig_instances(i, handle)
        if not instances:
            return [(handle, None, self._describe(i, handle, None))]
        return [(h, (i, handle), self._describe(i, h, (i, handle))) for h in instances]

    # -- static facts

    def _system(self, fn: Callable[[], Any]) -> str | None:
        try:
            return _text(fn())
        except self._error:
            return None

    def _cuda_version(self) -> str | None:
        try:
            version = int(self._nvml.nvmlSystemGetCudaDriverVersion())
        except self._error:
            return None
        return f"{version // 1000}.{version % 1000 // 10}"

    def _static(self, handle: Any, fn: Callable[[Any], T]) -> T | None:
        if handle is None:
            return None
        try:
            return fn(handle)
        except self._error:
            return None

    def _mig_instances(self, index: int, handle: Any) -> list[Any]:
        """The MIG instances of a GPU in MIG mode, else ``[]`` (``nvidia-smi -L``).

        Read once, when the backend opens: instances made or destroyed later show after the
        server restarts. Never changes the GPU's configuration.
        """
        nvml = self._nvml
        try:
            current, _pending = nvml.nvmlDeviceGetMigMode(handle)
        except (self._error, AttributeError):  # no MIG on this GPU (or an old nvidia-ml-py)
            return []
        if current != nvml.NVML_DEVICE_MIG_ENABLE:
            return []
        try:
            slots = int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))
        except self._error as err:
            self._log.warning("jupyter_gpu: GPU %d is in MIG mode but: %s", index, err)
            return []
        instances = []
        for slot in range(slots):
            try:
                instances.append(nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot))
            except self._error:  # NOT_FOUND: an empty slot
                continue
        if not instances:
            self._log.info("jupyter_gpu: GPU %d is in MIG mode with no instance", index)
        return instances

    def _describe(self, index: int, h: Any, slot: tuple[int, Any] | None) -> DeviceInfo:
        """A device's identity (``index`` is set by the caller, once every GPU is open)."""
        nvml = self._nvml
        uuid = self._static(h, nvml.nvmlDeviceGetUUID)
        name = self._static(h, nvml.nvmlDeviceGetName)
        memory = self._static(h, nvml.nvmlDeviceGetMemoryInfo)
        limit_mw = self._static(h, nvml.nvmlDeviceGetEnforcedPowerLimit)
        pci = self._static(h, nvml.nvmlDeviceGetPciInfo)
        name_text = _text(name) if name is not None else None
        mig = None
        if slot is not None:
            parent_index, parent = slot
            parent_uuid = self._static(parent, nvml.nvmlDeviceGetUUID)
            if pci is None:  # a MIG instance is on its GPU's bus
                pci = self._static(parent, nvml.nvmlDeviceGetPciInfo)
            mig = MigInfo(
                parent_index=parent_index,
                parent_uuid=_text(parent_uuid) if parent_uuid is not None else None,
                gpu_instance_id=self._static(h, nvml.nvmlDeviceGetGpuInstanceId),
                compute_instance_id=self._static(h, nvml.nvmlDeviceGetComputeInstanceId),
                # "NVIDIA H200 MIG 1g.18gb" -> "1g.18gb"
                profile=name_text.rsplit(" MIG ", 1)[1]
                if name_text and " MIG " in name_text
                else None,
            )
        return DeviceInfo(
            index=index,
            uuid=_text(uuid) if uuid is not None else None,
            name=name_text,
            mem_total_bytes=int(memory.total) if memory is not None else None,
            power_limit_w=limit_mw / 1000.0 if limit_mw is not None else None,
            pci_bus_id=_text(pci.busId) if pci is not None else None,
            mig=mig,
        )

    def info(self) -> BackendInfo:
        return self._info

    # -- per tick

    def _report(self, index: int, what: str, err: Exception) -> None:
        key = (index, what, str(err))
        if key not in self._reported:
            self._reported.add(key)
            self._log.info("jupyter_gpu: GPU %d: NVML cannot read %s: %s", index, what, err)

    def _set_state(self, index: int, state: str, detail: str = "") -> None:
        before = self._state.get(index, "ok")
        if before == state:
            return
        self._state[index] = state
        if state == "lost":
            self._log.warning("jupyter_gpu: GPU %d is lost: %s", index, detail)
        elif state == "error":
            self._log.warning("jupyter_gpu: GPU %d cannot be read: %s", index, detail)
        else:
            self._log.info("jupyter_gpu: GPU %d answers again", index)

    def _read_fast(self, info: DeviceInfo) -> GroupReading:
        nvml, h, i = self._nvml, self._handles[info.index], info.index
        if h is None:  # NVML could not open it when the backend started
            gpu = self._physical[i]
            since = CALLS_OUT.stuck_since(gpu, "open", self._deadline_s)  # any session's open
            if since is None and gpu in self._opener.in_call():  # this one's, not yet late
                since = self._open_started
            if since is not None:  # its open is still out
                stale = time.monotonic() - since
                return not_responding(info, stale, NOT_RESPONDING_MESSAGE.format(stale=stale))
            err = self._open_errors.get(i)
            if getattr(err, "value", None) == nvml.NVML_ERROR_GPU_IS_LOST:
                return GroupReading(state="lost", error=LOST_MESSAGE)
            return GroupReading(state="error", error=f"NVML cannot open this GPU: {err}")
        unavailable: dict[str, str] = {}
        failures: list[Exception] = []
        reads = 0

        def get(fields: tuple[str, ...], fn: Callable[..., T], *args: Any) -> T | None:
            nonlocal reads
            reads += 1
            try:
                return fn(h, *args)
            except self._error as err:
                if getattr(err, "value", None) == nvml.NVML_ERROR_GPU_IS_LOST:
                    raise _Lost from err
                failures.append(err)
                for name in fields:
                    unavailable[name] = str(err)
                self._report(i, getattr(fn, "__name__", "a value"), err)
                return None

        try:
            util = get(("util_pct", "mem_util_pct"), nvml.nvmlDeviceGetUtilizationRates)
            memory = get(("mem_used_bytes",), self._memory_info, i)
            power_mw = get(("power_w",), nvml.nvmlDeviceGetPowerUsage)
            limit_mw = get(("power_limit_w",), nvml.nvmlDeviceGetEnforcedPowerLimit)
            temp = get(("temperature_c",), nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU)
            clock = get(("sm_clock_mhz",), nvml.nvmlDeviceGetClockInfo, nvml.NVML_CLOCK_SM)
            compute = get(("processes",), nvml.nvmlDeviceGetComputeRunningProcesses)
            # Compute GPUs may not list graphics processes: that alone hides no process.
            graphics = get((), nvml.nvmlDeviceGetGraphicsRunningProcesses)
        except _Lost:
            self._set_state(i, "lost", "NVML_ERROR_GPU_IS_LOST")
            return GroupReading(state="lost", error=LOST_MESSAGE)

        if len(failures) == reads:  # every read failed: not a device we can show
            self._set_state(i, "error", str(failures[0]))
            return GroupReading(
                state="error",
                error=f"NVML cannot read this GPU: {failures[0]}",
                unavailable=unavailable,
            )
        self._set_state(i, "ok")
        processes: dict[int, ProcessSample] = {}
        for p in [*(compute or []), *(graphics or [])]:
            pid = int(p.pid)
            if pid not in processes:
                used = int(p.usedGpuMemory) if p.usedGpuMemory is not None else None
                processes[pid] = ProcessSample(pid=pid, name=None, used_mem_bytes=used)
        values: dict[str, float | None] = {
            "util_pct": float(util.gpu) if util is not None else None,
            "mem_util_pct": float(util.memory) if util is not None else None,
            "mem_used_bytes": int(memory.used) if memory is not None else None,
            "mem_total_bytes": int(memory.total) if memory is not None else info.mem_total_bytes,
            "power_w": round(power_mw / 1000.0, 3) if power_mw is not None else None,
            "power_limit_w": limit_mw / 1000.0 if limit_mw is not None else None,
            "temperature_c": float(temp) if temp is not None else None,
            "sm_clock_mhz": int(clock) if clock is not None else None,
        }
        return GroupReading(values, unavailable, processes=tuple(processes.values()))

    def _memory_info(self, handle: Any, index: int) -> Any:
        """NVML's v2 memory info (``used`` as ``nvidia-smi`` shows it), else v1.

        v1's ``used`` includes the memory the driver reserves.
        """
        nvml = self._nvml
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is not None and index not in self._memory_v1:
            try:
                return nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
            except TypeError:  # an nvidia-ml-py whose function takes no version
                reason = "this nvidia-ml-py has no version argument"
            except self._error as err:
                missing = (
                    nvml.NVML_ERROR_FUNCTION_NOT_FOUND,
                    nvml.NVML_ERROR_NOT_SUPPORTED,
                    nvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
                )
                if getattr(err, "value", None) not in missing:
                    raise
                reason = str(err)
            self._memory_v1.add(index)
            self._log.info(
                "jupyter_gpu: GPU %d: NVML v2 memory info is missing (%s); memory used is v1's, "
                "which counts reserved memory too",
                index,
                reason,
            )
        return nvml.nvmlDeviceGetMemoryInfo(handle)

    _memory_info.__name__ = "nvmlDeviceGetMemoryInfo"  # what the once-only log says

    def _guarded(self, index: int, kind: str, fn: Callable[[], T]) -> T | Stuck | Closed:
        """``fn()`` as a call of ``kind`` on device ``index``'s GPU, or why it was not made."""
        try:
            return self._session.call(self._physical[index], kind, fn)
        except (Stuck, Closed) as why:
            return why

    def read_group(self, group: str, index: int) -> GroupReading | None:
        """One device's readings of ``group`` (``fast``, ``gpm``, ``pcie``...) through the session.

        A GPU whose call of this group has been out past the deadline is not asked again until
        it returns: its fast read answers "not responding" at once (no second thread into a
        hung GPU), its other groups nothing. Never raises.
        """
        read = self._readers.get(group)
        if read is None:
            return None
        info = self._devices[index]
        reading = self._guarded(index, group, lambda: read(info))
        if group != "fast":
            return None if isinstance(reading, (Stuck, Closed)) else reading
        if isinstance(reading, Stuck):
            stale = time.monotonic() - reading.since
            return not_responding(info, stale, NOT_RESPONDING_MESSAGE.format(stale=stale))
        if isinstance(reading, Closed):
            return GroupReading(state="error", error="the NVML backend is closed")
        return reading

    def _read_gpm(self, info: DeviceInfo) -> GroupReading | None:
        """SM/tensor/DRAM activity of one device since its previous call (``gpm.py``)."""
        gpm = self._gpm
        return gpm.read(info.index) if gpm is not None else None

    def _read_pcie(self, info: DeviceInfo) -> GroupReading:
        """PCIe throughput of one GPU in bytes/s (NVML reports KiB/s over a 20 ms window)."""
        nvml, h = self._nvml, self._handles[info.index]
        values: dict[str, float | None] = {}
        unavailable: dict[str, str] = {}
        if h is None:
            return GroupReading()
        for name, counter in (
            ("pcie_tx_bytes_per_s", nvml.NVML_PCIE_UTIL_TX_BYTES),
            ("pcie_rx_bytes_per_s", nvml.NVML_PCIE_UTIL_RX_BYTES),
        ):
            try:
                values[name] = float(nvml.nvmlDeviceGetPcieThroughput(h, counter)) * 1024.0
            except self._error as err:
                self._report(info.index, "PCIe throughput", err)
                unavailable[name] = str(err)
        return GroupReading(values, unavailable)

    def topology(self) -> Topology:
        """How the GPUs are connected (``nvidia-smi topo -m``), each read behind the deadline."""
        return read_with(self._nvml, self._session, self._gpu_count)

    def close(self) -> None:
        """Free what every GPU holds and ``nvmlShutdown``, without waiting for any call.

        With a call still out (a hung GPU), ``nvmlShutdown`` waits for it: the last call out
        runs it when it returns (``nvml_calls.py``). The GPM buffers of the GPUs with no read
        in a call are freed now. NVML counts inits, so other users in this process are
        unaffected. Safe to call twice.
        """
        if self._gpm is not None:
            self._gpm.close()
        self._session.close()

    def _release(self) -> None:
        """What the session runs just before ``nvmlShutdown``: the rest of the GPM buffers."""
        if self._gpm is not None:
            self._gpm.close()
