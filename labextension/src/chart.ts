/**
 * A small live chart on a canvas (uPlot): created once, then each update hands it the
 * buffer's arrays and redraws synchronously. Nothing is rebuilt per point.
 *
 * Colours come from JupyterLab's CSS variables, read when the theme changes.
 */
import uPlot from 'uplot';
import { Column } from './buffer';
import { addTimeGaps, CellBand, drawCellBands } from './timeplot';

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

/** A y-range for percentages and °C: 0 to 100, or to the largest value past it. */
export const pctRange = (max: number): [number, number] => [
  0,
  Math.max(100, max)
];

/** A y-range with room above the largest value (15 %); 0 to 1 when there is none. */
export const fitRange = (max: number): [number, number] => [
  0,
  max > 0 ? max * 1.15 : 1
];

export interface ISparklineOptions {
  /** The theme variable of the line, e.g. `--jp-brand-color1`. */
  colorVar: string;
  palette: Palette;
  /** The y-range, given the largest value shown (`dataMax`, 0 when none). */
  range: (dataMax: number) => [number, number];
  /** Called with the index under the cursor, or `null` when the cursor leaves. */
  onHover?: (index: number | null) => void;
}

/** The chart's height before the browser reports its box (`.jp-gpu-chart` in base.css). */
const DEFAULT_HEIGHT_PX = 34;

/** Samples further apart than this many intervals draw a gap, not a line across it. */
const GAP_INTERVALS = 3;

/**
 * Every chart's size comes from one ResizeObserver: the browser reports the sizes after its
 * own layout, so no update ever reads layout (a read after the DOM writes of an update would
 * force a synchronous reflow), and a chart follows its own box, whatever changed it (the
 * sidebar's width, the card's layout switching, compact cards' lower charts). The box's size
 * is CSS's alone: the canvas inside it never changes it.
 */
const sized = new WeakMap<Element, Sparkline>();
let observer: ResizeObserver | null = null;

function observeSize(node: HTMLElement, chart: Sparkline): void {
  if (typeof ResizeObserver === 'undefined') {
    return; // no observer (not a browser): the chart measures itself when it draws
  }
  if (!observer) {
    observer = new ResizeObserver(entries => {
      for (const entry of entries) {
        const box = entry.contentBoxSize?.[0];
        const width = box ? box.inlineSize : entry.contentRect.width;
        const height = box ? box.blockSize : entry.contentRect.height;
        sized.get(entry.target)?.resized(Math.floor(width), Math.floor(height));
      }
    });
  }
  sized.set(node, chart);
  observer.observe(node);
}

export class Sparkline {
  constructor(options: ISparklineOptions) {
    this._options = options;
    this.node = document.createElement('div');
    this.node.className = 'jp-gpu-chart';
    observeSize(this.node, this);
  }

  /** The chart's element; give it a width with CSS. */
  readonly node: HTMLDivElement;

  /** Cell runs to draw as bands behind the line: `[start, end, failed]` (server time). */
  bands: readonly CellBand[] = [];

  /**
   * Show `ys` over `xs` (Unix seconds), from `xMin` to `xMax`. The arrays may be the same ones
   * as last time, updated in place. `gapS` is the sampling interval (seconds). Draws now when
   * the chart's width is known, else as soon as the browser reports it.
   */
  update(
    xs: number[],
    ys: Column,
    xMin: number,
    xMax: number,
    gapS: number
  ): void {
    this._gapS = gapS * GAP_INTERVALS;
    this._xRange[0] = xMin;
    this._xRange[1] = xMax;
    this._xs = xs;
    this._ys = ys;
    if (this._width < 0 && observer === null) {
      this._width = this.node.clientWidth; // no ResizeObserver: measure (forces a layout)
    }
    this._draw(false);
  }

  /** The browser laid the chart out at `width` x `height` CSS pixels (0: hidden). */
  resized(width: number, height: number = this._height): void {
    if (width === this._width && height === this._height) {
      return;
    }
    this._width = width;
    if (height > 0) {
      this._height = height;
    }
    this._draw(false);
  }

  /** Draw again with the data it has (after a theme change). */
  redraw(): void {
    this._draw(true);
  }

  dispose(): void {
    observer?.unobserve(this.node);
    sized.delete(this.node);
    this._plot?.destroy();
    this._plot = null;
    this._xs = null;
    this._ys = null;
    this.node.remove();
  }

  /** Draw what it holds at its width; nothing while hidden (drawn when shown). */
  private _draw(restyle: boolean): void {
    const width = this._width;
    const xs = this._xs;
    const ys = this._ys;
    if (width <= 0 || !xs || !ys) {
      return;
    }
    if (!this._plot) {
      this._plot = this._create(width, xs, ys);
      return;
    }
    const plot = this._plot;
    plot.batch(() => {
      // batch() draws now instead of on a microtask, so an update's cost is measured whole
      if (plot.width !== width || plot.height !== this._height) {
        plot.setSize({ width, height: this._height });
      }
      if (plot.data[0] !== xs || plot.data[1] !== ys) {
        plot.setData([xs, ys as number[]]);
      } else if (restyle) {
        plot.redraw(false);
      } else {
        plot.setData(plot.data); // the same arrays, updated in place: rescale and draw
      }
    });
  }

  private _create(width: number, xs: number[], ys: Column): uPlot {
    const { palette, colorVar, range, onHover } = this._options;
    const options: uPlot.Options = {
      width,
      height: this._height,
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
            addTimeGaps(u, idx0, idx1, nullGaps, this._gapS)
        }
      ],
      hooks: {
        drawClear: [
          (u: uPlot) =>
            drawCellBands(u, this.bands, this._xRange, palette, 0.25)
        ],
        ...(onHover
          ? { setCursor: [(u: uPlot) => onHover(u.cursor.idx ?? null)] }
          : {})
      }
    };
    return new uPlot(options, [xs, ys as number[]], this.node);
  }

  private _options: ISparklineOptions;
  private _plot: uPlot | null = null;
  private _xs: number[] | null = null;
  private _ys: Column | null = null;
  /** Read by the x scale's range function on every draw. */
  private _xRange: [number, number] = [0, 1];
  private _gapS = 3;
  /** The width in CSS pixels as last laid out; -1 before the first report, 0 hidden. */
  private _width = -1;
  /** The height in CSS pixels as last laid out (hidden: the last one shown). */
  private _height = DEFAULT_HEIGHT_PX;
}
