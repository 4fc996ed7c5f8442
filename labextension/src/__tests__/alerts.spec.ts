import { AlertTracker, DEFAULT_ALERTS } from '../alerts';
import { makeSample } from './fakeserver';
import { ISample } from '../types';

function withDevice(
  sample: ISample,
  patch: Partial<ISample['devices'][number]>
): ISample {
  return {
    ...sample,
    devices: sample.devices.map((d, i) => (i === 1 ? { ...d, ...patch } : d))
  };
}

describe('AlertTracker', () => {
  it('says a lost GPU once, and again only after it came back and was lost again', () => {
    const tracker = new AlertTracker();
    const ok = makeSample(1, 1);
    const lost = withDevice(makeSample(2, 2), { state: 'lost', error: 'gone' });
    expect(tracker.check(ok, DEFAULT_ALERTS)).toEqual([]);
    const first = tracker.check(lost, DEFAULT_ALERTS);
    expect(first).toHaveLength(1);
    expect(first[0].level).toBe('error');
    expect(first[0].message).toBe('GPU 1 is lost: gone');
    for (let i = 0; i < 10; i++) {
      expect(tracker.check(lost, DEFAULT_ALERTS)).toEqual([]);
    }
    expect(tracker.check(ok, DEFAULT_ALERTS)).toEqual([]);
    expect(tracker.check(lost, DEFAULT_ALERTS)).toHaveLength(1);
  });

  it('says memory and temperature above their thresholds once, clearing below a margin', () => {
    const tracker = new AlertTracker();
    const settings = { ...DEFAULT_ALERTS, memoryPct: 90, temperatureC: 80 };
    const at = (pct: number, temp: number) =>
      withDevice(makeSample(1, 1), {
        mem_used_bytes: (80e9 * pct) / 100,
        temperature_c: temp
      });
    const start = tracker.check(at(95, 82), settings);
    expect(start.map(a => a.key).sort()).toEqual(['mem:1', 'temp:1']);
    expect(start.find(a => a.key === 'mem:1')?.message).toContain(
      'GPU 1 memory is 95% full'
    );
    // Wobbling just under the thresholds: not said again.
    expect(tracker.check(at(88, 78), settings)).toEqual([]);
    expect(tracker.check(at(95, 82), settings)).toEqual([]);
    // Cleared well below, then above again: said again.
    expect(tracker.check(at(50, 60), settings)).toEqual([]);
    expect(tracker.check(at(95, 82), settings)).toHaveLength(2);
  });

  it('says an idle holder once, and nothing when alerts are off', () => {
    const tracker = new AlertTracker();
    const idle = withDevice(makeSample(1, 1), {
      processes: [
        {
          pid: 42,
          name: 'python',
          used_mem_bytes: 4 * 2 ** 30,
          kernel_id: 'abcdef123456',
          notebook: 'work/big.ipynb',
          idle_holder: true,
          idle_s: 1800
        }
      ]
    });
    const said = tracker.check(idle, DEFAULT_ALERTS);
    expect(said).toHaveLength(1);
    expect(said[0].message).toBe(
      'big has been idle for 30 min while holding 4.0 GiB on GPU 1. Shut its kernel down to free it.'
    );
    expect(tracker.check(idle, DEFAULT_ALERTS)).toEqual([]);
    const off = new AlertTracker();
    expect(off.check(idle, { ...DEFAULT_ALERTS, enabled: false })).toEqual([]);
  });
});
