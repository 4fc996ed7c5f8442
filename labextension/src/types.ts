/**
 * The shapes of the jupyter-gpu server API v1 (see docs/api.md), and the transport the model
 * reads them through. Units are in the names; a value that could not be read is `null`.
 *
 * This module imports only the generated table of readings, so the model and its tests run
 * without JupyterLab. tests/unit/test_frontend_types.py holds every interface of a server
 * record to its OpenAPI schema.
 */
import type { IDeviceReadings, ReadingGroup } from './readings.generated';

/** One GPU as `GET devices` lists it (static facts). */
export interface IDeviceInfo {
  index: number;
  uuid: string | null;
  name: string | null;
  mem_total_bytes: number | null;
  power_limit_w: number | null;
  pci_bus_id: string | null;
  /** Set when the device is a MIG instance: its physical GPU and instance (null: whole GPU). */
  mig?: IMigInfo | null;
}

/** Where a MIG instance lives: its physical GPU and instance ids (`nvidia-smi -L`). */
export interface IMigInfo {
  parent_index: number;
  parent_uuid: string | null;
  gpu_instance_id: number | null;
  compute_instance_id: number | null;
  /** Its size as NVIDIA names it (`1g.18gb`). */
  profile: string | null;
}

/** The sampler's configuration, as the server reports it. */
export interface IServerConfig {
  interval_s: number;
  history_s: number;
  slow_metrics?: boolean;
  slow_interval_s?: number;
  cache_scan_interval_s?: number;
  gpm_metrics?: boolean;
  gpm_interval_s?: number;
  idle_holder_minutes?: number;
  idle_holder_gib?: number;
  /** Seconds of min/mean/max buckets the server keeps after `history_s`. */
  long_history_s?: number;
  /** The width of those buckets (s). */
  history_bucket_s?: number;
}

/** `GET devices`: what is there. */
export interface IDevicesInfo {
  api_version: string;
  backend: 'nvml' | 'simulated' | 'none' | string;
  simulated: boolean;
  gpu_available: boolean;
  reason: string | null;
  driver_version: string | null;
  cuda_driver_version: string | null;
  hostname: string | null;
  /** The server package's version. */
  jupyter_gpu_version?: string;
  devices: IDeviceInfo[];
  /** Seconds NVML has not answered for while the server starts it (null once it has). */
  nvml_wait_s?: number | null;
  config: IServerConfig;
}

/**
 * A process that holds memory on a GPU, with the notebook that owns it when known; or a row
 * that stands for several (`pid` null): other users' processes (`scope: 'other'`), or pids
 * that match nothing visible from this server (`'unattributable'`, `reason` says why).
 */
export interface IGpuProcess {
  /** `null` where the server cannot say (a process in another pid namespace). */
  pid: number | null;
  name: string | null;
  used_mem_bytes: number | null;
  kernel_id: string | null;
  notebook: string | null;
  /** Seconds since the kernel's last activity (0 while busy); null for other processes. */
  idle_s?: number | null;
  /** Idle longer than `idle_holder_minutes` while holding more than `idle_holder_gib`. */
  idle_holder?: boolean;
  scope?: 'server' | 'other' | 'unattributable' | string;
  process_count?: number;
  reason?: string | null;
}

/**
 * One GPU in one sample. Its readings and each group's age (`util_pct`, …, `read_age_s`, …)
 * are declared once, in the server's catalog: `IDeviceReadings` is written from it
 * (readings.generated.ts).
 */
export interface IDeviceSample extends IDeviceReadings {
  index: number;
  uuid: string | null;
  name: string | null;
  state: 'ok' | 'lost' | 'error' | 'not_responding' | string;
  error: string | null;
  processes?: IGpuProcess[] | null;
  unavailable?: { [field: string]: string } | null;
  /** Seconds since a `not_responding` GPU last answered (null otherwise). */
  stale_s?: number | null;
  /**
   * The groups older than two of their own intervals (their fields are then null here):
   * `fast`, `gpm`, `pcie`…; see freshness.ts. Absent from older servers (nothing stale).
   */
  stale?: (ReadingGroup | string)[] | null;
}

/** The host's CPU and memory (cgroup limits where there are some). */
export interface IHostSample {
  cpu_pct: number | null;
  cpu_count: number | null;
  mem_used_bytes: number | null;
  mem_total_bytes: number | null;
  mem_limit_source?: string | null;
}

/** The torch.compile caches on disk (inductor, triton, …), scanned now and then. */
export interface ICompileCacheSample {
  size_bytes: number | null;
  file_count: number | null;
  scanned_ts: number | null;
  dirs?: ICacheDir[];
  /** A cache's filesystem has less than `cache_min_free_pct` free. */
  low_space?: boolean;
}

/** One torch.compile cache directory (the server's own, or a kernel's). */
export interface ICacheDir {
  kind: string;
  path: string;
  exists: boolean;
  size_bytes: number;
  file_count: number;
  /** What `POST compile-cache/clear` names it by (never its path). */
  id?: string;
  source?: 'server' | 'kernel' | string;
  clearable?: boolean;
  /** Why it may not be cleared. */
  refusal?: string | null;
  fs_free_bytes?: number | null;
  fs_total_bytes?: number | null;
}

/** `POST compile-cache/clear`: what was removed. */
export interface ICacheCleared {
  id: string;
  kind: string;
  path: string;
  freed_bytes: number;
  files_removed: number;
  failed: string[];
}

/** One tick of the server's sampler. `ts` is Unix time in seconds. */
export interface ISample {
  seq: number;
  ts: number;
  backend: string;
  simulated: boolean;
  reason: string | null;
  devices: IDeviceSample[];
  host: IHostSample | null;
  compile_cache: ICompileCacheSample | null;
  /**
   * Seconds NVML has not answered for while the server starts it (`nvmlInit` or counting the
   * GPUs hung): no devices meanwhile, the host still sampled; null once it has answered.
   */
  nvml_wait_s?: number | null;
  /** Seconds since it was sampled, when the server sent it (snapshot and stream only). */
  age_s?: number;
}

/** `GET history`: the server's ring buffer, oldest first. */
export interface IHistory {
  interval_s: number;
  samples: ISample[];
}

/** A column's min, mean and max per row (`null`: no reading in that row). */
export interface IColumnStats {
  min: (number | null)[];
  mean: (number | null)[];
  max: (number | null)[];
}

/** `GET history?points=…` (or `resolution=`): columns at a resolution, oldest first. */
export interface IHistoryColumns {
  interval_s: number;
  bucket_s: number;
  resolution_s: number;
  /** Each row's start, Unix seconds. */
  ts: number[];
  /** By column: `gpu.<i>.<field>`, `host.cpu_pct`, `host.mem_used_bytes`, `cache.size_bytes`. */
  series: { [column: string]: IColumnStats };
}

/** What to ask `GET history` for in columns. */
export interface IColumnsQuery {
  since?: number;
  points?: number;
  resolution?: number;
  limit?: number;
}

/** An HTTP answer other than 2xx, or no answer at all (`status` 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** Callbacks of one WebSocket stream. */
export interface IStreamHandlers {
  /** A sample arrived. */
  onSample(sample: ISample): void;
  /**
   * The socket closed (or never opened); not called after `close()` by the caller. `code`
   * and `reason` are the server's close frame's (1013 and why, for a client over the
   * server's limit); 1006 when the connection just ended.
   */
  onClose(code?: number, reason?: string): void;
}

/** An open (or opening) stream; `close()` ends it without calling `onClose`. */
export interface IStreamConnection {
  close(): void;
}

/**
 * How the model reaches the server. The real one (`api.ts`) goes through JupyterLab's
 * ServerConnection; tests give the model a scripted one.
 */
export interface IGpuTransport {
  /** `GET devices`. Rejects with an `ApiError`. */
  devices(): Promise<IDevicesInfo>;
  /** `GET history?since=<ts>` (all of it without `since`). Rejects with an `ApiError`. */
  history(since?: number): Promise<IHistory>;
  /** `GET history` as columns (the dashboard's long ranges). Rejects with an `ApiError`. */
  historyColumns?(query: IColumnsQuery): Promise<IHistoryColumns>;
  /** Open the WebSocket stream. */
  openStream(handlers: IStreamHandlers): IStreamConnection;
}
