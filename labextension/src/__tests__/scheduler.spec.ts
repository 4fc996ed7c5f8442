import { backoffMs, TickScheduler } from '../scheduler';
import { TransportMode } from '../stream';

describe('backoffMs', () => {
  it('doubles from the base up to the cap, within ±20 %', () => {
    const low = () => 0;
    const high = () => 0.999999;
    expect(backoffMs(1, 2000, 30000, low)).toBeCloseTo(1600);
    expect(backoffMs(1, 2000, 30000, high)).toBeCloseTo(2400);
    expect(backoffMs(3, 2000, 30000, low)).toBeCloseTo(6400);
    // Never past the cap, jitter included; huge failure counts do not overflow.
    expect(backoffMs(5, 2000, 30000, high)).toBe(30000);
    expect(backoffMs(10_000, 2000, 30000, high)).toBe(30000);
    expect(backoffMs(10_000, 2000, 30000, low)).toBe(24000);
  });
});

describe('TickScheduler', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('waits the interval after a success and backs off after failures', async () => {
    const times: number[] = [];
    let fail = false;
    const scheduler = new TickScheduler({
      tick: async () => {
        times.push(Date.now());
        if (fail) {
          throw new Error('down');
        }
      },
      intervalMs: () => 1000,
      backoffBaseMs: 2000,
      backoffMaxMs: 8000,
      random: () => 0.5 // no jitter
    });
    const start = Date.now();
    scheduler.start();
    await jest.advanceTimersByTimeAsync(2500);
    expect(times.map(t => t - start)).toEqual([0, 1000, 2000]);
    fail = true;
    times.length = 0;
    await jest.advanceTimersByTimeAsync(30000);
    const gaps = times.slice(1).map((t, i) => t - times[i]);
    expect(gaps.slice(0, 4)).toEqual([2000, 4000, 8000, 8000]);
    expect(Math.max(...gaps)).toBe(8000);
    scheduler.stop();
    expect(jest.getTimerCount()).toBe(0);
  });

  it('drops the plans of a run that was stopped while its step ran', async () => {
    let release: () => void = () => undefined;
    let steps = 0;
    const scheduler = new TickScheduler({
      tick: () => {
        steps++;
        return new Promise<void>(resolve => (release = resolve));
      },
      intervalMs: () => 1000,
      backoffBaseMs: 2000,
      backoffMaxMs: 8000
    });
    scheduler.start();
    await jest.advanceTimersByTimeAsync(0);
    const epoch = scheduler.epoch;
    scheduler.stop();
    expect(scheduler.isCurrent(epoch)).toBe(false);
    release();
    await jest.advanceTimersByTimeAsync(5000);
    expect(steps).toBe(1);
    expect(jest.getTimerCount()).toBe(0);
  });
});

describe('TransportMode', () => {
  it('polls after two failed sockets and retries the socket after a while', () => {
    jest.useFakeTimers({ now: 1_000_000 });
    const mode = new TransportMode(2, 60000);
    expect(mode.socketFailed()).toBe(false);
    expect(mode.mode).toBe('stream');
    expect(mode.socketFailed()).toBe(true);
    expect(mode.mode).toBe('poll');
    expect(mode.mayRetrySocket).toBe(false);
    jest.advanceTimersByTime(60000);
    expect(mode.mayRetrySocket).toBe(true);
    expect(mode.socketFailed()).toBe(false); // still polling, next retry in a minute
    expect(mode.mayRetrySocket).toBe(false);
    mode.socketOpened();
    expect(mode.mode).toBe('stream');
    expect(mode.socketFailed()).toBe(false); // the count starts again
    jest.useRealTimers();
  });
});
