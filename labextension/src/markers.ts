/**
 * Cell markers: each execution of a notebook's code cell as a band on the charts, from
 * JupyterLab's own notebook execution signals (`NotebookActions.executionScheduled` and
 * `executed`, wired in index.ts), so no kernel change is needed. While a cell runs, every new
 * sample adds to its per-GPU statistics (mean utilization, peak memory), so they hold for a
 * cell longer than the charts' window too.
 *
 * Times are on the server's clock (the samples' `ts`): the model gives the browser's offset.
 * This module imports nothing from JupyterLab.
 */
import { ISample } from './types';

/** One GPU's numbers over a cell's run. */
export interface ICellGpuStats {
  utilSum: number;
  utilCount: number;
  memPeak: number | null;
}

/** One execution of one cell. */
export interface ICellMarker {
  /** Unique per marker (a cell run twice has two). */
  id: number;
  /** The notebook's path. */
  notebook: string;
  cellId: string;
  /** The cell's first line of source, as it was when it ran. */
  firstLine: string;
  /** `In [n]`, once the kernel has said (when the cell finished). */
  executionCount: number | null;
  /** Server time (Unix s) the cell was scheduled. */
  start: number;
  /** Server time it finished; `null` while it runs. */
  end: number | null;
  /** Whether it ran without an error; `null` while it runs. */
  success: boolean | null;
  /** By GPU index. */
  stats: Map<number, ICellGpuStats>;
}

/** The mean utilization (%) of a marker's run on one GPU, `null` without samples. */
export function meanUtil(marker: ICellMarker, gpu: number): number | null {
  const s = marker.stats.get(gpu);
  return s && s.utilCount ? s.utilSum / s.utilCount : null;
}

/** The peak memory (bytes) of a marker's run on one GPU, `null` without samples. */
export function peakMem(marker: ICellMarker, gpu: number): number | null {
  return marker.stats.get(gpu)?.memPeak ?? null;
}

export class CellMarkers {
  /** `maxMarkers` are kept (the oldest dropped first), and none older than `keepS`. */
  constructor(maxMarkers = 2000, keepS = 86400) {
    this._max = maxMarkers;
    this._keepS = keepS;
  }

  /** Every marker held, oldest first. */
  get markers(): readonly ICellMarker[] {
    return this._markers;
  }

  /** Bumped on every change, so views redraw only when it moved. */
  get version(): number {
    return this._version;
  }

  /** A code cell was scheduled to run at `now` (server time). */
  scheduled(
    notebook: string,
    cellId: string,
    source: string,
    now: number
  ): ICellMarker {
    // A cell scheduled again before it finished (run all twice): the old run ends here.
    const open = this._running(notebook, cellId);
    if (open) {
      open.end = now;
      open.success = null;
    }
    const marker: ICellMarker = {
      id: ++this._nextId,
      notebook,
      cellId,
      firstLine: firstLine(source),
      executionCount: null,
      start: now,
      end: null,
      success: null,
      stats: new Map()
    };
    this._markers.push(marker);
    this._trim(now);
    this._version++;
    return marker;
  }

  /** The cell finished at `now`; `executionCount` is the kernel's `In [n]`. */
  executed(
    notebook: string,
    cellId: string,
    executionCount: number | null,
    success: boolean,
    now: number
  ): ICellMarker | null {
    const marker = this._running(notebook, cellId);
    if (!marker) {
      return null;
    }
    marker.end = Math.max(now, marker.start);
    marker.executionCount = executionCount;
    marker.success = success;
    this._version++;
    return marker;
  }

  /** Add new samples' readings to the markers that were running at their time. */
  addSamples(samples: readonly ISample[]): void {
    for (const sample of samples) {
      if (sample.ts <= this._lastTs) {
        continue; // already counted (a gap filled later is not)
      }
      this._lastTs = sample.ts;
      for (let i = this._markers.length - 1; i >= 0; i--) {
        const m = this._markers[i];
        if (m.end !== null && m.end < sample.ts) {
          if (m.end < sample.ts - 3600) {
            break; // markers are in start order; none this old is still open
          }
          continue;
        }
        if (m.start > sample.ts) {
          continue;
        }
        for (const d of sample.devices) {
          if (d.state !== 'ok') {
            continue;
          }
          let s = m.stats.get(d.index);
          if (!s) {
            s = { utilSum: 0, utilCount: 0, memPeak: null };
            m.stats.set(d.index, s);
          }
          if (d.util_pct !== null) {
            s.utilSum += d.util_pct;
            s.utilCount++;
          }
          if (
            d.mem_used_bytes !== null &&
            (s.memPeak === null || d.mem_used_bytes > s.memPeak)
          ) {
            s.memPeak = d.mem_used_bytes;
          }
        }
      }
    }
  }

  /** The newest marker whose run covers `ts` (a running one up to `now`), or `null`. */
  at(ts: number, now: number): ICellMarker | null {
    for (let i = this._markers.length - 1; i >= 0; i--) {
      const m = this._markers[i];
      if (m.start <= ts && ts <= (m.end ?? now)) {
        return m;
      }
    }
    return null;
  }

  /** The markers that overlap `[from, to]` (a running one counts up to `now`). */
  overlapping(from: number, to: number, now: number): ICellMarker[] {
    const out: ICellMarker[] = [];
    for (const m of this._markers) {
      if (m.start <= to && (m.end ?? now) >= from) {
        out.push(m);
      }
    }
    return out;
  }

  private _running(notebook: string, cellId: string): ICellMarker | null {
    for (let i = this._markers.length - 1; i >= 0; i--) {
      const m = this._markers[i];
      if (m.end === null && m.cellId === cellId && m.notebook === notebook) {
        return m;
      }
    }
    return null;
  }

  private _trim(now: number): void {
    let cut = 0;
    while (
      cut < this._markers.length &&
      (this._markers.length - cut > this._max ||
        (this._markers[cut].end ?? now) < now - this._keepS)
    ) {
      cut++;
    }
    if (cut) {
      this._markers.splice(0, cut);
    }
  }

  private _markers: ICellMarker[] = [];
  private _nextId = 0;
  private _version = 0;
  private _lastTs = -Infinity;
  private _max: number;
  private _keepS: number;
}

/** A cell's first non-empty line, shortened for a tooltip. */
export function firstLine(source: string): string {
  const line =
    source
      .split('\n')
      .map(l => l.trim())
      .find(l => l.length > 0) ?? '';
  return line.length > 80 ? `${line.slice(0, 79)}…` : line;
}
