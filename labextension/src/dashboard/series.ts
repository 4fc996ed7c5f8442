/**
 * What the dashboard draws, worked out without the DOM: its ranges, the lines of each chart
 * from the live buffer or from the server's columns, the text of the hover line.
 */
import { GPM_METRICS, gpuKey, Metric, SampleBuffer } from '../buffer';
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

/** A chart of a GPU's row, and the metrics it draws. */
export interface IChartSpec {
  id: 'util' | 'mem' | 'power' | 'temp';
  metrics: Metric[];
}

/** The server column of a metric. */
export const SERVER_FIELD: { [metric in Metric]: string } = {
  util: 'util_pct',
  mem: 'mem_used_bytes',
  power: 'power_w',
  temp: 'temperature_c',
  sm_active: 'sm_active_pct',
  sm_occupancy: 'sm_occupancy_pct',
  tensor_active: 'tensor_active_pct',
  dram_bw: 'dram_bw_pct'
};

/** The utilization chart's lines: NVML's, then the GPM readings the data has. */
export function utilMetrics(has: (metric: Metric) => boolean): Metric[] {
  const out: Metric[] = ['util'];
  for (const [metric] of GPM_METRICS) {
    if (has(metric)) {
      out.push(metric);
    }
  }
  return out;
}

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
  const metrics = Object.keys(SERVER_FIELD) as Metric[];
  for (const gpu of gpus) {
    for (const metric of metrics) {
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
    has: (gpu, metric) =>
      columns.series[`gpu.${gpu}.${SERVER_FIELD[metric]}`] !== undefined,
    lines: (gpu, metric) => {
      const s = columns.series[`gpu.${gpu}.${SERVER_FIELD[metric]}`];
      return s ? [s.mean, s.min, s.max] : null;
    }
  };
}

// The formatters, made once: `toLocaleTimeString(…, options)` builds a new one on every call,
// and that was a quarter of the dashboard's update (8 rows' hover lines every second).
let timeFormat: Intl.DateTimeFormat | null = null;
let dayFormat: Intl.DateTimeFormat | null = null;

/** `14:03:07`, or with the date when it is not today (`Nov 30 14:03`). */
export function formatClock(
  ts: number,
  now: number = Date.now() / 1000
): string {
  const date = new Date(ts * 1000);
  const today = new Date(now * 1000);
  timeFormat ??= new Intl.DateTimeFormat(undefined, {
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hour12: false
  });
  const time = timeFormat.format(date);
  if (
    date.getDate() === today.getDate() &&
    date.getMonth() === today.getMonth() &&
    date.getFullYear() === today.getFullYear()
  ) {
    return time;
  }
  dayFormat ??= new Intl.DateTimeFormat(undefined, {
    month: 'short',
    day: 'numeric'
  });
  return `${dayFormat.format(date)} ${time}`;
}

/** The label of a metric in the hover line and legends. */
export function metricLabel(metric: Metric): string {
  switch (metric) {
    case 'util':
      return trans.__('Util');
    case 'mem':
      return trans.__('Mem');
    case 'power':
      return trans.__('Power');
    case 'temp':
      return trans.__('Temp');
    case 'sm_active':
      return trans.__('SM active');
    case 'sm_occupancy':
      return trans.__('SM occupancy');
    case 'tensor_active':
      return trans.__('Tensor active');
    case 'dram_bw':
      return trans.__('DRAM bw');
  }
}
