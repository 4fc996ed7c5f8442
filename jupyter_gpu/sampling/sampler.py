"""The one background sampler of a server: one batched read per tick, for every client.

Threads (all daemons, all stopped by ``stop``, which never waits for an NVML call):

- ``jupyter-gpu-open``: opens the backend (so NVML initialises here, never on the event loop).
  ``nvmlInit`` and counting the GPUs may hang like any NVML call: the sampler waits for them a
  second at most (``OPEN_WAIT_S``), then samples the host and the caches without GPUs, saying
  "NVML has not answered for N s" (``Sample.nvml_wait_s``, ``reason``; logged once, then when
  it answers), and takes the GPUs in at the first tick after the open returns.
- ``jupyter-gpu-sampler``: every ``interval_s`` reads the GPUs and the host, merges the latest
  readings of the other groups with each group's age (``freshness.py``: a group older than two
  of its intervals is stale and left out), attributes GPU processes to kernels, stamps a
  ``Sample``, encodes it once and appends it to the history, then calls ``on_sample`` (the
  server hands it to its event loop from there).
- ``jupyter-gpu-cache-scan``: walks the torch.compile caches every ``cache_scan_interval_s``.
- ``jupyter-gpu-read-<gpu>``: each GPU's fast reads, in its own worker (``deadline.py``): the
  tick waits for them at most half an interval, and a read that hangs past
  ``read_deadline_s`` makes that GPU "not responding" while the others keep updating.
- one thread per other group of readings (``readings/catalog.py``), named by the group, and
  its ``<name>-read-<gpu>`` workers, only with the group's option on and a backend that has
  devices, a round every interval of the group, each GPU behind the same deadline:
  ``jupyter-gpu-gpm`` (NVML's GPM: SM/tensor/DRAM activity, 0.5 to 3.4 ms per GPU, with
  ``gpm_metrics``, every ``gpm_interval_s``), ``jupyter-gpu-slow`` (PCIe throughput, about
  21 ms per call per GPU, with ``slow_metrics``, every ``slow_interval_s``),
  ``jupyter-gpu-nvlink`` (NVLink throughput, with ``nvlink_metrics``, every
  ``nvlink_interval_s``).

A GPU whose call hangs holds its worker in each of these readers (at most one thread per reader
and GPU); the tick only merges the latest answers, so a 100,000-file cache or a hung NVML call
never delays it, and one GPU never stops another's readings.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jupyter_gpu.backends.factory import open_backend
from jupyter_gpu.backends.reasons import simulated_epoch_from_env
from jupyter_gpu.compile_cache import (
    CacheKind,
    CacheSource,
    kernel_cache_dirs,
    merge_sources,
    scan_sources,
    server_cache_dirs,
)
from jupyter_gpu.host.reader import HostReader
from jupyter_gpu.readings import catalog
from jupyter_gpu.readings.backend import Backend, NoGpuBackend
from jupyter_gpu.readings.deadline import DeadlineReader, DeviceReader, FastReading, Timed
from jupyter_gpu.readings.records import (
    NOT_SCANNED,
    BackendInfo,
    BackendName,
    CompileCacheSample,
    DeviceSample,
    GroupReading,
    Sample,
)
from jupyter_gpu.readings.startup import Background, not_answered_reason
from jupyter_gpu.sampling.attribution import IdlePolicy, KernelMap, ProcessAnnotator
from jupyter_gpu.sampling.buckets import Buckets
from jupyter_gpu.sampling.columns import ColumnsQuery, query_columns
from jupyter_gpu.sampling.freshness import StaleAfter, merge_readings
from jupyter_gpu.sampling.history import Entry, History
from jupyter_gpu.sampling.options import SamplerOptions
from jupyter_gpu.sampling.periodic import Periodic
from jupyter_gpu.simulated.past import PastSpan, simulated_past

__all__ = ["Sampler", "SamplerOptions"]

MIN_INTERVAL_S = 0.01
OPEN_WAIT_S = 1.0
"""The longest the first sample waits for the backend to open (``read_deadline_s`` if shorter):
after it, samples carry the host and the caches until NVML answers."""


class Sampler:
    """Samples in background threads; thread-safe readers for the server.

    Args:
        options: cadence, backend choice and history length.
        encode: turns a sample into its JSON text, once, in the sampler thread.
        on_sample: called in the sampler thread with each new entry (keep it short: hand off).
        backend_factory: opens the backend, in the ``jupyter-gpu-open`` thread (tests inject a
            fake NVML through it); the default follows ``options.backend``. It may block (a
            hung ``nvmlInit``): the sampler serves the host meanwhile.
        host: the host reader (tests pass one over a fake cgroup tree).
        caches: the compile-cache directories to scan (default: resolved as torch does).
        kernel_caches: also scan the caches the server's kernels use, found in their
            environments (default: only with the default ``caches``).
        log: where problems are reported, once each rather than once per tick.
    """

    def __init__(
        self,
        options: SamplerOptions | None = None,
        *,
        encode: Callable[[Sample], str] | None = None,
        on_sample: Callable[[Entry], None] | None = None,
        backend_factory: Callable[[Sampler], Backend] | None = None,
        host: HostReader | None = None,
        caches: tuple[tuple[CacheKind, str], ...] | None = None,
        kernel_caches: bool | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        self.options = options or SamplerOptions()
        if self.options.interval_s < MIN_INTERVAL_S:
            raise ValueError(
                f"interval_s must be at least {MIN_INTERVAL_S} s, got {self.options.interval_s}"
            )
        self.log = log or logging.getLogger("jupyter_gpu")
        self.history = History(self.options.history_capacity)
        self.buckets = Buckets(
            self.options.history_bucket_s,
            max(self.options.long_history_s, self.options.history_bucket_s),
        )
        self.annotator = ProcessAnnotator(
            idle=IdlePolicy(self.options.idle_holder_s, self.options.idle_holder_bytes),
            show_other_processes=self.options.show_other_processes,
            own_uid_processes=self.options.own_uid_processes,
        )
        self.ready = threading.Event()
        """Set once the first sample is in the history (with the GPUs, or saying why not)."""
        self.last_tick_s: float | None = None
        """How long the last tick took, in seconds (its reads, encoding and hand-off)."""
        self._last_sample_mono: float | None = None
        self._reader: DeviceReader | None = None
        self._encode = encode
        self._on_sample = on_sample
        self._backend_factory = backend_factory or _default_factory
        self._host = host
        self._info: BackendInfo | None = None
        self._backend: Backend | None = None
        self._opening: Background[Backend] | None = None
        self._wait_logged = False
        self._seq = 0
        self._last_ts = 0.0
        self._stop = threading.Event()
        self._errors_logged: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="jupyter-gpu-sampler", daemon=True)
        dirs: tuple[CacheSource, ...] = (
            server_cache_dirs()
            if caches is None
            else tuple((kind, path, "server", False) for kind, path in caches)
        )
        # The default caches also include the kernels' own (their TORCHINDUCTOR_CACHE_DIR...).
        with_kernels = caches is None if kernel_caches is None else kernel_caches
        annotator = self.annotator
        min_free = self.options.cache_min_free_pct

        self.cache_sources: tuple[CacheSource, ...] = dirs
        """The cache directories the last scan looked at (the clear route's list)."""

        def scan(stop: threading.Event) -> CompileCacheSample:
            sources = dirs
            if with_kernels:
                sources = merge_sources(dirs, kernel_cache_dirs(annotator.kernel_pids()))
            self.cache_sources = sources
            return scan_sources(sources, stop, min_free)

        self._cache_scan: Periodic[CompileCacheSample] = Periodic(
            "jupyter-gpu-cache-scan",
            self.options.cache_scan_interval_s,
            scan,
            NOT_SCANNED,
            self.log,
        )
        self._rounds: dict[str, Rounds] = {}
        """The rounds of each group that is not the tick's, by name, once the backend opens."""

    # -- readers (any thread)

    @property
    def info(self) -> BackendInfo | None:
        """The open backend's static facts; ``None`` before the sampler thread starts opening it.

        While the open has not returned (NVML has not answered): no devices, the reason, and
        ``nvml_wait_s``, the seconds waited so far.
        """
        info, opening = self._info, self._opening
        if info is not None or opening is None:
            return info
        return self._waiting_info(opening.waited_s())

    def _waiting_info(self, waited_s: float) -> BackendInfo:
        """What the sampler serves while the backend has not opened for ``waited_s`` seconds."""
        requested = self.options.backend
        name: BackendName = (
            "simulated" if requested == "simulated" else "none" if requested == "none" else "nvml"
        )
        simulated = name == "simulated"
        return BackendInfo(
            backend=name,
            simulated=simulated,
            reason=not_answered_reason(waited_s, simulated=simulated),
            nvml_wait_s=round(waited_s, 3),
        )

    def latest(self) -> Entry | None:
        """The newest sample with its JSON, ``None`` before the first tick."""
        return self.history.latest()

    def set_kernel_map(self, kernels: KernelMap) -> None:
        """Hand over a new immutable pid -> kernel map (from the event loop)."""
        self.annotator.kernel_map = kernels

    @property
    def running(self) -> bool:
        """Whether the sampler thread is alive."""
        return self._thread.is_alive()

    @property
    def last_sample_ts(self) -> float | None:
        """Unix time of the last successful sample (``None`` before the first)."""
        entry = self.history.latest()
        return entry.sample.ts if entry is not None else None

    def last_sample_age_s(self) -> float | None:
        """Seconds since the last successful sample (monotonic clock), ``None`` before it.

        Grows past ``interval_s`` only when ticks fail or the sampler thread is stuck.
        """
        mono = self._last_sample_mono
        return None if mono is None else max(0.0, time.monotonic() - mono)

    def group_answers(self, group: str) -> dict[int, Timed[GroupReading]]:
        """The latest answer of each GPU to ``group``'s rounds, by index (none: not read)."""
        rounds = self._rounds.get(group)
        return dict(rounds.reader.answers()) if rounds is not None else {}

    def enabled_groups(self) -> tuple[str, ...]:
        """The groups of readings this sampler reads: the tick's, and those switched on."""
        opts = self.options
        return tuple(
            g.name
            for g in catalog.layout().groups
            if g.enabled_by is None or bool(getattr(opts, g.enabled_by))
        )

    def history_columns(self, now: float, query: ColumnsQuery) -> dict[str, Any]:
        """min/mean/max columns up to ``now``, from the ring or the buckets (``columns.py``)."""
        return query_columns(self.history, self.buckets, self.options, now, query)

    def device_answer_age_s(self) -> dict[int, float | None]:
        """Seconds since each GPU's reads last returned, by index (``None``: never yet)."""
        reader = self._reader
        return reader.last_answer_age_s() if reader is not None else {}

    def rescan_caches(self) -> CompileCacheSample:
        """Scan the compile caches now, in the calling thread (after a clear), and keep it.

        Slow on a big cache: call it from a worker thread, never the event loop.
        """
        fresh = scan_sources(self.cache_sources, None, self.options.cache_min_free_pct)
        self._cache_scan.latest = fresh
        return fresh

    @property
    def cache_scan_duration_s(self) -> float | None:
        """How long the last compile-cache scan took, in seconds."""
        return self._cache_scan.last_duration_s

    # -- lifecycle

    def start(self) -> None:
        """Start the threads; returns at once (the backend opens in a thread of its own)."""
        self._cache_scan.start()
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every thread and close the backend, within ``timeout`` seconds in all.

        Never waits for an NVML call: a worker in a hung call is left in it (it ends when the
        call returns, and NVML is shut down then: ``nvml.py``), and ``threads_alive`` names it.
        It joins threads: call it off the event loop.
        """
        until = time.monotonic() + timeout
        self._stop.set()
        self._signal_stop()
        if self._thread.is_alive():
            self._thread.join(max(0.0, until - time.monotonic()))
        elif self._backend is not None:  # never started a loop: still release the backend
            self._close_backend()
        self._signal_stop()  # what the sampler thread started meanwhile
        for periodic in self._periodics():
            periodic.join(until)
        for reader in self._readers():
            reader.join(until)

    def _signal_stop(self) -> None:
        """Tell every thread to end, waiting for none (the readers' waits end at once)."""
        for periodic in self._periodics():
            periodic.stop(0)
        for reader in self._readers():
            reader.close()

    def _periodics(self) -> list[Periodic[Any]]:
        """The threads on a cadence: the cache scan and each group's rounds."""
        return [self._cache_scan, *(r.periodic for r in list(self._rounds.values()))]

    def _readers(self) -> list[DeviceReader | DeadlineReader[GroupReading]]:
        """The per-GPU readers: the tick's and each group's rounds'."""
        tick = [self._reader] if self._reader is not None else []
        return [*tick, *(r.reader for r in list(self._rounds.values()))]

    def threads_alive(self) -> list[str]:
        """Names of this sampler's threads that are still running.

        Empty after ``stop``, but for workers still in a hung NVML call.
        """
        alive = [self._thread.name] if self._thread.is_alive() else []
        opening = self._opening
        if opening is not None and not opening.done:  # in nvmlInit, or a hung GPU's open
            alive.append(opening.thread.name)
        alive.extend(periodic.name for periodic in self._periodics() if periodic.alive)
        for reader in self._readers():
            alive.extend(reader.thread_names())
        return alive

    # -- the sampler thread

    def _run(self) -> None:
        if self._host is None:
            self._host = HostReader()
        if self.options.simulated_seed_history_s > 0 and self.options.backend == "simulated":
            self._store_past()
        opening: Background[Backend] = Background(
            "jupyter-gpu-open", lambda: self._backend_factory(self)
        )
        self._opening = opening
        opening.wait(min(self.options.read_deadline_s, OPEN_WAIT_S))
        interval = self.options.interval_s
        deadline = time.monotonic()
        while not self._stop.is_set():
            if self._info is None:
                self._adopt(opening)
            self.tick()
            deadline += interval
            now = time.monotonic()
            if deadline < now:  # fell behind (a suspended VM, a stalled read): skip, don't burst
                deadline = now + interval
            self._stop.wait(deadline - now)
        if self._info is None:  # still opening: close what it opens, when it does
            opening.abandon(lambda backend: backend.close())
        self._signal_stop()
        self._close_backend()

    def _adopt(self, opening: Background[Backend]) -> None:
        """Take the opened backend in (its GPUs, their rounds).

        While it has not opened, say so in the log, once, past the read deadline.
        """
        if not opening.done:
            waited = opening.waited_s()
            if not self._wait_logged and waited >= self.options.read_deadline_s:
                self._wait_logged = True
                self.log.warning(
                    "jupyter_gpu: NVML has not answered for %.1f s (nvmlInit or counting the "
                    "GPUs has not returned: the driver is slow to start, or hung); serving the "
                    "host's readings until it answers",
                    waited,
                )
            return
        try:
            backend = opening.result()
            info = backend.info()
        except Exception as err:  # a bug, not a missing GPU (that is a NoGpuBackend): say so
            self.log.exception("jupyter_gpu: could not open the GPU backend")
            backend = NoGpuBackend(f"the GPU backend failed to open ({err}): see the server log")
            info = backend.info()
        if self._wait_logged:
            answered = opening.answered_at or time.monotonic()
            self.log.warning(
                "jupyter_gpu: NVML answered after %.1f s: %s",
                answered - opening.since,
                f"{len(info.devices)} GPU(s)" if info.devices else f"no GPU ({info.reason})",
            )
        self._backend = backend
        self._start_rounds(backend, info)
        self._info = info  # last: a reader that sees the info sees the backend and its rounds

    def _start_rounds(self, backend: Backend, info: BackendInfo) -> None:
        """The rounds of each switched-on group other than the tick's (none without GPUs)."""
        indices = [d.index for d in info.devices]
        made = catalog.layout()
        for name in self.enabled_groups() if indices else ():
            group = made.group(name)
            if not group.tick:
                self._rounds[name] = self._start_group(group, backend, indices)

    def _start_group(self, group: catalog.Group, backend: Backend, indices: list[int]) -> Rounds:
        """A reader of ``group`` for every GPU, and the started thread that asks it each round.

        Each round asks every GPU that is not still in a call, and waits half an interval at
        most, so a hung GPU never delays the next round of the others.
        """
        name = group.name
        interval_s = float(getattr(self.options, group.interval_option))
        reader: DeadlineReader[GroupReading] = DeadlineReader(
            f"{group.thread}-read",
            indices,
            lambda index: backend.read_group(name, index),
            self.options.read_deadline_s,
            self.log,
            what=group.what,
        )
        periodic: Periodic[None] = Periodic(
            group.thread, interval_s, lambda _stop: reader.read(interval_s / 2), None, self.log
        )
        periodic.start()
        return Rounds(reader, periodic)

    def _store_past(self) -> None:
        """Store a synthetic past (``simulated_seed_history_s``, simulated backend only).

        Each of its samples goes to the long history's buckets, the last ``history_s`` of them
        to the full-resolution history too (``simulated/past.py`` makes them).
        """
        assert self._host is not None
        opts = self.options
        span = PastSpan(
            opts.simulated_seed_history_s, opts.history_s, opts.interval_s, opts.history_bucket_s
        )
        host = self._host.read()
        for sample, full in simulated_past(
            opts.simulated_devices, span, self.enabled_groups(), host, time.time()
        ):
            self.buckets.add(sample)
            if full:
                self.history.append(Entry(sample, self._encode(sample) if self._encode else ""))
                self._seq, self._last_ts = sample.seq, sample.ts
        self.log.info(
            "jupyter_gpu: seeded %.0f s of synthetic history "
            "(simulated_seed_history_s, simulated backend)",
            opts.simulated_seed_history_s,
        )

    def _close_backend(self) -> None:
        """Close the readers, then the backend: neither waits for a call (``nvml.py``)."""
        for reader in self._readers():
            reader.close()
        backend, self._backend = self._backend, None
        if backend is not None:
            try:
                backend.close()  # the simulated backend's close also ends its hung reads
            except Exception:  # closing is best effort: the process is going away
                self.log.debug("jupyter_gpu: closing the backend failed", exc_info=True)

    def _stale_after(self) -> StaleAfter:
        """Each group stale after two of its intervals (``freshness.py``)."""
        opts = self.options
        return StaleAfter.two_intervals(
            {g.name: getattr(opts, g.interval_option) for g in catalog.layout().groups}
        )

    def tick(self) -> Entry | None:
        """One tick: read, stamp, encode, store, hand off. Errors are logged once, not raised."""
        start = time.perf_counter()
        backend, info, host, opening = self._backend, self._info, self._host, self._opening
        if host is None or opening is None:
            return None
        try:
            if backend is None or info is None:  # NVML has not answered: the host, the caches
                info = self._waiting_info(opening.waited_s())
                devices: tuple[DeviceSample, ...] = ()
            else:
                devices = self._devices(backend, info)
            # Never let ts go backwards (the wall clock can): history queries rely on order.
            ts = max(time.time(), self._last_ts + 1e-6)
            # seq and ts are committed only once the sample is stored, so a failed tick leaves
            # no gap: seq goes up by exactly 1 per sample (the frontend detects gaps with it).
            seq = self._seq + 1
            sample = Sample(
                seq=seq,
                ts=round(ts, 6),
                backend=info.backend,
                simulated=info.simulated,
                reason=info.reason,
                devices=devices,
                host=host.read(),
                compile_cache=self._cache_scan.latest,
                nvml_wait_s=info.nvml_wait_s,
            )
            entry = Entry(sample, self._encode(sample) if self._encode else "")
            self.history.append(entry)
            self.buckets.add(sample)
            self._seq, self._last_ts = seq, ts
            self._last_sample_mono = time.monotonic()
            self.ready.set()
            if self._on_sample is not None:
                self._on_sample(entry)
        except Exception as err:  # one bad tick must not end monitoring
            key = f"{type(err).__name__}: {err}"
            if key not in self._errors_logged:
                self._errors_logged.add(key)
                self.log.exception("jupyter_gpu: a sampler tick failed (logged once)")
            return None
        finally:
            self.last_tick_s = time.perf_counter() - start
        return entry

    def _devices(self, backend: Backend, info: BackendInfo) -> tuple[DeviceSample, ...]:
        """Every GPU's fast readings merged with the latest of the other groups, annotated."""
        if not info.devices:
            return ()
        fast = self._read_devices(backend, info)
        devices = merge_readings(
            info.devices,
            fast,
            {name: rounds.reader.answers() for name, rounds in self._rounds.items()},
            time.monotonic(),  # the ages are to this moment, about the sample's ts
            self._stale_after(),
        )
        return self.annotator.annotate(devices)

    def _read_devices(self, backend: Backend, info: BackendInfo) -> tuple[FastReading, ...]:
        """Every device's tick group, through the deadline reader (a hung read never blocks)."""
        first = self._reader is None
        if self._reader is None:
            tick = catalog.layout().tick_group.name
            self._reader = DeviceReader(
                info.devices,
                lambda index: backend.read_group(tick, index),
                self.options.read_deadline_s,
                self.log,
            )
        # The first read may take the whole deadline (NVML's first calls are the slowest);
        # later ones wait at most half an interval, then serve the devices' last answers.
        wait = self.options.read_deadline_s
        if not first:
            wait = min(wait, self.options.interval_s / 2)
        return self._reader.read(wait)


@dataclass(frozen=True)
class Rounds:
    """One group's rounds: its reader (a worker per GPU) and the thread that asks it."""

    reader: DeadlineReader[GroupReading]
    periodic: Periodic[None]


def _default_factory(sampler: Sampler) -> Backend:
    annotator = sampler.annotator
    return open_backend(
        sampler.options.backend,
        simulated_devices=sampler.options.simulated_devices,
        simulated_faults=sampler.options.simulated_faults,
        simulated_epoch=simulated_epoch_from_env(),  # a server's kernels share its timeline
        pids=lambda: sorted(annotator.kernel_map),
        log=sampler.log,
        deadline_s=sampler.options.read_deadline_s,
        stop=sampler._stop,  # ends a simulated start-up hang when the server stops
    )
