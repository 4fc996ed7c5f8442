/**
 * What every time chart (the sidebar's sparklines in chart.ts, the dashboard's charts in
 * dashboard/timechart.ts) draws the same way on its uPlot: a gap where two samples are too far
 * apart to join (the server was away, the GPU did not answer), and the cell runs as bands
 * behind the lines.
 */
import uPlot from 'uplot';

/** A cell run: `[start, end, failed]` in server time (Unix seconds). */
export type CellBand = readonly [number, number, boolean];

/** The theme's colours, as chart.ts's `Palette` gives them. */
export interface ITranslucentColors {
  translucent(variable: string, alpha: number): string;
}

/**
 * A series' `gaps` callback: add to uPlot's own gaps (its nulls) one between every two samples
 * of `idx0..idx1` further apart than `maxStepS` seconds, in canvas pixels, sorted by start.
 */
export function addTimeGaps(
  u: Pick<uPlot, 'data' | 'valToPos'>,
  idx0: number,
  idx1: number,
  gaps: uPlot.Series.Gaps,
  maxStepS: number
): uPlot.Series.Gaps {
  const xs = u.data[0];
  for (let i = idx0 + 1; i <= idx1; i++) {
    if (xs[i] - xs[i - 1] > maxStepS) {
      uPlot.addGap(
        gaps,
        Math.round(u.valToPos(xs[i - 1], 'x', true)),
        Math.round(u.valToPos(xs[i], 'x', true))
      );
    }
  }
  return gaps.sort((a, b) => a[0] - b[0]);
}

/**
 * Fill the cell runs that overlap `xRange` behind the lines (a `drawClear` hook): cut to the
 * range, at least 2 CSS pixels wide so that a short cell shows, in the warning colour where the
 * cell failed, at `alpha`. Returns how many were drawn.
 */
export function drawCellBands(
  u: Pick<uPlot, 'ctx' | 'bbox' | 'valToPos'>,
  bands: readonly CellBand[],
  xRange: readonly [number, number],
  palette: ITranslucentColors,
  alpha: number
): number {
  const ctx = u.ctx;
  const { top, height } = u.bbox;
  const [x0, x1] = xRange;
  // The canvas counts device pixels. globalThis is the window in a browser.
  const minWidth = 2 * (globalThis.devicePixelRatio || 1);
  let drawn = 0;
  for (const [start, end, failed] of bands) {
    if (end < x0 || start > x1) {
      continue;
    }
    const a = u.valToPos(Math.max(start, x0), 'x', true);
    const b = u.valToPos(Math.min(end, x1), 'x', true);
    ctx.fillStyle = palette.translucent(
      failed ? '--jp-warn-color1' : '--jp-brand-color2',
      alpha
    );
    ctx.fillRect(a, top, Math.max(b - a, minWidth), height);
    drawn++;
  }
  return drawn;
}
