/**
 * The one model of the GPU monitor: it holds the device info and the client-side history, and
 * tells views when they changed (at most once per refresh interval); views only read it and
 * render. Its `Connection` (connection.ts) gets the data. While nothing that shows the data is
 * visible (or the browser tab is hidden) the connection is stopped: no socket, no timer, a
 * hidden monitor costs nothing.
 */
import { ISignal, Signal } from '@lumino/signaling';
import { gpuKey, Metric, SampleBuffer } from './buffer';
import { Connection, ConnectionStatus, IConnectionSink } from './connection';
import {
  freshnessOf,
  GROUP_METRICS,
  IDeviceFreshness,
  ILastKnown,
  lastKnown,
  ReadingGroup,
  staleAgeS
} from './freshness';
import { CellMarkers } from './markers';
import { IDeviceSample, IDevicesInfo, IGpuTransport, ISample } from './types';

export type { ConnectionStatus } from './connection';

/** Options of the model; the defaults suit a browser. */
export interface IModelOptions {
  transport: IGpuTransport;
  /** Views are told about new data at most this often (ms). */
  refreshMs?: number;
  /** How much history the client keeps and charts show (s). */
  windowS?: number;
  /** First wait before a reconnect attempt (ms); doubles on each failure. */
  backoffBaseMs?: number;
  /** While streaming, check this often that samples still arrive (ms). */
  watchdogMs?: number;
  /** Longest wait between reconnect attempts (ms). */
  backoffMaxMs?: number;
  /** Give up on a socket that has not delivered a first sample after this long (ms). */
  openTimeoutMs?: number;
  /** Fall back to polling after this many sockets failed to open while HTTP worked. */
  socketFailuresBeforePolling?: number;
  /** While polling, try the socket again after this long (ms). */
  socketRetryMs?: number;
  /** Watch `document.visibilityState` (default: when there is a document). */
  watchPageVisibility?: boolean;
}

export class GpuMonitorModel {
  constructor(options: IModelOptions) {
    this._refreshMs = options.refreshMs ?? 1000;
    this._transport = options.transport;
    this.buffer = new SampleBuffer(options.windowS ?? 300);
    this._connection = new Connection(options.transport, this, this._sink(), {
      backoffBaseMs: options.backoffBaseMs ?? 2000,
      backoffMaxMs: options.backoffMaxMs ?? 30000,
      watchdogMs: options.watchdogMs ?? 5000,
      openTimeoutMs: options.openTimeoutMs ?? 10000,
      socketFailuresBeforePolling: options.socketFailuresBeforePolling ?? 2,
      socketRetryMs: options.socketRetryMs ?? 60000
    });
    const watch =
      options.watchPageVisibility ?? typeof document !== 'undefined';
    if (watch) {
      this._onVisibility = () => this.setPageHidden(document.hidden);
      document.addEventListener('visibilitychange', this._onVisibility);
      this._pageHidden = document.hidden;
    }
  }

  /** The client-side history, trimmed to the window. */
  readonly buffer: SampleBuffer;

  /** Cell executions, as bands on the charts (index.ts feeds them from JupyterLab). */
  readonly markers = new CellMarkers();

  /** The transport (the dashboard reads long ranges through it). */
  get transport(): IGpuTransport {
    return this._transport;
  }

  /**
   * Now on the server's clock (Unix s): the browser's clock plus the offset that the newest
   * samples show (a sample is stamped before it arrives, so the largest offset seen lately is
   * the closest).
   */
  serverNow(): number {
    return Date.now() / 1000 + this._clockOffset;
  }

  /** A notebook's code cell was scheduled to run (NotebookActions.executionScheduled). */
  cellScheduled(notebook: string, cellId: string, source: string): void {
    this.markers.scheduled(notebook, cellId, source, this.serverNow());
    this._emitChanged(true);
  }

  /** It finished (NotebookActions.executed). */
  cellExecuted(
    notebook: string,
    cellId: string,
    executionCount: number | null,
    success: boolean
  ): void {
    const marker = this.markers.executed(
      notebook,
      cellId,
      executionCount,
      success,
      this.serverNow()
    );
    if (marker) {
      this._emitChanged(true);
    }
  }

  /** New data (throttled to the refresh interval) or new device info. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** The connection status changed. */
  get statusChanged(): ISignal<this, ConnectionStatus> {
    return this._statusChanged;
  }

  /** `GET devices` as last read, or `null` before the first answer. */
  get info(): IDevicesInfo | null {
    return this._info;
  }

  /**
   * Seconds since the latest sample was taken (by this page's clock: when it arrived, less
   * the age the server gave it), `null` before the first.
   */
  get dataAgeS(): number | null {
    return this._latest ? (Date.now() - this._latestAt) / 1000 : null;
  }

  /** The newest sample, or `null`. */
  get latest(): ISample | null {
    return this._latest;
  }

  /**
   * How fresh GPU `index`'s readings are in the newest sample: per group (fast, GPM, PCIe)
   * whether it is stale and how old (freshness.ts). Nothing is stale before the first sample.
   */
  freshness(index: number): IDeviceFreshness {
    const device = this._latest?.devices.find(d => d.index === index);
    return freshnessOf(device);
  }

  /**
   * The newest reading of GPU `index`'s `metric` in the buffer, and its time: what a stale
   * reading shows (greyed), or `null` when the window holds none.
   */
  lastKnown(index: number, metric: Metric): ILastKnown | null {
    const key = gpuKey(index, metric);
    if (!this.buffer.has(key)) {
      return null;
    }
    return lastKnown(this.buffer.ts, this.buffer.column(key));
  }

  /**
   * Seconds since GPU `index`'s `group` of readings was last read, at the newest sample's
   * time: the server's figure, else the time since its newest value in the buffer; `null`
   * when the buffer holds none of its values (nothing to give an age to; PCIe is not kept).
   */
  readAgeS(index: number, group: ReadingGroup): number | null {
    const known = GROUP_METRICS[group].map(m => this.lastKnown(index, m));
    return staleAgeS(
      this.freshness(index)[group],
      known,
      this._latest?.ts ?? 0
    );
  }

  /**
   * GPU `index` as it was in the newest sample whose fast readings were live (its processes,
   * while they are stale), with that sample's time; `null` when none arrived.
   */
  lastLive(index: number): { device: IDeviceSample; ts: number } | null {
    return this._lastLive.get(index) ?? null;
  }

  get status(): ConnectionStatus {
    return this._status;
  }

  /** What went wrong last, in words for people; `null` while all is well. */
  get error(): string | null {
    return this._error;
  }

  /** `stream` (WebSocket) or `poll` (HTTP, when WebSockets are blocked). */
  get mode(): 'stream' | 'poll' {
    return this._connection.mode;
  }

  /** Whether something visible wants data now. */
  get active(): boolean {
    if (this._disposed || this._pageHidden) {
      return false;
    }
    for (const visible of this._consumers.values()) {
      if (visible) {
        return true;
      }
    }
    return false;
  }

  get refreshMs(): number {
    return this._refreshMs;
  }
  set refreshMs(value: number) {
    if (value === this._refreshMs) {
      return;
    }
    this._refreshMs = value;
    this._emitChanged(true);
  }

  get windowS(): number {
    return this.buffer.windowS;
  }
  set windowS(value: number) {
    if (value === this.buffer.windowS) {
      return;
    }
    this.buffer.windowS = value;
    this._emitChanged(true);
  }

  /**
   * Say whether a consumer (the panel, the status-bar item) is visible. The model runs while
   * at least one is and the page is not hidden.
   */
  setVisible(consumer: string, visible: boolean): void {
    this._consumers.set(consumer, visible);
    this._updateActivity();
  }

  /** The browser tab was hidden or shown (the model listens for this itself in a browser). */
  setPageHidden(hidden: boolean): void {
    this._pageHidden = hidden;
    this._updateActivity();
  }

  /** Try the server again now instead of waiting for the backoff. */
  retryNow(): void {
    this._connection.retryNow();
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._updateActivity();
    if (this._onVisibility) {
      document.removeEventListener('visibilitychange', this._onVisibility);
    }
    Signal.clearData(this);
  }

  /** What the connection hands back; private, so views cannot write to the model. */
  private _sink(): IConnectionSink {
    return {
      setInfo: info => {
        this._info = info;
        if (info) {
          this._emitChanged(true);
        }
      },
      ingest: (samples, now) => this._ingest(samples, now),
      setStatus: (status, error) => this._setStatus(status, error)
    };
  }

  private _updateActivity(): void {
    const active = this.active;
    if (active === this._connection.running) {
      return;
    }
    if (active) {
      this._connection.start();
      this._setStatus('connecting', null);
    } else {
      this._connection.stop();
      this._clearEmitTimer();
      this._setStatus(this._disposed ? 'idle' : 'paused', null);
    }
  }

  private _ingest(samples: readonly ISample[], now: boolean): void {
    if (!samples.length || this.buffer.add(samples) === 0) {
      return;
    }
    const arrived = Date.now() / 1000;
    for (const sample of samples) {
      if (!this._latest || sample.ts > this._latest.ts) {
        this._latest = sample;
        this._latestAt = Date.now() - (sample.age_s ?? 0) * 1000;
        this._noteClock(sample.ts - arrived);
      }
    }
    for (const sample of samples) {
      for (const device of sample.devices ?? []) {
        const held = this._lastLive.get(device.index);
        if (
          device.state === 'ok' &&
          !freshnessOf(device).fast.stale &&
          (!held || sample.ts > held.ts)
        ) {
          this._lastLive.set(device.index, { device, ts: sample.ts });
        }
      }
    }
    this.markers.addSamples(samples);
    this._emitChanged(now);
  }

  /** Tell views about new data, at most once per refresh interval (now if `force`). */
  private _emitChanged(force: boolean): void {
    if (this._disposed) {
      return;
    }
    const wait = this._lastEmit + this._refreshMs - Date.now();
    // A sample a few ms early still counts as on time: the server's ticks jitter.
    if (force || wait <= this._refreshMs * 0.1) {
      this._clearEmitTimer();
      this._lastEmit = Date.now();
      this._changed.emit();
      return;
    }
    if (this._emitTimer === null && this._connection.running) {
      this._emitTimer = setTimeout(() => {
        this._emitTimer = null;
        this._lastEmit = Date.now();
        this._changed.emit();
      }, wait);
    }
  }

  private _noteClock(offset: number): void {
    const offsets = this._offsets;
    offsets.push(offset);
    if (offsets.length > 30) {
      offsets.shift();
    }
    this._clockOffset = Math.max(...offsets);
  }

  private _clearEmitTimer(): void {
    if (this._emitTimer !== null) {
      clearTimeout(this._emitTimer);
      this._emitTimer = null;
    }
  }

  private _setStatus(status: ConnectionStatus, error: string | null): void {
    if (status === this._status && error === this._error) {
      return;
    }
    this._status = status;
    this._error = error;
    this._statusChanged.emit(status);
  }

  private _connection: Connection;
  private _transport: IGpuTransport;
  private _clockOffset = 0;
  private _offsets: number[] = [];
  private _info: IDevicesInfo | null = null;
  private _latest: ISample | null = null;
  private _latestAt = 0;
  private _lastLive = new Map<number, { device: IDeviceSample; ts: number }>();
  private _status: ConnectionStatus = 'idle';
  private _error: string | null = null;
  private _consumers = new Map<string, boolean>();
  private _pageHidden = false;
  private _disposed = false;
  private _refreshMs: number;
  private _emitTimer: ReturnType<typeof setTimeout> | null = null;
  private _lastEmit = 0;
  private _onVisibility: (() => void) | null = null;
  private _changed = new Signal<this, void>(this);
  private _statusChanged = new Signal<this, ConnectionStatus>(this);
}
