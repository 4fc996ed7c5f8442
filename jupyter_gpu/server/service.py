"""The event-loop side of the extension: the sampler, its hand-off to the loop, the clients.

The sampler thread calls ``_on_sample`` for each new sample; that only schedules ``_publish`` on
the event loop (Tornado's thread-safe ``add_callback``). ``_publish`` wraps the sample's JSON in
the stream message and its WebSocket frame once, and writes those same bytes to every socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from typing import Any, Protocol

from prometheus_client import generate_latest
from tornado.ioloop import IOLoop, PeriodicCallback

from jupyter_gpu.config import JupyterGpu
from jupyter_gpu.options import api_config, sampler_values
from jupyter_gpu.readings import BackendInfo, Sample
from jupyter_gpu.sampling import Entry, Sampler, SamplerOptions
from jupyter_gpu.sampling.process_facts import ProcessId
from jupyter_gpu.server.kernels import build_kernel_map
from jupyter_gpu.server.metrics import SampleCollector, registry_for
from jupyter_gpu.server.serialize import dumps, encode_sample, stream_frame, stream_message
from jupyter_gpu.version import __version__

API_VERSION = "1"


class StreamClient(Protocol):
    """What the service needs of a connected socket."""

    def push(self, frame: bytes, seq: int) -> None:
        """Send sample ``seq``'s message, a WebSocket frame built once (``stream_frame``).

        Never raises (a closed client misses it; one past its send budget is dropped). A
        sample not newer than the last one sent to this client is skipped.
        """

    def close(self) -> None:
        """Close the connection (the server is stopping)."""


def sampler_options(config: JupyterGpu) -> SamplerOptions:
    """The sampler's options from the validated traits (those the declarations give it)."""
    return SamplerOptions(**sampler_values(config))


class GpuService:
    """One per server: owns the sampler and the stream's clients.

    Args:
        config: the validated ``JupyterGpu`` settings.
        io_loop: the server's event loop (samples are handed to it).
        log: the server's logger.
        kernel_manager: the server's ``MultiKernelManager`` (``None``: no kernel attribution).
        session_manager: the server's ``SessionManager`` (for notebook paths).
    """

    def __init__(
        self,
        config: JupyterGpu,
        io_loop: IOLoop,
        log: logging.Logger,
        kernel_manager: Any = None,
        session_manager: Any = None,
    ) -> None:
        self.config = config
        self.log = log
        self._io_loop = io_loop
        self._kernel_manager = kernel_manager
        self._session_manager = session_manager
        self._clients: set[StreamClient] = set()
        self._full_logged = False  # the bound on clients was reached and that was logged
        self._ready = asyncio.Event()
        self._devices_json: str | None = None
        self.sampler = self.make_sampler()
        self.metrics = SampleCollector(
            self._latest_with_info,
            sampler=lambda: self.sampler,
            clients=lambda: len(self._clients),
        )
        self._metrics_registry = registry_for(self.metrics)
        self._kernel_refresh: PeriodicCallback | None = None
        self._kernels_seen: dict[str, ProcessId] = {}  # kernel id -> (pid, start time)
        self._stopped = False

    def make_sampler(self, options: SamplerOptions | None = None, **kwargs: Any) -> Sampler:
        """A sampler wired to this service (extra keyword arguments go to ``Sampler``).

        Tests replace ``self.sampler`` with one of these over a fake NVML (``backend_factory``);
        the soak benchmark with other ``options`` (a cadence faster than the traits allow).
        """
        return Sampler(
            options or sampler_options(self.config),
            encode=encode_sample,
            on_sample=self._on_sample,
            log=self.log,
            **kwargs,
        )

    # -- lifecycle (event loop)

    def start(self) -> None:
        """Start the sampler threads and the kernel-map refresh."""
        self.sampler.start()
        if self._kernel_manager is not None:
            self._kernel_refresh = PeriodicCallback(
                self._refresh_kernels, self.config.kernel_map_interval_s * 1000.0
            )
            self._kernel_refresh.start()
            self._io_loop.add_callback(self._refresh_kernels)

    async def stop(self) -> None:
        """Stop the refresh and close every socket, then stop the sampler in a worker thread.

        ``Sampler.stop`` joins threads (within its timeout), so it never runs on the event loop.
        """
        if self._stopped:
            return
        self._stopped = True
        if self._kernel_refresh is not None:
            self._kernel_refresh.stop()
        for client in list(self._clients):
            client.close()
        self._clients.clear()
        await asyncio.to_thread(self.sampler.stop)

    async def _refresh_kernels(self) -> None:
        if self._stopped or self._kernel_manager is None:
            return
        try:
            kernels = await build_kernel_map(
                self._kernel_manager, self._session_manager, self.log, self._kernels_seen
            )
        except Exception:  # attribution is a nicety: log and keep the last map
            self.log.debug("jupyter_gpu: kernel map refresh failed", exc_info=True)
            return
        self.sampler.set_kernel_map(kernels)

    # -- the hand-off (sampler thread -> event loop)

    def _on_sample(self, entry: Entry) -> None:
        """Called in the sampler thread: schedule the publish on the loop, nothing else."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: the server is going away
            self._io_loop.add_callback(self._publish, entry)

    def _publish(self, entry: Entry) -> None:
        self._ready.set()
        if not self._clients:
            return
        frame = stream_frame(stream_message(entry.json, self.age_s(entry)))
        for client in list(self._clients):
            client.push(frame, entry.sample.seq)

    # -- readers (event loop)

    def age_s(self, entry: Entry) -> float:
        """Seconds since ``entry`` was sampled (the monotonic clock for the latest sample)."""
        latest = self.sampler.latest()
        if latest is not None and latest.sample.seq == entry.sample.seq:
            age = self.sampler.last_sample_age_s()
            if age is not None:
                return age
        return max(0.0, time.time() - entry.sample.ts)

    async def wait_ready(self, timeout: float = 10.0) -> bool:
        """Wait until the sampler's first tick (the backend opens in the sampler thread).

        Its first tick, not its history: a demo's seeded past (``simulated_seed_history_s``)
        is in the history before the backend opens, and ``GET devices`` then had none to
        show (a 503 in 2 of 5 runs of ``test_an_hour_of_seeded_past_at_a_point_budget``).
        """
        if self.sampler.ready.is_set():
            return True
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except asyncio.TimeoutError:
            return self.sampler.ready.is_set()
        return True

    def add_client(self, client: StreamClient, limit: int | None = None) -> bool:
        """Count ``client`` in, unless ``limit`` clients are in already; whether it was.

        The first refusal after a time under the limit is logged (a warning), not each one.
        """
        if limit is not None and len(self._clients) >= limit:
            if not self._full_logged:
                self._full_logged = True
                self.log.warning(
                    "jupyter_gpu: refusing stream clients: %d are connected, the most "
                    "JupyterGpu.max_stream_clients allows (each refused one is told why)",
                    len(self._clients),
                )
            return False
        self._clients.add(client)
        return True

    def remove_client(self, client: StreamClient) -> None:
        self._clients.discard(client)
        self._full_logged = False

    @property
    def client_count(self) -> int:
        """How many stream sockets are connected."""
        return len(self._clients)

    def devices_json(self) -> str | None:
        """The ``GET devices`` body, ``None`` before the sampler starts opening the backend.

        Built once the backend is open; while NVML has not answered, built at each request
        (no devices, the reason, ``nvml_wait_s``).
        """
        if self._devices_json is not None:
            return self._devices_json
        info = self.sampler.info
        if info is None:
            return None
        payload = {
            "api_version": API_VERSION,
            **info.to_dict(),
            "hostname": socket.gethostname(),
            "jupyter_gpu_version": __version__,
            "config": api_config(self.config, {"history_capacity": self.sampler.history.capacity}),
        }
        body = dumps(payload)
        if info.nvml_wait_s is None:  # open: it no longer changes
            self._devices_json = body
        return body

    def _latest_with_info(self) -> tuple[Sample, BackendInfo] | None:
        entry = self.sampler.latest()
        info = self.sampler.info
        if entry is None or info is None:
            return None
        return entry.sample, info

    def metrics_text(self) -> str | None:
        """The Prometheus text of the latest sample (its families built once per sample)."""
        if self._latest_with_info() is None:
            return None
        return generate_latest(self._metrics_registry).decode()
