/**
 * The one model of the GPU monitor: it owns the connection to the server and the client-side
 * history; views only read it and render.
 *
 * Connection, in order of preference:
 *  1. `GET devices`, then `GET history` (so charts fill at once), then the WebSocket stream;
 *  2. when the stream drops: reconnect with exponential backoff (2 s doubling to 30 s, ±20 %
 *     jitter), filling the gap from `GET history?since=<last sample>` before the stream resumes;
 *  3. when WebSockets are blocked (the socket never opens but HTTP works): poll
 *     `GET history?since=…` every refresh interval, and try the socket again now and then.
 * While nothing that shows the data is visible (or the browser tab is hidden) the model closes
 * the socket and stops every timer: a hidden monitor costs nothing.
 */
import { ISignal, Signal } from '@lumino/signaling';
import { SampleBuffer } from './buffer';
import {
  ApiError,
  IDevicesInfo,
  IGpuTransport,
  ISample,
  IStreamConnection
} from './types';

/** Where the connection stands, as the panel tells it. */
export type ConnectionStatus =
  /** Nothing has asked for data yet. */
  | 'idle'
  /** Loading devices and history, opening the stream. */
  | 'connecting'
  /** Streaming over the WebSocket. */
  | 'live'
  /** WebSockets are blocked: polling over HTTP. */
  | 'polling'
  /** The stream or the server went away: retrying with backoff. */
  | 'reconnecting'
  /** Hidden: no socket, no timers. */
  | 'paused'
  /** The API answered 404: the server extension is not enabled. */
  | 'disabled'
  /** The API answered 403: this user may not read GPU metrics. */
  | 'forbidden';

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
  /** Give up on a socket that has not opened after this long (ms). */
  openTimeoutMs?: number;
  /** Fall back to polling after this many sockets failed to open while HTTP worked. */
  socketFailuresBeforePolling?: number;
  /** While polling, try the socket again after this long (ms). */
  socketRetryMs?: number;
  /** Watch `document.visibilityState` (default: when there is a document). */
  watchPageVisibility?: boolean;
}

/** The socket failed to open (blocked, refused, timed out). */
class StreamOpenError extends Error {}

export class GpuMonitorModel {
  constructor(options: IModelOptions) {
    this._transport = options.transport;
    this._refreshMs = options.refreshMs ?? 1000;
    this.buffer = new SampleBuffer(options.windowS ?? 300);
    this._backoffBaseMs = options.backoffBaseMs ?? 2000;
    this._backoffMaxMs = options.backoffMaxMs ?? 30000;
    this._openTimeoutMs = options.openTimeoutMs ?? 10000;
    this._failuresBeforePolling = options.socketFailuresBeforePolling ?? 2;
    this._socketRetryMs = options.socketRetryMs ?? 60000;
    this._watchdogMs = options.watchdogMs ?? 5000;
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

  /** The newest sample, or `null`. */
  get latest(): ISample | null {
    return this._latest;
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
    return this._mode;
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

  /** How many times the model opened a socket, HTTP requests included (for tests, benchmarks). */
  get counters(): Readonly<{ sockets: number; requests: number }> {
    return this._counters;
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
    this._schedule(0);
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

  private _updateActivity(): void {
    const active = this.active;
    if (active === this._running) {
      return;
    }
    this._running = active;
    this._epoch++;
    if (active) {
      this._setStatus('connecting', null);
      this._failures = 0;
      this._schedule(0);
    } else {
      this._clearTickTimer();
      this._closeSocket();
      this._clearEmitTimer();
      this._setStatus(this._disposed ? 'idle' : 'paused', null);
    }
  }

  /** Run `_tick` after `delayMs` (replacing any tick already planned), if running. */
  private _schedule(delayMs: number): void {
    this._clearTickTimer();
    if (!this._running) {
      return;
    }
    this._tickTimer = setTimeout(() => {
      this._tickTimer = null;
      void this._runTick();
    }, delayMs);
  }

  private async _runTick(): Promise<void> {
    const epoch = this._epoch;
    if (this._tickingEpoch === epoch) {
      this._tickAgain = true; // asked for while one runs: run once more right after
      return;
    }
    this._tickingEpoch = epoch;
    let ok = true;
    try {
      await this._tick();
    } catch {
      ok = false;
    }
    if (epoch !== this._epoch) {
      return; // paused (and maybe resumed) meanwhile: that run plans its own ticks
    }
    this._tickingEpoch = null;
    this._failures = ok ? 0 : this._failures + 1;
    const again = this._tickAgain;
    this._tickAgain = false;
    this._schedule(again ? 0 : ok ? this._intervalMs() : this._backoffMs());
  }

  /** Until the next tick when all is well: the poll interval, or the stream's watchdog. */
  private _intervalMs(): number {
    if (this._mode === 'poll') {
      const serverMs = (this._info?.config.interval_s ?? 1) * 1000;
      return Math.max(this._refreshMs, serverMs);
    }
    return this._watchdogMs;
  }

  /** Until the next attempt after `_failures` failures in a row: doubling, with jitter. */
  private _backoffMs(): number {
    const exp = Math.min(this._failures - 1, 20);
    const target = Math.min(this._backoffMaxMs, this._backoffBaseMs * 2 ** exp);
    // Jitter spreads the reconnects of many browser tabs after a server restart.
    return Math.min(this._backoffMaxMs, target * (0.8 + 0.4 * Math.random()));
  }

  /** One step of the connection; a rejection makes the next one wait longer. */
  private async _tick(): Promise<void> {
    const epoch = this._epoch;
    const current = () => epoch === this._epoch && this._running;
    try {
      if (!this._info) {
        this._counters.requests++;
        const info = await this._transport.devices();
        if (!current()) {
          return;
        }
        this._info = info;
        this._emitChanged(true);
      }
      if (this._mode === 'stream' && this._socketOpen) {
        if (!this._isStale()) {
          return;
        }
        // Open but silent (a proxy that died quietly): replace the socket now.
        this._closeSocket();
        this._setStatus('reconnecting', 'The live stream went quiet.');
      }
      await this._fillFromHistory();
      if (!current()) {
        return;
      }
      if (this._mode === 'poll') {
        this._setStatus('polling', null);
        if (Date.now() < this._socketRetryAt) {
          return;
        }
        try {
          await this._openStream();
        } catch (err) {
          if (!(err instanceof StreamOpenError)) {
            throw err;
          }
          this._socketRetryAt = Date.now() + this._socketRetryMs;
          return;
        }
        this._setMode('stream');
        this._setStatus('live', null);
        return;
      }
      try {
        await this._openStream();
      } catch (err) {
        if (!(err instanceof StreamOpenError) || !current()) {
          throw err;
        }
        // HTTP works (the history just came) but the socket does not: WebSockets are blocked
        // (a proxy, a firewall) or failing; after a few tries, poll instead.
        if (++this._socketFailures >= this._failuresBeforePolling) {
          this._socketRetryAt = Date.now() + this._socketRetryMs;
          this._setMode('poll');
          this._setStatus('polling', null);
          return;
        }
        throw err;
      }
      this._socketFailures = 0;
      if (current()) {
        this._setStatus('live', null);
      }
    } catch (err) {
      if (current()) {
        this._onTickError(err);
      }
      throw err;
    }
  }

  private _onTickError(err: unknown): void {
    if (err instanceof ApiError && err.status === 404) {
      this._info = null; // the extension may be enabled later: ask for devices again
      this._setStatus(
        'disabled',
        'The jupyter-gpu server extension is not enabled (the API answered 404).'
      );
    } else if (err instanceof ApiError && err.status === 403) {
      this._setStatus(
        'forbidden',
        'This user may not read GPU metrics (the API answered 403).'
      );
    } else if (err instanceof StreamOpenError) {
      this._setStatus('reconnecting', 'The live stream did not open.');
    } else {
      const what = err instanceof Error ? err.message : String(err);
      this._setStatus('reconnecting', `Cannot reach the server: ${what}`);
    }
  }

  /** A stream that is open but silent for three sampling intervals (10 s at least) is dead. */
  private _isStale(): boolean {
    const intervalMs = (this._info?.config.interval_s ?? 1) * 1000;
    return Date.now() - this._lastMessageAt > Math.max(3 * intervalMs, 10000);
  }

  /** Fetch what the server has after our newest sample (all of it when we have none). */
  private async _fillFromHistory(): Promise<void> {
    const since = this.buffer.lastTs ?? undefined;
    const epoch = this._epoch;
    this._counters.requests++;
    const history = await this._transport.history(since);
    if (epoch === this._epoch) {
      this._ingest(history.samples, true); // show it at once, whatever the refresh interval
    }
  }

  private _openStream(): Promise<void> {
    this._closeSocket();
    this._counters.sockets++;
    return new Promise<void>((resolve, reject) => {
      let opened = false;
      const connection: IStreamConnection = this._transport.openStream({
        // Open means a first sample arrived: a proxy that accepts the socket and closes it at
        // once is as blocked as one that refuses it.
        onOpen: () => undefined,
        onSample: sample => {
          if (this._socket !== connection) {
            return;
          }
          if (!opened) {
            opened = true;
            this._clearOpenTimer();
            this._socketOpen = true;
            resolve();
          }
          this._onStreamSample(sample);
        },
        onClose: () => {
          if (this._socket !== connection) {
            return;
          }
          this._clearOpenTimer();
          this._socket = null;
          this._socketOpen = false;
          if (opened) {
            this._onStreamDropped();
          } else {
            reject(
              new StreamOpenError('the socket closed before its first sample')
            );
          }
        }
      });
      this._socket = connection;
      this._openTimer = setTimeout(() => {
        this._closeSocket();
        reject(new StreamOpenError('the socket did not open in time'));
      }, this._openTimeoutMs);
    });
  }

  private _onStreamDropped(): void {
    if (!this._running) {
      return;
    }
    this._setStatus('reconnecting', 'The live stream was interrupted.');
    // Tick now: fill the gap from history, then open a new socket (backing off on failure).
    this._schedule(0);
  }

  private _onStreamSample(sample: ISample): void {
    this._lastMessageAt = Date.now();
    const lastSeq = this._latest?.seq ?? null;
    const lastTs = this.buffer.lastTs;
    if (
      lastSeq !== null &&
      sample.seq < lastSeq &&
      lastTs !== null &&
      sample.ts > lastTs
    ) {
      // The sequence started again: the server restarted, maybe with other devices.
      void this._reloadInfo();
    } else if (
      lastSeq !== null &&
      lastTs !== null &&
      sample.seq > lastSeq + 1
    ) {
      // Samples were missed (between the history fill and the socket, say): fetch them.
      void this._backfill(lastTs);
    }
    this._ingest([sample]);
  }

  private async _backfill(since: number): Promise<void> {
    if (this._backfilling) {
      return;
    }
    this._backfilling = true;
    const epoch = this._epoch;
    try {
      this._counters.requests++;
      const history = await this._transport.history(since);
      if (epoch === this._epoch) {
        this._ingest(history.samples);
      }
    } catch {
      // The next reconnect fills the gap; a failed backfill only leaves a gap in the chart.
    } finally {
      this._backfilling = false;
    }
  }

  private async _reloadInfo(): Promise<void> {
    try {
      this._counters.requests++;
      this._info = await this._transport.devices();
      this._emitChanged(true);
    } catch {
      // Kept the old info; the next tick error says what is wrong.
    }
  }

  private _ingest(samples: readonly ISample[], now = false): void {
    if (!samples.length || this.buffer.add(samples) === 0) {
      return;
    }
    for (const sample of samples) {
      if (!this._latest || sample.ts > this._latest.ts) {
        this._latest = sample;
      }
    }
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
    if (this._emitTimer === null && this._running) {
      this._emitTimer = setTimeout(() => {
        this._emitTimer = null;
        this._lastEmit = Date.now();
        this._changed.emit();
      }, wait);
    }
  }

  private _clearEmitTimer(): void {
    if (this._emitTimer !== null) {
      clearTimeout(this._emitTimer);
      this._emitTimer = null;
    }
  }

  private _clearOpenTimer(): void {
    if (this._openTimer !== null) {
      clearTimeout(this._openTimer);
      this._openTimer = null;
    }
  }

  private _closeSocket(): void {
    this._clearOpenTimer();
    const socket = this._socket;
    this._socket = null;
    this._socketOpen = false;
    socket?.close();
  }

  private _setMode(mode: 'stream' | 'poll'): void {
    this._mode = mode;
  }

  private _clearTickTimer(): void {
    if (this._tickTimer !== null) {
      clearTimeout(this._tickTimer);
      this._tickTimer = null;
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

  private _transport: IGpuTransport;
  private _tickTimer: ReturnType<typeof setTimeout> | null = null;
  private _tickingEpoch: number | null = null;
  private _tickAgain = false;
  private _failures = 0;
  private _watchdogMs: number;
  private _info: IDevicesInfo | null = null;
  private _latest: ISample | null = null;
  private _status: ConnectionStatus = 'idle';
  private _error: string | null = null;
  private _mode: 'stream' | 'poll' = 'stream';
  private _consumers = new Map<string, boolean>();
  private _pageHidden = false;
  private _running = false;
  private _disposed = false;
  /** Incremented on every pause and resume, so that late answers of an old run are dropped. */
  private _epoch = 0;
  private _socket: IStreamConnection | null = null;
  private _socketOpen = false;
  private _socketFailures = 0;
  private _socketRetryAt = 0;
  private _lastMessageAt = 0;
  private _backfilling = false;
  private _refreshMs: number;
  private _backoffBaseMs: number;
  private _backoffMaxMs: number;
  private _openTimeoutMs: number;
  private _failuresBeforePolling: number;
  private _socketRetryMs: number;
  private _openTimer: ReturnType<typeof setTimeout> | null = null;
  private _emitTimer: ReturnType<typeof setTimeout> | null = null;
  private _lastEmit = 0;
  private _onVisibility: (() => void) | null = null;
  private _counters = { sockets: 0, requests: 0 };
  private _changed = new Signal<this, void>(this);
  private _statusChanged = new Signal<this, ConnectionStatus>(this);
}
