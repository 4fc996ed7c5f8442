/**
 * Where the dashboard's axes put their ticks, without the DOM: clock times a person reads at a
 * glance on the time axis, round numbers of GiB (or MiB) on the memory axis. The charts hand
 * these to uPlot as an axis's `incrs` (the steps it may use) and `space` (the room each label
 * needs); uPlot takes the smallest step that leaves that room and puts its ticks on it (on the
 * local clock for time).
 */

const MINUTE = 60;
const HOUR = 3600;

/** Steps of the time axis (s): ones that land on round clock times. */
export const TIME_STEPS_S: readonly number[] = [
  1,
  2,
  5,
  10,
  15,
  30,
  MINUTE,
  2 * MINUTE,
  5 * MINUTE,
  10 * MINUTE,
  15 * MINUTE,
  30 * MINUTE,
  HOUR,
  2 * HOUR,
  3 * HOUR,
  4 * HOUR,
  6 * HOUR,
  12 * HOUR,
  24 * HOUR
];

/**
 * Room (px) one time label needs with its gap, at the axis's 12 px font: `HH:MM:SS` where the
 * step is under a minute, `HH:MM` otherwise.
 */
export function timeLabelPx(stepS: number): number {
  return stepS < MINUTE ? 62 : 40;
}

/**
 * The smallest of `steps` at least `minPx` apart on an axis `lengthPx` long that shows `span`
 * (in the steps' unit); the largest step when none is. This is uPlot's own choice from an
 * axis's `incrs` and `space`.
 */
export function pickStep(
  steps: readonly number[],
  span: number,
  lengthPx: number,
  minPx: (step: number) => number
): number {
  for (const step of steps) {
    if (span > 0 && (step * lengthPx) / span >= minPx(step)) {
      return step;
    }
  }
  return steps[steps.length - 1];
}

/**
 * The time axis's step (s) for `spanS` seconds over `widthPx`: a 5 min chart 200 px wide ticks
 * every minute.
 */
export function timeStep(spanS: number, widthPx: number): number {
  return pickStep(TIME_STEPS_S, spanS, widthPx, timeLabelPx);
}

/**
 * The time axis's `space` (uPlot): room enough for the labels of the step that fits, and more
 * than the next smaller step is apart, so that uPlot, which takes the smallest step of
 * `TIME_STEPS_S` at least `space` apart, takes that one (with only the labels' room, a 5 min
 * chart 485 px wide got 30 s steps, 48 px apart, with HH:MM:SS labels over each other).
 */
export function timeSpacePx(spanS: number, widthPx: number): number {
  const step = timeStep(spanS, widthPx);
  const at = TIME_STEPS_S.indexOf(step);
  const smaller = at > 0 ? (TIME_STEPS_S[at - 1] * widthPx) / spanS : 0;
  return Math.max(timeLabelPx(step), smaller + 1);
}

const MiB = 2 ** 20;
const GiB = 2 ** 30;

/** Room (px) between two labels of a y axis (uPlot's default). */
export const Y_LABEL_PX = 30;

/** The unit of the memory axis's labels: GiB from 2 GiB on, MiB below. */
function byteUnit(maxBytes: number): [number, string] {
  return maxBytes >= 2 * GiB ? [GiB, 'GiB'] : [MiB, 'MiB'];
}

/**
 * Steps of a memory axis that tops out at `maxBytes`: 1, 2 and 5 × 10ⁿ of its unit (GiB, or MiB
 * under 2 GiB), so that the ticks of a 140 GiB GPU read 0, 50, 100 GiB, never 46.6 or 93.1.
 */
export function byteSteps(maxBytes: number): number[] {
  const top = Number.isFinite(maxBytes) ? maxBytes : 0;
  const [unit] = byteUnit(top);
  const out: number[] = [];
  // Up to the first decade whose largest step covers the axis (one tick, at 0).
  for (let decade = 1; ; decade *= 10) {
    out.push(decade * unit, 2 * decade * unit, 5 * decade * unit);
    if (5 * decade * unit >= top) {
      break;
    }
  }
  return out;
}

/** The labels of a memory axis's ticks, all in its unit and whole: `0 GiB`, `50 GiB`, `100 GiB`. */
export function byteTickLabels(ticks: number[], maxBytes: number): string[] {
  const [unit, name] = byteUnit(maxBytes);
  return ticks.map(v => `${Math.round(v / unit)} ${name}`);
}

/**
 * An axis's labels, made again only when its ticks (or `key`, e.g. the unit) changed. uPlot asks
 * for every axis's labels on each redraw (up to three times while it fits the axes), and most
 * redraws of a live chart keep the ticks where they were: a 5 min chart's time ticks move once a
 * minute.
 */
export class TickLabels {
  /**
   * The labels of `splits`: the last ones when `splits` and `key` are as last time, else
   * `make(splits)` (and `changed` is true until the next call).
   */
  get(
    splits: readonly number[],
    key: string | number,
    make: (splits: number[]) => string[]
  ): string[] {
    const last = this._splits;
    let same = key === this._key && last.length === splits.length;
    for (let i = 0; same && i < splits.length; i++) {
      same = last[i] === splits[i];
    }
    this.changed = !same;
    if (!same) {
      this._splits = splits.slice();
      this._key = key;
      this._labels = make(this._splits);
    }
    return this._labels;
  }

  /** Whether the last `get` made new labels. */
  changed = false;

  private _splits: number[] = [];
  private _key: string | number = NaN;
  private _labels: string[] = [];
}
