/**
 * How the model gets its data, in order of preference:
 *  1. `GET devices`, then `GET history` (so charts fill at once), then the WebSocket stream;
 *  2. when the stream drops: reconnect with exponential backoff (2 s doubling to 30 s, ±20 %
 *     jitter), filling the gap from `GET history?since=<last sample>` before the stream resumes;
 *  3. when WebSockets are blocked (the socket never opens but HTTP works): poll
 *     `GET history?since=…` every refresh interval, and try the socket again now and then;
 *  4. when the server refuses the socket (it streams to as many clients as it allows): say
 *     its reason and try again after a minute (history filled each time), never sooner.
 * When NVML had not answered at the server's start (`nvml_wait_s`), `GET devices` is read
 * again once a sample says it has. Stopped, it holds no socket and no timer.
 */
import { trans } from './i18n';
import { backoffMs, TickScheduler } from './scheduler';
import {
  LiveStream,
  StreamOpenError,
  StreamRefusedError,
  TransportMode
} from './stream';
import { ApiError, IDevicesInfo, IGpuTransport, ISample } from './types';

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
  /** The API answered 403 for authorization: this user may not read GPU metrics. */
  | 'forbidden'
  /** The API answered 403 for authentication: the login expired or the token changed. */
  | 'signed-out'
  /** The API answered 503 with the server's configuration error. */
  | 'misconfigured'
  /** The server refused the stream: it serves as many clients as it allows. */
  | 'refused'
  /** The server speaks another version of the API. */
  | 'incompatible';

/** The API version this frontend speaks (`api_version` of `GET devices`). */
export const API_VERSION = '1';

/** After the server refused the stream, the next attempt waits this long (ms, ±20 %). */
export const REFUSED_RETRY_MS = 60000;

/** The error for a server that speaks another API version. */
export class IncompatibleApiError extends Error {
  constructor(readonly serverVersion: string) {
    super(serverVersion);
  }
}

/** What the connection reads of the model (the model itself). */
export interface IConnectionState {
  /** `GET devices` as last read. */
  readonly info: IDevicesInfo | null;
  /** The newest sample held (its `seq` tells a restarted server and missed samples). */
  readonly latest: ISample | null;
  /** The history held: its newest time (Unix s) is where `GET history?since=` starts. */
  readonly buffer: { readonly lastTs: number | null };
  /** How often views redraw (ms): the poll interval when WebSockets are blocked. */
  readonly refreshMs: number;
}

/** What the connection hands to the model. */
export interface IConnectionSink {
  /** New device info (`null`: ask again on the next step). */
  setInfo(info: IDevicesInfo | null): void;
  /** New samples, in any order; `now`: show them at once, whatever the refresh interval. */
  ingest(samples: readonly ISample[], now: boolean): void;
  setStatus(status: ConnectionStatus, error: string | null): void;
}

/** Timings of the connection (ms); the model's options give them. */
export interface IConnectionTimings {
  backoffBaseMs: number;
  backoffMaxMs: number;
  watchdogMs: number;
  openTimeoutMs: number;
  socketFailuresBeforePolling: number;
  socketRetryMs: number;
}

export class Connection {
  constructor(
    transport: IGpuTransport,
    state: IConnectionState,
    sink: IConnectionSink,
    timings: IConnectionTimings
  ) {
    this._transport = transport;
    this._state = state;
    this._sink = sink;
    this._watchdogMs = timings.watchdogMs;
    this._scheduler = new TickScheduler({
      tick: () => this._tick(),
      intervalMs: () => this._intervalMs(),
      backoffBaseMs: timings.backoffBaseMs,
      backoffMaxMs: timings.backoffMaxMs
    });
    this._stream = new LiveStream({
      transport,
      openTimeoutMs: timings.openTimeoutMs,
      onSample: sample => this._onStreamSample(sample),
      onDropped: () => this._onStreamDropped()
    });
    this._mode = new TransportMode(
      timings.socketFailuresBeforePolling,
      timings.socketRetryMs
    );
  }

  get running(): boolean {
    return this._scheduler.running;
  }

  /** `stream` (WebSocket) or `poll` (HTTP, when WebSockets are blocked). */
  get mode(): 'stream' | 'poll' {
    return this._mode.mode;
  }

  /** Connect (the first step at once). */
  start(): void {
    this._scheduler.start();
  }

  /** Close the socket and drop every timer; answers still on their way are ignored. */
  stop(): void {
    this._scheduler.stop();
    this._stream.close();
  }

  /** Try the server again now instead of waiting for the backoff. */
  retryNow(): void {
    this._scheduler.schedule(0);
  }

  /** Until the next step when all is well: the poll interval, or the stream's watchdog. */
  private _intervalMs(): number {
    const refused = this._refusedUntil - Date.now();
    if (refused > 0) {
      return refused;
    }
    if (this.mode === 'poll') {
      return Math.max(this._state.refreshMs, this._serverIntervalS() * 1000);
    }
    return this._watchdogMs;
  }

  private _serverIntervalS(): number {
    return this._state.info?.config.interval_s ?? 1;
  }

  /** One step of the connection; a rejection makes the next one wait longer. */
  private async _tick(): Promise<void> {
    const epoch = this._scheduler.epoch;
    const current = () => this._scheduler.isCurrent(epoch);
    const sink = this._sink;
    try {
      if (!this._state.info || this._recheckInfo) {
        // Also after the stream dropped: the server may have restarted with other devices.
        const info = await this._transport.devices();
        if (!current()) {
          return;
        }
        if (String(info.api_version) !== API_VERSION) {
          throw new IncompatibleApiError(String(info.api_version));
        }
        this._recheckInfo = false;
        if (!sameInfo(info, this._state.info)) {
          sink.setInfo(info);
        }
      }
      if (this.mode === 'stream' && this._stream.isOpen) {
        if (!this._stream.isStale(this._serverIntervalS())) {
          return;
        }
        // Open but silent (a proxy that died quietly): replace the socket now.
        this._stream.close();
        sink.setStatus('reconnecting', trans.__('The live stream went quiet.'));
      }
      await this._fillFromHistory();
      if (!current()) {
        return;
      }
      if (this.mode === 'poll') {
        sink.setStatus('polling', null);
        if (this._mode.mayRetrySocket && !this._retrying) {
          // Try the socket beside the polling, not instead of it: a silent one must not
          // freeze the charts for its open timeout.
          this._retrying = true;
          this._stream.open().then(
            () => {
              this._retrying = false;
              if (current()) {
                this._mode.socketOpened();
                sink.setStatus('live', null);
              }
            },
            (err: unknown) => {
              this._retrying = false;
              this._mode.socketFailed(
                err instanceof StreamOpenError && err.silent
              );
            }
          );
        }
        return;
      }
      try {
        await this._stream.open();
      } catch (err) {
        if (err instanceof StreamRefusedError && current()) {
          // Not blocked WebSockets and not a failure to back off from: the server is full.
          // The history just came; say why there is no live stream, and ask again later.
          this._refusedUntil =
            Date.now() + backoffMs(1, REFUSED_RETRY_MS, REFUSED_RETRY_MS);
          sink.setStatus('refused', err.reason);
          return;
        }
        if (!(err instanceof StreamOpenError) || !current()) {
          throw err;
        }
        // HTTP works (the history just came) but the socket does not: WebSockets are blocked
        // (a proxy, a firewall) or failing; after a silent one or a few refused, poll instead.
        if (this._mode.socketFailed(err.silent)) {
          sink.setStatus('polling', null);
          return;
        }
        throw err;
      }
      this._mode.socketOpened();
      this._refusedUntil = 0;
      if (current()) {
        sink.setStatus('live', null);
      }
    } catch (err) {
      if (current()) {
        this._onTickError(err);
      }
      throw err;
    }
  }

  private _onTickError(err: unknown): void {
    const sink = this._sink;
    if (err instanceof IncompatibleApiError) {
      sink.setStatus(
        'incompatible',
        trans.__(
          "The server's jupyter-gpu speaks API version %1; this JupyterLab extension speaks version %2.",
          err.serverVersion,
          API_VERSION
        )
      );
    } else if (
      err instanceof ApiError &&
      err.status === 503 &&
      isConfigError(err)
    ) {
      sink.setStatus('misconfigured', err.message);
    } else if (
      err instanceof ApiError &&
      err.status === 403 &&
      !isAuthzError(err)
    ) {
      sink.setStatus(
        'signed-out',
        trans.__(
          'The server no longer accepts this login (the API answered 403 Forbidden): it expired, or the server restarted with another token.'
        )
      );
    } else if (err instanceof ApiError && err.status === 404) {
      sink.setInfo(null); // the extension may be enabled later: ask for devices again
      sink.setStatus(
        'disabled',
        trans.__(
          'The jupyter-gpu server extension is not enabled (the API answered 404).'
        )
      );
    } else if (err instanceof ApiError && err.status === 403) {
      sink.setStatus(
        'forbidden',
        trans.__(
          'The server refused this user access to GPU metrics (403): %1',
          err.message
        )
      );
    } else if (err instanceof StreamOpenError) {
      sink.setStatus('reconnecting', trans.__('The live stream did not open.'));
    } else {
      const what = err instanceof Error ? err.message : String(err);
      sink.setStatus(
        'reconnecting',
        trans.__('Cannot reach the server: %1', what)
      );
    }
  }

  /**
   * Fetch what the server has after our newest sample (all of it when we have none), or from
   * the oldest gap no answer has filled yet.
   */
  private async _fillFromHistory(): Promise<void> {
    const samples = await this._historyFromHole(true);
    if (samples) {
      this._noteNvmlAnswered(samples[samples.length - 1]);
    }
  }

  /**
   * `GET history` from the oldest point data may be missing after, into the model (`now`:
   * shown at once). `null` when the connection stopped meanwhile: the answer is dropped and
   * the hole stays noted, so the next fill asks from it (a backfill's answer that came after
   * the tab was hidden once left a hole for good).
   */
  private async _historyFromHole(now: boolean): Promise<ISample[] | null> {
    const last = this._state.buffer.lastTs;
    const hole = this._holeSince;
    const since = hole === null || (last !== null && last < hole) ? last : hole;
    const holesNoted = this._holesNoted;
    const epoch = this._scheduler.epoch;
    const history = await this._transport.history(since ?? undefined);
    if (epoch !== this._scheduler.epoch) {
      return null;
    }
    this._sink.ingest(history.samples, now);
    if (this._holesNoted === holesNoted) {
      this._holeSince = null; // a hole seen meanwhile may be newer than this answer
    }
    return history.samples;
  }

  /**
   * `GET devices` said NVML had not answered yet; `sample` says it has: read the devices
   * again (the GPUs came in without a restart).
   */
  private _noteNvmlAnswered(sample: ISample | undefined): void {
    const waiting = this._state.info?.nvml_wait_s ?? null;
    if (sample && waiting !== null && (sample.nvml_wait_s ?? null) === null) {
      void this._reloadInfo();
    }
  }

  private _onStreamDropped(): void {
    if (!this._scheduler.running) {
      return;
    }
    this._recheckInfo = true;
    this._sink.setStatus(
      'reconnecting',
      trans.__('The live stream was interrupted.')
    );
    // Step now: fill the gap from history, then open a new socket (backing off on failure).
    this._scheduler.schedule(0);
  }

  private _onStreamSample(sample: ISample): void {
    const lastSeq = this._state.latest?.seq ?? null;
    const lastTs = this._state.buffer.lastTs;
    if (lastSeq !== null && lastTs !== null) {
      if (sample.seq < lastSeq && sample.ts > lastTs) {
        // The sequence started again: the server restarted, maybe with other devices.
        void this._reloadInfo();
      } else if (sample.seq > lastSeq + 1) {
        // Samples were missed (between the history fill and the socket, say): fetch them.
        this._holeSince = Math.min(this._holeSince ?? lastTs, lastTs);
        this._holesNoted++;
        void this._backfill();
      }
    }
    this._sink.ingest([sample], false);
    this._noteNvmlAnswered(sample);
  }

  private async _backfill(): Promise<void> {
    if (this._backfilling) {
      // One is in flight, and the server may have answered it before this hole's samples
      // existed: ask again once it is done.
      this._backfillAgain = true;
      return;
    }
    this._backfilling = true;
    const epoch = this._scheduler.epoch;
    try {
      await this._historyFromHole(false);
    } catch {
      // The hole stays noted: the next backfill or reconnect asks from it.
    } finally {
      this._backfilling = false;
      const again = this._backfillAgain;
      this._backfillAgain = false;
      if (again && epoch === this._scheduler.epoch) {
        void this._backfill();
      }
    }
  }

  private async _reloadInfo(): Promise<void> {
    if (this._reloading) {
      return;
    }
    this._reloading = true;
    try {
      this._sink.setInfo(await this._transport.devices());
    } catch {
      // Kept the old info; the next step's error says what is wrong.
    } finally {
      this._reloading = false;
    }
  }

  private _transport: IGpuTransport;
  private _state: IConnectionState;
  private _sink: IConnectionSink;
  private _scheduler: TickScheduler;
  private _stream: LiveStream;
  private _mode: TransportMode;
  private _watchdogMs: number;
  private _backfilling = false;
  /** A hole seen while a backfill was in flight: ask again when it is done. */
  private _backfillAgain = false;
  /** Where samples may be missing after (Unix s): the oldest hole no answer has filled yet. */
  private _holeSince: number | null = null;
  /** Holes seen so far: an answer clears `_holeSince` only if none was seen while it came. */
  private _holesNoted = 0;
  private _reloading = false;
  /** While the server refuses the stream: when to ask again (ms since the epoch). */
  private _refusedUntil = 0;
  private _recheckInfo = false;
  private _retrying = false;
}

/** Whether two `GET devices` answers say the same (a restarted server usually does). */
function sameInfo(a: IDevicesInfo, b: IDevicesInfo | null): boolean {
  return b !== null && JSON.stringify(a) === JSON.stringify(b);
}

/** jupyter_server's `@authorized` refusal (authentication failures say only "Forbidden"). */
function isAuthzError(err: ApiError): boolean {
  return /not authorized/i.test(err.message);
}

/** The extension's 503 for an invalid configuration (see docs/api.md). */
function isConfigError(err: ApiError): boolean {
  return /invalid configuration/i.test(err.message);
}
