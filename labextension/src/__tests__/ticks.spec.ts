import {
  byteSteps,
  byteTickLabels,
  pickStep,
  timeSpacePx,
  timeStep,
  TickLabels,
  TIME_STEPS_S,
  Y_LABEL_PX
} from '../dashboard/ticks';

const GiB = 2 ** 30;
const MiB = 2 ** 20;
/** An H200's total as NVML reports it (140.4 GiB). */
const H200 = 150754820096;

/** The ticks uPlot draws from 0 to `max` with `step` (its numeric splits). */
function ticksTo(max: number, step: number): number[] {
  const out: number[] = [];
  for (let v = 0; v <= max; v += step) {
    out.push(v);
  }
  return out;
}

describe('the time axis', () => {
  it('ticks every minute on a 5 min chart of the dashboard (214 px)', () => {
    expect(timeStep(300, 214)).toBe(60);
    expect(timeSpacePx(300, 214)).toBe(40);
  });

  it('falls back to 2 min, not 5, where a minute is too narrow for its label', () => {
    expect(timeStep(300, 150)).toBe(120);
  });

  it('takes sensible steps for the long ranges', () => {
    expect(timeStep(3600, 214)).toBe(15 * 60);
    expect(timeStep(3600, 800)).toBe(5 * 60);
    expect(timeStep(86400, 214)).toBe(6 * 3600);
    expect(timeStep(86400, 800)).toBe(2 * 3600);
  });

  it('leaves the wider HH:MM:SS labels more room under a minute', () => {
    // 30 s steps would be 53 px apart: enough for 04:35, not for 04:35:30.
    expect(timeStep(120, 214)).toBe(60);
    // 15 s: 53 px again; 30 s: 107 px.
    expect(timeStep(60, 214)).toBe(30);
    expect(timeSpacePx(60, 214)).toBe(62);
  });

  it('gives uPlot a space with which it takes that step, not a smaller one', () => {
    // uPlot takes the smallest step at least `space` apart. A 5 min chart 485 px wide: 30 s
    // steps are 48 px apart, too close for HH:MM:SS (62 px) but not for HH:MM (40 px): a
    // space of 40 let uPlot draw 30 s ticks with HH:MM:SS labels over each other.
    for (const span of [300, 3600, 86400]) {
      for (let width = 150; width <= 1600; width += 5) {
        const space = timeSpacePx(span, width);
        const taken = pickStep(TIME_STEPS_S, span, width, () => space);
        expect([span, width, taken]).toEqual([
          span,
          width,
          timeStep(span, width)
        ]);
      }
    }
  });

  it('keeps several labels on every range at the widths the dashboard has', () => {
    for (const span of [300, 3600, 86400]) {
      for (const width of [180, 214, 400, 1000]) {
        const step = timeStep(span, width);
        expect(span / step).toBeGreaterThanOrEqual(2);
        expect((step * width) / span).toBeGreaterThanOrEqual(40);
      }
    }
  });
});

describe('the memory axis', () => {
  it('has round steps of GiB only', () => {
    expect(byteSteps(H200).map(s => s / GiB)).toEqual([
      1, 2, 5, 10, 20, 50, 100, 200, 500
    ]);
  });

  it('ticks an H200 at 0, 50, 100 GiB on a dashboard chart, up to its total', () => {
    const step = pickStep(byteSteps(H200), H200, 118, () => Y_LABEL_PX);
    expect(step).toBe(50 * GiB);
    const ticks = ticksTo(H200, step);
    expect(byteTickLabels(ticks, H200)).toEqual(['0 GiB', '50 GiB', '100 GiB']);
  });

  it('ticks every 20 GiB on a taller chart', () => {
    const step = pickStep(byteSteps(H200), H200, 250, () => Y_LABEL_PX);
    expect(byteTickLabels(ticksTo(H200, step), H200)).toEqual([
      '0 GiB',
      '20 GiB',
      '40 GiB',
      '60 GiB',
      '80 GiB',
      '100 GiB',
      '120 GiB',
      '140 GiB'
    ]);
  });

  it('counts small GPUs in round GiB or MiB', () => {
    const t4 = 15 * GiB;
    const step = pickStep(byteSteps(t4), t4, 118, () => Y_LABEL_PX);
    expect(byteTickLabels(ticksTo(t4, step), t4)).toEqual([
      '0 GiB',
      '5 GiB',
      '10 GiB',
      '15 GiB'
    ]);
    const small = 1536 * MiB;
    const mstep = pickStep(byteSteps(small), small, 118, () => Y_LABEL_PX);
    expect(byteTickLabels(ticksTo(small, mstep), small)).toEqual([
      '0 MiB',
      '500 MiB',
      '1000 MiB',
      '1500 MiB'
    ]);
  });

  it('always has a step that fits the whole axis', () => {
    for (const total of [0, 1, 700 * MiB, 3 * GiB, H200, 1000 * GiB]) {
      const steps = byteSteps(total);
      expect(steps[steps.length - 1]).toBeGreaterThanOrEqual(total);
    }
    // No total yet (an empty scale): a short list, not an endless loop.
    expect(byteSteps(NaN)).toEqual([MiB, 2 * MiB, 5 * MiB]);
    expect(byteSteps(Infinity)).toEqual([MiB, 2 * MiB, 5 * MiB]);
  });
});

describe('TickLabels', () => {
  it('makes labels again only when the ticks or the key change', () => {
    const memo = new TickLabels();
    let made = 0;
    const make = (splits: number[]) => {
      made++;
      return splits.map(v => `${v}`);
    };
    const first = memo.get([0, 60, 120], 'hm', make);
    expect(first).toEqual(['0', '60', '120']);
    expect(memo.changed).toBe(true);
    expect(memo.get([0, 60, 120], 'hm', make)).toBe(first);
    expect(memo.changed).toBe(false);
    expect(made).toBe(1);
    expect(memo.get([60, 120, 180], 'hm', make)).toEqual(['60', '120', '180']);
    expect(memo.changed).toBe(true);
    expect(memo.get([60, 120], 'hm', make)).toEqual(['60', '120']);
    expect(memo.get([60, 120], 'hms', make)).toEqual(['60', '120']);
    expect(made).toBe(4);
  });

  it('keeps its own copy of the ticks', () => {
    const memo = new TickLabels();
    const splits = [1, 2];
    memo.get(splits, 0, s => s.map(String));
    splits[0] = 5;
    expect(memo.get(splits, 0, s => s.map(String))).toEqual(['5', '2']);
    expect(memo.changed).toBe(true);
  });
});
