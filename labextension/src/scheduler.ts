/**
 * When the model next talks to the server: one step ("tick") at a time, the next one after the
 * poll interval or the stream's watchdog when the step went well, after an exponential backoff
 * when it failed. Stopping clears the one timer it holds: a stopped scheduler costs nothing.
 */

export interface ISchedulerOptions {
  /** One step of the connection; a rejection makes the next one wait longer. */
  tick: () => Promise<void>;
  /** Until the next step after one that went well (ms). */
  intervalMs: () => number;
  /** First wait after a failure (ms); doubles on each failure in a row. */
  backoffBaseMs: number;
  /** Longest wait after failures (ms). */
  backoffMaxMs: number;
  /** A number in [0, 1) (tests pass a fixed one). */
  random?: () => number;
}

/**
 * The wait (ms) after `failures` failed attempts in a row: `baseMs` doubling up to `maxMs`,
 * ±20 % jitter (which spreads the reconnects of many browser tabs after a server restart),
 * never above `maxMs`.
 */
export function backoffMs(
  failures: number,
  baseMs: number,
  maxMs: number,
  random: () => number = Math.random
): number {
  const exp = Math.min(Math.max(failures - 1, 0), 20);
  const target = Math.min(maxMs, baseMs * 2 ** exp);
  return Math.min(maxMs, target * (0.8 + 0.4 * random()));
}

export class TickScheduler {
  constructor(options: ISchedulerOptions) {
    this._options = options;
  }

  /** Whether steps are being scheduled. */
  get running(): boolean {
    return this._running;
  }

  /**
   * Incremented on every start and stop: an answer that comes back under an older epoch
   * belongs to a run that was stopped and must be dropped.
   */
  get epoch(): number {
    return this._epoch;
  }

  /** Whether `epoch` is the current run and it still runs. */
  isCurrent(epoch: number): boolean {
    return epoch === this._epoch && this._running;
  }

  /** Start a new run: the first step at once, the failure count reset. */
  start(): void {
    this._running = true;
    this._epoch++;
    this._failures = 0;
    this.schedule(0);
  }

  /** Stop: no timer is left; a step in flight finishes but plans nothing. */
  stop(): void {
    this._running = false;
    this._epoch++;
    this._clearTimer();
  }

  /** Run a step after `delayMs`, replacing any step already planned (if running). */
  schedule(delayMs: number): void {
    this._clearTimer();
    if (!this._running) {
      return;
    }
    this._timer = setTimeout(() => {
      this._timer = null;
      void this._run();
    }, delayMs);
  }

  private async _run(): Promise<void> {
    const epoch = this._epoch;
    if (this._tickingEpoch === epoch) {
      this._again = true; // asked for while one runs: run once more right after
      return;
    }
    this._tickingEpoch = epoch;
    let ok = true;
    try {
      await this._options.tick();
    } catch {
      ok = false;
    }
    if (epoch !== this._epoch) {
      return; // stopped (and maybe started) meanwhile: that run plans its own steps
    }
    this._tickingEpoch = null;
    this._failures = ok ? 0 : this._failures + 1;
    const again = this._again;
    this._again = false;
    const { intervalMs, backoffBaseMs, backoffMaxMs, random } = this._options;
    this.schedule(
      again
        ? 0
        : ok
          ? intervalMs()
          : backoffMs(this._failures, backoffBaseMs, backoffMaxMs, random)
    );
  }

  private _clearTimer(): void {
    if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
  }

  private _options: ISchedulerOptions;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _running = false;
  private _epoch = 0;
  private _tickingEpoch: number | null = null;
  private _again = false;
  private _failures = 0;
}
