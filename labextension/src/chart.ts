/**
 * A small live chart on a canvas (uPlot): created once, then each update hands it the
 * buffer's arrays and redraws synchronously. Nothing is rebuilt per point.
 *
 * Colours come from JupyterLab's CSS variables, read when the theme changes.
 */
import uPlot from 'uplot';
import { Column } from './buffer';

/** Cursor positions are shared by every chart of the panel: hover one, read all. */
export const CURSOR_SYNC_KEY = 'jupyter-gpu';

/** Theme colours, read from CSS variables and cached until the theme changes. */
export class Palette {
  private _cache = new Map<string, string>();
  private _probe: CanvasRenderingContext2D | null = null;

  /** The colour of a CSS variable such as `--jp-brand-color1`, resolved by the browser. */
  color(variable: string): string {
    let color = this._cache.get(variable);
    if (color === undefined) {
      color =
        getComputedStyle(document.body).getPropertyValue(variable).trim() ||
        'gray';
      this._cache.set(variable, color);
    }
    return color;
  }

  /** The same colour with an alpha, for fills under a line. */
  translucent(variable: string, alpha: number): string {
    const key = `${variable}/${alpha}`;
    let color = this._cache.get(key);
    if (color === undefined) {
      color = withAlpha(this._normalize(this.color(variable)), alpha);
      this._cache.set(key, color);
    }
    return color;
  }

  /** Forget cached colours (the theme changed). */
  reset(): void {
    this._cache.clear();
  }

  /** Let the canvas parse any CSS colour (names, hsl, …) into `#rrggbb` or `rgba(…)`. */
  private _normalize(color: string): string {
    if (!this._probe) {
      this._probe = document.createElement('canvas').getContext('2d');
    }
    if (!this._probe) {
      return color;
    }
    this._probe.fillStyle = '#000';
    this._probe.fillStyle = color;
    return String(this._probe.fillStyle);
  }
}

function withAlpha(color: string, alpha: number): string {
  const hex = /^#([0-9a-f]{6})$/i.exec(color);
  if (hex) {
    const n = parseInt(hex[1], 16);
    return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
  }
  const rgba = /^rgba?\(([^,]+),([^,]+),([^,)]+)/.exec(color);
  if (rgba) {
    return `rgba(${rgba[1]},${rgba[2]},${rgba[3]}, ${alpha})`;
  }
  return color;
}

export interface ISparklineOptions {
  /** The theme variable of the line, e.g. `--jp-brand-color1`. */
  colorVar: string;
  palette: Palette;
  /** The y-range, given the largest value shown (`dataMax`, 0 when none). */
  range: (dataMax: number) => [number, number];
  /** Called with the index under the cursor, or `null` when the cursor leaves. */
  onHover?: (index: number | null) => void;
  /** Height in CSS pixels. */
  height?: number;
}

/** Samples further apart than this many intervals draw a gap, not a line across it. */
const GAP_INTERVALS = 3;

export class Sparkline {
  constructor(options: ISparklineOptions) {
    this._options = options;
    this.node = document.createElement('div');
    this.node.className = 'jp-gpu-chart';
  }

  /** The chart's element; give it a width with CSS. */
  readonly node: HTMLDivElement;

  /**
   * Show `ys` over `xs` (Unix seconds), from `xMin` to `xMax`. The arrays may be the same ones
   * as last time, updated in place. `gapS` is the sampling interval (seconds).
   */
  update(
    xs: number[],
    ys: Column,
    xMin: number,
    xMax: number,
    gapS: number
  ): void {
    this._gapS = gapS * GAP_INTERVALS;
    this._xRange = [xMin, xMax];
    // Reading the width forces a layout: do it once, then only when told of a resize.
    if (this._width < 0) {
      this._width = this.node.clientWidth;
    }
    const width = this._width;
    if (width === 0) {
      this._width = -1; // hidden: measure again next time
      this._pending = [xs, ys];
      return; // not laid out (hidden): draw when it is
    }
    this._pending = null;
    if (!this._plot) {
      this._plot = this._create(width, xs, ys);
      return;
    }
    const plot = this._plot;
    plot.batch(() => {
      // batch() draws now instead of on a microtask, so an update's cost is measured whole
      if (plot.width !== width) {
        plot.setSize({ width, height: this._height() });
      }
      plot.setData([xs, ys as number[]]);
    });
  }

  /** Measure the width again (the panel was resized). Measure every chart, then draw. */
  measure(): void {
    this._width = this.node.clientWidth || -1;
  }

  /** Draw again (after a theme change or a resize) with the data it has. */
  redraw(): void {
    if (this._pending) {
      const [xs, ys] = this._pending;
      const [xMin, xMax] = this._xRange;
      this.update(xs, ys, xMin, xMax, this._gapS / GAP_INTERVALS);
      return;
    }
    const plot = this._plot;
    if (this._width < 0) {
      this._width = this.node.clientWidth;
    }
    const width = this._width;
    if (!plot || width === 0) {
      this._width = -1;
      return;
    }
    plot.batch(() => {
      if (plot.width !== width) {
        plot.setSize({ width, height: this._height() });
      }
      plot.redraw(false);
    });
  }

  dispose(): void {
    this._plot?.destroy();
    this._plot = null;
    this.node.remove();
  }

  private _height(): number {
    return this._options.height ?? 34;
  }

  private _create(width: number, xs: number[], ys: Column): uPlot {
    const { palette, colorVar, range, onHover } = this._options;
    const options: uPlot.Options = {
      width,
      height: this._height(),
      pxAlign: false,
      legend: { show: false },
      select: { show: false, left: 0, top: 0, width: 0, height: 0 },
      cursor: {
        sync: { key: CURSOR_SYNC_KEY },
        drag: { x: false, y: false, setScale: false },
        points: { size: 5, fill: () => palette.color(colorVar) },
        y: false
      },
      scales: {
        x: { time: true, range: () => this._xRange },
        y: {
          range: (_u, _min, max) => range(Number.isFinite(max) ? max : 0)
        }
      },
      axes: [{ show: false }, { show: false }],
      series: [
        {},
        {
          stroke: () => palette.color(colorVar),
          fill: () => palette.translucent(colorVar, 0.18),
          width: 1.5,
          points: { show: false },
          spanGaps: false,
          gaps: (u, _sidx, idx0, idx1, nullGaps) =>
            this._timeGaps(u, idx0, idx1, nullGaps)
        }
      ],
      hooks: onHover
        ? {
            setCursor: [(u: uPlot) => onHover(u.cursor.idx ?? null)]
          }
        : {}
    };
    return new uPlot(options, [xs, ys as number[]], this.node);
  }

  /** Add a gap wherever two samples are further apart than a few intervals. */
  private _timeGaps(
    u: uPlot,
    idx0: number,
    idx1: number,
    gaps: uPlot.Series.Gaps
  ): uPlot.Series.Gaps {
    const xs = u.data[0];
    for (let i = idx0 + 1; i <= idx1; i++) {
      if (xs[i] - xs[i - 1] > this._gapS) {
        uPlot.addGap(
          gaps,
          Math.round(u.valToPos(xs[i - 1], 'x', true)),
          Math.round(u.valToPos(xs[i], 'x', true))
        );
      }
    }
    return gaps.sort((a, b) => a[0] - b[0]);
  }

  private _options: ISparklineOptions;
  private _plot: uPlot | null = null;
  private _pending: [number[], Column] | null = null;
  private _xRange: [number, number] = [0, 1];
  private _gapS = 3;
  private _width = -1;
}
