"""The real ``JupyterGpuApp`` with a sampler whose every input stands still: for golden files.

Enable it with ``jpserver_extensions={"tests.integration.server.golden_extension": True}`` (and
``jupyter_gpu`` off), after ``RIG.freeze(monkeypatch, tmp_path)``. What would vary from run to
run is fixed here, and nothing else is replaced:

- the clocks: every ``jupyter_gpu`` module's ``time`` is ``RIG.clock``, which stands still
  until the test moves it (wall time, monotonic time and ``perf_counter`` together);
- the GPUs: the simulated backend with a fixed seed, read in one order (``InOrderSimulated``);
  its processes have pids that no Linux process can have (above ``PID_MAX_LIMIT``), so they
  are the same "unattributable" row on every machine;
- the host: ``HostReader`` over a cgroup tree of fixed files (1 CPU, 1 GiB);
- the compile caches: none to scan;
- the container question (is this server in its own pid namespace?): answered "no".
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpu.config import JupyterGpu
from jupyter_gpu.host.cgroup import CgroupReader
from jupyter_gpu.host.reader import HostReader
from jupyter_gpu.readings import catalog
from jupyter_gpu.readings.backend import Backend
from jupyter_gpu.readings.records import BackendInfo, GroupReading
from jupyter_gpu.sampling.attribution import IdlePolicy, ProcessAnnotator
from jupyter_gpu.server.app import JupyterGpuApp
from jupyter_gpu.server.service import GpuService
from jupyter_gpu.simulated.backend import SimulatedBackend

SEED = 23
GIB = 1 << 30
# pid_max is at most 2**22 on Linux (PID_MAX_LIMIT): no process anywhere has these.
IMPOSSIBLE_PIDS = (5_000_001, 5_000_002, 5_000_003)


class FrozenClock:
    """``time`` for the extension's modules: stands still until ``advance``.

    Wall time starts at 2026-01-01 00:00 UTC; the monotonic clock and ``perf_counter`` (one
    clock, so that every duration measured while it stands is 0) at 5000 s. Everything else
    (``sleep``...) is the real ``time`` module's.
    """

    WALL_START = 1_767_225_600.0
    MONOTONIC_START = 5_000.0

    def __init__(self) -> None:
        self.t = 0.0

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def time(self) -> float:
        return self.WALL_START + self.t

    def monotonic(self) -> float:
        return self.MONOTONIC_START + self.t

    def perf_counter(self) -> float:
        return self.MONOTONIC_START + self.t

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


class InOrderSimulated(Backend):
    """The simulated backend, read in one fixed order whatever order its callers come in.

    The sampler reads each GPU in a worker thread of its own, and the rounds of each group of
    readings in threads of their own, while the simulated backend draws its noise from one
    generator: the threads' order would change the values. Here the first read at a new clock
    reading reads every group of every GPU, group by group in the catalog's order and GPU by
    GPU in index order, and every read at that clock reading is answered from them.
    """

    name = "simulated"

    def __init__(self, inner: SimulatedBackend, clock: Callable[[], float]) -> None:
        self._inner = inner
        self._clock = clock
        self._lock = threading.Lock()
        self._at: float | None = None
        self._read: dict[str, dict[int, GroupReading | None]] = {}

    def info(self) -> BackendInfo:
        return self._inner.info()

    def _read_all(self) -> None:
        now = self._clock()
        with self._lock:
            if self._at == now:
                return
            indices = [d.index for d in self._inner.info().devices]
            self._read = {
                group: {i: self._inner.read_group(group, i) for i in indices}
                for group in catalog.layout().group_names
            }
            self._at = now

    def read_group(self, group: str, index: int) -> GroupReading | None:
        self._read_all()
        return self._read.get(group, {}).get(index)


class GoldenRig:
    """What the test and the extension share: the clock and the fixed cgroup tree."""

    def __init__(self) -> None:
        self.clock = FrozenClock()
        self.cgroup: tuple[Path, Path] | None = None

    def freeze(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        """Stop the clock of every loaded ``jupyter_gpu`` module and write the cgroup tree.

        Call it before the server starts (the extension's modules are imported above).
        """
        self.clock = FrozenClock()
        for name, module in list(sys.modules.items()):
            if name.split(".")[0] == "jupyter_gpu" and getattr(module, "time", None) is time:
                monkeypatch.setattr(module, "time", self.clock)
        root = tmp_path / "cgroup"
        files = {
            "cgroup.controllers": "cpu memory",
            "cpu.max": "100000 100000",
            "memory.max": str(GIB),
            "memory.current": str(GIB // 2),
            "memory.stat": f"anon 1\ninactive_file {GIB // 8}",
            "cpu.stat": "usage_usec 1000000",
        }
        for file, text in files.items():
            (root / file).parent.mkdir(parents=True, exist_ok=True)
            (root / file).write_text(text + "\n")
        proc = tmp_path / "proc_self_cgroup"
        proc.write_text("0::/\n")
        self.cgroup = (root, proc)


RIG = GoldenRig()


class GoldenGpuApp(JupyterGpuApp):
    """``JupyterGpuApp`` whose sampler reads ``RIG``'s clock, GPUs, host and no caches."""

    def make_service(self, config: JupyterGpu) -> GpuService:
        assert RIG.cgroup is not None, "call RIG.freeze before the server starts"
        clock = RIG.clock
        service = super().make_service(config)
        host = HostReader(CgroupReader(*RIG.cgroup), clock=clock.monotonic)

        def backend(_sampler: Any) -> Backend:
            inner = SimulatedBackend(
                config.simulated_devices,
                seed=SEED,
                clock=clock.monotonic,
                pids=lambda: IMPOSSIBLE_PIDS,
            )
            return InOrderSimulated(inner, clock.monotonic)

        sampler = service.make_sampler(
            backend_factory=backend, host=host, caches=(), kernel_caches=False
        )
        options = sampler.options
        sampler.annotator = ProcessAnnotator(
            clock=clock.monotonic,
            wall_clock=clock.time,
            idle=IdlePolicy(options.idle_holder_s, options.idle_holder_bytes),
            show_other_processes=options.show_other_processes,
            own_uid_processes=options.own_uid_processes,
            in_namespace=False,
        )
        service.sampler = sampler
        return service


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": __name__, "app": GoldenGpuApp}]
