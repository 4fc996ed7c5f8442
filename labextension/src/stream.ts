/**
 * How samples travel: the WebSocket stream (one socket at a time, "open" once a first sample
 * came), and the choice between streaming and polling over HTTP when WebSockets are blocked.
 */
import { IGpuTransport, ISample, IStreamConnection } from './types';

/**
 * The socket failed to open: refused or closed before a first sample, or (`silent`) still
 * open but silent after the open timeout, as behind a proxy that accepts WebSockets and then
 * forwards nothing.
 */
export class StreamOpenError extends Error {
  constructor(
    message: string,
    readonly silent = false
  ) {
    super(message);
  }
}

/** The close code of a client over the server's limit (RFC 6455's "try again later"). */
export const CLOSE_TOO_MANY_CLIENTS = 1013;

/**
 * The server refused the socket: it streams to as many clients as it allows
 * (`JupyterGpu.max_stream_clients`). `reason` is its close frame's, for people.
 */
export class StreamRefusedError extends StreamOpenError {
  constructor(readonly reason: string) {
    super(reason || 'the server refused the live stream');
  }
}

export interface ILiveStreamOptions {
  transport: IGpuTransport;
  /** Give up on a socket that has not delivered a first sample after this long (ms). */
  openTimeoutMs: number;
  /** Every sample of the open socket. */
  onSample: (sample: ISample) => void;
  /** The open socket closed by itself (not by `close()`). */
  onDropped: () => void;
}

/** The stream's one socket. */
export class LiveStream {
  constructor(options: ILiveStreamOptions) {
    this._options = options;
  }

  /** Whether a socket is open (it delivered a sample and has not closed). */
  get isOpen(): boolean {
    return this._open;
  }

  /**
   * Whether the open socket has been silent for three sampling intervals (10 s at least):
   * a proxy that died quietly leaves a socket open that delivers nothing.
   */
  isStale(intervalS: number): boolean {
    return (
      Date.now() - this._lastMessageAt > Math.max(3 * intervalS * 1000, 10000)
    );
  }

  /**
   * Open a new socket (closing the one there is). Resolves at its first sample: a proxy that
   * accepts the socket and closes it at once is as blocked as one that refuses it. Rejects
   * with a `StreamOpenError`.
   */
  open(): Promise<void> {
    this.close();
    return new Promise<void>((resolve, reject) => {
      let opened = false;
      const connection: IStreamConnection = this._options.transport.openStream({
        onSample: sample => {
          if (this._socket !== connection) {
            return;
          }
          this._lastMessageAt = Date.now();
          if (!opened) {
            opened = true;
            this._clearOpenTimer();
            this._open = true;
            resolve();
          }
          this._options.onSample(sample);
        },
        onClose: (code, reason) => {
          if (this._socket !== connection) {
            return;
          }
          this._clearOpenTimer();
          this._socket = null;
          this._open = false;
          if (opened) {
            this._options.onDropped();
          } else if (code === CLOSE_TOO_MANY_CLIENTS) {
            reject(new StreamRefusedError(reason ?? ''));
          } else {
            reject(
              new StreamOpenError('the socket closed before its first sample')
            );
          }
        }
      });
      this._socket = connection;
      this._openTimer = setTimeout(() => {
        this.close();
        reject(
          new StreamOpenError('the socket delivered nothing in time', true)
        );
      }, this._options.openTimeoutMs);
    });
  }

  /** Close the socket, if any, without calling `onDropped`. */
  close(): void {
    this._clearOpenTimer();
    const socket = this._socket;
    this._socket = null;
    this._open = false;
    socket?.close();
  }

  private _clearOpenTimer(): void {
    if (this._openTimer !== null) {
      clearTimeout(this._openTimer);
      this._openTimer = null;
    }
  }

  private _options: ILiveStreamOptions;
  private _socket: IStreamConnection | null = null;
  private _open = false;
  private _lastMessageAt = 0;
  private _openTimer: ReturnType<typeof setTimeout> | null = null;
}

/**
 * Stream or poll: after `failuresBeforePolling` sockets failed to open while HTTP worked,
 * WebSockets are taken as blocked (a proxy, a firewall) and the model polls; while polling it
 * tries the socket again every `retryMs`.
 */
export class TransportMode {
  constructor(failuresBeforePolling: number, retryMs: number) {
    this._failuresBeforePolling = failuresBeforePolling;
    this._retryMs = retryMs;
    this._retryWaitMs = retryMs;
  }

  get mode(): 'stream' | 'poll' {
    return this._mode;
  }

  /** While polling: whether it is time to try the socket again. */
  get mayRetrySocket(): boolean {
    return Date.now() >= this._retryAt;
  }

  /** A socket opened: stream again. */
  socketOpened(): void {
    this._failures = 0;
    this._retryWaitMs = this._retryMs;
    this._mode = 'stream';
  }

  /**
   * A socket failed to open while HTTP worked; returns whether this made it poll. A silent
   * socket (one open timeout spent) polls at once: waiting for another would freeze the
   * charts again. While polling, each silent retry doubles the wait before the next one.
   */
  socketFailed(silent = false): boolean {
    if (this._mode === 'poll') {
      if (silent) {
        this._retryWaitMs = Math.min(this._retryWaitMs * 2, 30 * 60000);
      }
      this._retryAt = Date.now() + this._retryWaitMs;
      return false;
    }
    this._retryWaitMs = this._retryMs;
    this._retryAt = Date.now() + this._retryWaitMs;
    if (silent || ++this._failures >= this._failuresBeforePolling) {
      this._mode = 'poll';
      return true;
    }
    return false;
  }

  private _mode: 'stream' | 'poll' = 'stream';
  private _failures = 0;
  private _retryAt = 0;
  private _retryWaitMs: number;
  private _failuresBeforePolling: number;
  private _retryMs: number;
}
