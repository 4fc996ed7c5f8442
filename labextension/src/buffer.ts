/**
 * The client-side history: samples kept as columns (one array per metric) so that a chart can
 * hand the same arrays to uPlot on every update instead of rebuilding them.
 */
import { BUFFERED, everySample, MetricName } from './readings';
import { AGE_FIELDS } from './readings.generated';
import { ISample } from './types';

/** A column of values, aligned with `SampleBuffer.ts`; `null` where there was no value. */
export type Column = (number | null)[];

/**
 * A GPU's reading, by its field in the API (readings.generated.ts): the buffer keeps those a
 * chart draws, in columns `gpu.<i>.<field>` (`gpu.0.util_pct`), beside `host.cpu`,
 * `host.mem` and `cache.size`. A column appears with the first sample that has its field:
 * the fast readings' at once, another group's once the server has read the group for that
 * GPU (a value, or an age: a group switched off, or NVLink on a GPU without it, has neither).
 */
export type Metric = MetricName;

/** The key of a device's column. */
export function gpuKey(index: number, metric: Metric): string {
  return `gpu.${index}.${metric}`;
}

/** The values one sample contributes, by column key. */
function rowOf(sample: ISample): Map<string, number | null> {
  const row = new Map<string, number | null>();
  row.set('host.cpu', sample.host?.cpu_pct ?? null);
  row.set('host.mem', sample.host?.mem_used_bytes ?? null);
  // A cache not scanned yet has an unknown size, not 0 (a 0 here drew "+149 MiB in 2 min").
  const cache = sample.compile_cache;
  row.set(
    'cache.size',
    cache && cache.scanned_ts !== null && cache.scanned_ts !== undefined
      ? cache.size_bytes
      : null
  );
  for (const device of sample.devices ?? []) {
    const ok = device.state === 'ok';
    for (const spec of BUFFERED) {
      const value = device[spec.name];
      const read =
        everySample(spec) ||
        (value ?? device[AGE_FIELDS[spec.group]] ?? null) !== null;
      if (value !== undefined && read) {
        // A lost device keeps its history but draws a gap from the moment it was lost.
        row.set(gpuKey(device.index, spec.name), ok ? value : null);
      }
    }
  }
  return row;
}

/**
 * Samples in time order within a window (seconds, measured back from the newest sample's
 * server timestamp, so the browser's clock never matters).
 */
export class SampleBuffer {
  /** Sample times, Unix seconds, ascending, no duplicates. */
  readonly ts: number[] = [];
  private _columns = new Map<string, Column>();
  private _windowS: number;

  constructor(windowS: number) {
    this._windowS = windowS;
  }

  /** How many samples are kept. */
  get length(): number {
    return this.ts.length;
  }

  /** The newest timestamp, or `null` when empty. */
  get lastTs(): number | null {
    return this.ts.length ? this.ts[this.ts.length - 1] : null;
  }

  /** The window in seconds; shrinking it trims at once. */
  get windowS(): number {
    return this._windowS;
  }
  set windowS(value: number) {
    this._windowS = value;
    this._trim();
  }

  /** Whether a sample has brought column `key` (a GPM reading, say). */
  has(key: string): boolean {
    return this._columns.has(key);
  }

  /**
   * The column for `key`, aligned with `ts`. The same array is returned (and updated in place)
   * for as long as the buffer lives.
   */
  column(key: string): Column {
    let column = this._columns.get(key);
    if (!column) {
      column = new Array<number | null>(this.ts.length).fill(null);
      this._columns.set(key, column);
    }
    return column;
  }

  /**
   * Add samples in any order: appended when newer than the newest, inserted in place when
   * they fill a gap, ignored when their timestamp is already there. Returns how many were new.
   */
  add(samples: readonly ISample[]): number {
    let added = 0;
    for (const sample of samples) {
      if (this._insert(sample)) {
        added++;
      }
    }
    if (added) {
      this._trim();
    }
    return added;
  }

  private _insert(sample: ISample): boolean {
    const ts = this.ts;
    let at = ts.length;
    if (at > 0 && sample.ts <= ts[at - 1]) {
      at = lowerBound(ts, sample.ts);
      if (ts[at] === sample.ts) {
        return false;
      }
    }
    const row = rowOf(sample);
    for (const key of row.keys()) {
      this.column(key); // creates columns for devices seen for the first time
    }
    const append = at === ts.length;
    if (append) {
      ts.push(sample.ts);
    } else {
      ts.splice(at, 0, sample.ts);
    }
    for (const [key, column] of this._columns) {
      const value = row.get(key) ?? null;
      if (append) {
        column.push(value);
      } else {
        column.splice(at, 0, value);
      }
    }
    return true;
  }

  private _trim(): void {
    const last = this.lastTs;
    if (last === null) {
      return;
    }
    const cut = lowerBound(this.ts, last - this._windowS);
    if (cut > 0) {
      this.ts.splice(0, cut);
      for (const column of this._columns.values()) {
        column.splice(0, cut);
      }
    }
  }
}

/** The first index whose value is >= `value` (binary search on an ascending array). */
export function lowerBound(values: ArrayLike<number>, value: number): number {
  let lo = 0;
  let hi = values.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (values[mid] < value) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}
