/**
 * The dashboard's live lines, drawn straight onto a chart's canvas in one pass.
 *
 * uPlot draws each series on its own: a Path2D per line, every point's x and y through its
 * scale functions, and a save, a new clip path and a restore per series. For the live 5-minute
 * view (a chart of up to five lines of 300 samples, 7 charts in view, every second) that was
 * about half of an update's JavaScript. Here a chart's lines share one clip and one pass that
 * turns times into x pixels; a missing value, or samples further apart than the gap limit,
 * lifts the pen. Dense data (more than two samples per pixel, after zooming out) stays with
 * uPlot, whose own path builder thins it.
 */
import { lowerBound } from '../buffer';

/** The plotting area in canvas pixels, and the scales' ranges. */
export interface IPlotFrame {
  left: number;
  top: number;
  width: number;
  height: number;
  xMin: number;
  xMax: number;
  yMin: number;
  yMax: number;
}

export interface ILine {
  ys: ArrayLike<number | null | undefined>;
  color: string;
}

/** The subset of the canvas context that `drawLines` uses. */
export type LineContext = Pick<
  CanvasRenderingContext2D,
  | 'save'
  | 'restore'
  | 'beginPath'
  | 'rect'
  | 'clip'
  | 'moveTo'
  | 'lineTo'
  | 'stroke'
  | 'strokeStyle'
  | 'lineWidth'
  | 'lineJoin'
  | 'lineCap'
>;

/**
 * Indices `[i0, i1]` of the samples to draw for `[xMin, xMax]`: those inside, and one either
 * side so that the lines reach the edges. `[0, -1]` when there are none.
 */
export function visibleRange(
  xs: ArrayLike<number>,
  xMin: number,
  xMax: number
): [number, number] {
  const n = xs.length;
  if (n === 0 || xs[0] > xMax || xs[n - 1] < xMin) {
    return [0, -1];
  }
  const i0 = lowerBound(xs, xMin);
  const i1 = lowerBound(xs, xMax);
  // one sample before xMin; through the first sample at or past xMax
  return [Math.max(0, i0 - 1), Math.min(n - 1, i1)];
}

/** Whether `drawLines` should draw `count` samples across `widthPx` (else uPlot, which thins). */
export function sparseEnough(count: number, widthPx: number): boolean {
  return count <= 2 * widthPx;
}

/**
 * Draw `lines` over samples `[i0, i1]` of `xs`, clipped to the frame, each as one path.
 * Leaves the context's state as it found it (uPlot caches its stroke style and width).
 * Returns how many pieces were drawn (a gap starts a new one), for tests.
 */
export function drawLines(
  ctx: LineContext,
  frame: IPlotFrame,
  xs: ArrayLike<number>,
  range: [number, number],
  lines: readonly ILine[],
  gapS: number,
  lineWidth: number,
  scratch: { px: Float64Array } = { px: new Float64Array(0) }
): number {
  const [i0, i1] = range;
  const count = i1 - i0 + 1;
  const { left, top, width, height, xMin, xMax, yMin, yMax } = frame;
  if (count <= 0 || !(xMax > xMin) || !(yMax > yMin)) {
    return 0;
  }
  if (scratch.px.length < count) {
    scratch.px = new Float64Array(Math.max(count, 2 * scratch.px.length));
  }
  const px = scratch.px;
  const kx = width / (xMax - xMin);
  for (let i = 0; i < count; i++) {
    px[i] = left + (xs[i0 + i] - xMin) * kx;
  }
  const ky = height / (yMax - yMin);
  const bottom = top + height;
  let pieces = 0;
  ctx.save();
  ctx.beginPath();
  ctx.rect(left, top, width, height);
  ctx.clip();
  ctx.lineWidth = lineWidth;
  ctx.lineJoin = 'round';
  ctx.lineCap = 'butt';
  for (const line of lines) {
    const ys = line.ys;
    ctx.strokeStyle = line.color;
    ctx.beginPath();
    let penDown = false;
    for (let i = 0; i < count; i++) {
      const y = ys[i0 + i];
      if (y === null || y === undefined) {
        penDown = false;
        continue;
      }
      const py = bottom - (y - yMin) * ky;
      if (penDown && xs[i0 + i] - xs[i0 + i - 1] <= gapS) {
        ctx.lineTo(px[i], py);
      } else {
        ctx.moveTo(px[i], py);
        penDown = true;
        pieces++;
      }
    }
    ctx.stroke();
  }
  ctx.restore();
  return pieces;
}
