/**
 * A scripted jupyter-gpu server for the model's tests: it keeps a history, produces a sample
 * per `tick()`, and its sockets can be dropped or blocked. The browser tests run the real one.
 */
import {
  ApiError,
  IDevicesInfo,
  IGpuTransport,
  IHistory,
  ISample,
  IStreamConnection,
  IStreamHandlers
} from '../types';

/** A sample with `devices` GPUs at time `ts` (seconds). */
export function makeSample(seq: number, ts: number, devices = 2): ISample {
  return {
    seq,
    ts,
    backend: 'simulated',
    simulated: true,
    reason: null,
    devices: Array.from({ length: devices }, (_, index) => ({
      index,
      uuid: `GPU-sim-${index}`,
      name: 'Simulated GPU',
      state: 'ok',
      error: null,
      util_pct: (seq * 7 + index * 13) % 100,
      mem_util_pct: null,
      mem_used_bytes: 1e9 * (seq % 10),
      mem_total_bytes: 80e9,
      power_w: 100 + (seq % 50),
      power_limit_w: 400,
      temperature_c: 40 + (seq % 20),
      sm_clock_mhz: null,
      processes: []
    })),
    host: {
      cpu_pct: seq % 100,
      cpu_count: 2,
      mem_used_bytes: 4e9,
      mem_total_bytes: 16e9
    },
    compile_cache: { size_bytes: 1e6 * seq, file_count: seq, scanned_ts: ts }
  };
}

class FakeSocket implements IStreamConnection {
  constructor(readonly handlers: IStreamHandlers) {}
  open = false;
  closedByClient = false;
  close(): void {
    this.open = false;
    this.closedByClient = true;
  }
}

export class FakeServer implements IGpuTransport {
  constructor(readonly intervalS = 1) {}

  history_: ISample[] = [];
  seq = 0;
  ts = 1_700_000_000;
  /** Answer every request with this HTTP status (0: unreachable), or serve normally (null). */
  failWith: number | null = null;
  /** Sockets never open (a proxy that blocks WebSockets). */
  blockSockets = false;
  /** Sockets open, then close before any message (a proxy that drops upgrades). */
  acceptThenClose = false;
  /** Sockets open and stay open, silent (a proxy that accepts them and forwards nothing). */
  silentSockets = false;
  /** Sockets are closed at once with 1013 and this reason (the server's client limit). */
  refuseSockets: string | null = null;
  /** NVML has not answered for this long (s): no devices, the host only; null: it has. */
  nvmlWaitS: number | null = null;
  /** The error message of `failWith` answers (as the server's JSON `message`). */
  failMessage = '';
  /** `api_version` of `GET devices`. */
  apiVersion = '1';
  /** How many GPUs `GET devices` lists. */
  deviceCount = 2;
  /** When each devices request came (ms, the test's clock). */
  deviceTimes: number[] = [];
  sockets: FakeSocket[] = [];
  historyCalls: (number | undefined)[] = [];
  /** When each history request came (ms, the test's clock). */
  historyTimes: number[] = [];
  deviceCalls = 0;
  /** History answers are made when asked and arrive this much later (a slow network, ms). */
  historyDelayMs = 0;
  /** Changes each new sample before it is kept and sent (a GPU that hangs, say). */
  shape: ((sample: ISample) => void) | null = null;

  /** Produce the next sample, keep it, push it to every open socket (not silent ones). */
  tick(n = 1): void {
    for (let i = 0; i < n; i++) {
      this.seq++;
      this.ts += this.intervalS;
      const sample = makeSample(this.seq, this.ts, this.deviceCount);
      if (this.nvmlWaitS !== null) {
        sample.devices = [];
        sample.reason = `NVML has not answered for ${this.nvmlWaitS} s`;
        sample.nvml_wait_s = this.nvmlWaitS;
      }
      this.shape?.(sample);
      this.history_.push(sample);
      if (this.silentSockets) {
        continue;
      }
      for (const socket of this.openSockets()) {
        socket.handlers.onSample(sample);
      }
    }
  }

  openSockets(): FakeSocket[] {
    return this.sockets.filter(s => s.open);
  }

  /** The server restarts: its history and sequence start again, its sockets drop. */
  restart(deviceCount = this.deviceCount): void {
    this.deviceCount = deviceCount;
    this.history_ = [];
    this.seq = 0;
    this.dropAll();
  }

  /** The network drops every open socket. */
  dropAll(): void {
    for (const socket of this.openSockets()) {
      socket.open = false;
      socket.handlers.onClose();
    }
  }

  async devices(): Promise<IDevicesInfo> {
    this.deviceCalls++;
    this.deviceTimes.push(Date.now());
    this._check();
    const waiting = this.nvmlWaitS !== null;
    return {
      api_version: this.apiVersion,
      backend: 'simulated',
      simulated: true,
      gpu_available: !waiting,
      reason: waiting ? 'NVML has not answered' : null,
      nvml_wait_s: this.nvmlWaitS,
      driver_version: null,
      cuda_driver_version: null,
      hostname: 'test',
      devices: Array.from(
        { length: waiting ? 0 : this.deviceCount },
        (_, index) => ({
          index,
          uuid: `GPU-sim-${index}`,
          name: 'Simulated GPU',
          mem_total_bytes: 80e9,
          power_limit_w: 400,
          pci_bus_id: null
        })
      ),
      config: { interval_s: this.intervalS, history_s: 600 }
    };
  }

  async history(since?: number): Promise<IHistory> {
    this.historyCalls.push(since);
    this.historyTimes.push(Date.now());
    this._check();
    const samples = this.history_.filter(
      s => since === undefined || s.ts > since
    );
    if (this.historyDelayMs > 0) {
      await new Promise(resolve => setTimeout(resolve, this.historyDelayMs));
    }
    return { interval_s: this.intervalS, samples };
  }

  openStream(handlers: IStreamHandlers): IStreamConnection {
    const socket = new FakeSocket(handlers);
    this.sockets.push(socket);
    // Like a browser: the socket opens (or fails) on a later turn of the event loop.
    setTimeout(() => {
      if (socket.closedByClient) {
        return;
      }
      if (this.blockSockets || this.failWith !== null) {
        handlers.onClose(1006, '');
        return;
      }
      if (this.refuseSockets !== null) {
        handlers.onClose(1013, this.refuseSockets);
        return;
      }
      socket.open = true;
      if (this.silentSockets) {
        return;
      }
      if (this.acceptThenClose) {
        socket.open = false;
        handlers.onClose();
        return;
      }
      const latest = this.history_[this.history_.length - 1];
      if (latest) {
        handlers.onSample(latest); // the API sends the latest sample on connect
      }
    }, 5);
    return socket;
  }

  private _check(): void {
    if (this.failWith !== null) {
      throw new ApiError(
        this.failWith,
        this.failMessage || `HTTP ${this.failWith}`
      );
    }
  }
}
