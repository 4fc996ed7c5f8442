/**
 * What the dashboard draws, worked out without the DOM: its ranges, the lines of each chart
 * from the live buffer or from the server's columns, the text of the hover line.
 */
import { gpuKey, Metric, SampleBuffer } from '../buffer';
import { BUFFERED } from '../readings';
import { trans } from '../i18n';
import { IHistoryColumns } from '../types';

/** The ranges a person can pick, in seconds. */
export type RangeName = '5m' | '1h' | '24h';
export const RANGES: { [name in RangeName]: number } = {
  '5m': 300,
  '1h': 3600,
  '24h': 86400
};

export function rangeLabel(name: RangeName): string {
  return name === '5m'
    ? trans.__('5 min')
    : name === '1h'
      ? trans.__('1 h')
      : trans.__('24 h');
}

/** Rows asked of the server for a long range (about one per two pixels of a wide chart). */
export const LONG_RANGE_POINTS = 1000;

/** Where a chart's numbers come from. */
export interface ISeriesSource {
  xs: number[];
  /** Per metric: `[mean]` (live) or `[mean, min, max]` (columns); `null`: none. */
  lines(gpu: number, metric: Metric): (number | null)[][] | null;
  /** Whether the data has this metric for this GPU at all. */
  has(gpu: number, metric: Metric): boolean;
  /** Samples further apart than this (s) draw a gap. */
  gapS: number;
}

/** The live buffer as a source (its arrays, updated in place). */
export function bufferSource(
  buffer: SampleBuffer,
  intervalS: number
): ISeriesSource {
  return {
    xs: buffer.ts,
    gapS: 3 * intervalS,
    has: (gpu, metric) => buffer.has(gpuKey(gpu, metric)),
    lines: (gpu, metric) => {
      const key = gpuKey(gpu, metric);
      return buffer.has(key) ? [buffer.column(key)] : null;
    }
  };
}

/** A copy of the live buffer (a paused dashboard keeps showing what it had). */
export function frozenSource(source: ISeriesSource, gpus: number[]) {
  const cache = new Map<string, (number | null)[][] | null>();
  for (const gpu of gpus) {
    for (const { name: metric } of BUFFERED) {
      const lines = source.lines(gpu, metric);
      cache.set(`${gpu}.${metric}`, lines ? lines.map(l => l.slice()) : null);
    }
  }
  const frozen: ISeriesSource = {
    xs: source.xs.slice(),
    gapS: source.gapS,
    has: (gpu, metric) => (cache.get(`${gpu}.${metric}`) ?? null) !== null,
    lines: (gpu, metric) => cache.get(`${gpu}.${metric}`) ?? null
  };
  return frozen;
}

/** The server's columns as a source (mean with its min–max band). */
export function columnsSource(columns: IHistoryColumns): ISeriesSource {
  // A row stands at its middle, so the line sits under the time it summarises.
  const half = columns.resolution_s / 2;
  const xs = columns.ts.map(t => t + half);
  return {
    xs,
    gapS: Math.max(3 * columns.resolution_s, 3 * columns.interval_s),
    // The server's columns have the browser's keys: one name for a reading (gpuKey).
    has: (gpu, metric) => columns.series[gpuKey(gpu, metric)] !== undefined,
    lines: (gpu, metric) => {
      const s = columns.series[gpuKey(gpu, metric)];
      return s ? [s.mean, s.min, s.max] : null;
    }
  };
}
