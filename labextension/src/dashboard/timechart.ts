/**
 * One large chart of the dashboard (uPlot): a time axis, a y axis with its unit, one or more
 * lines (the mean of each row where the data is bucketed, with its min–max as a band), the
 * cell markers as bands behind them, drag to zoom. Created once; an update hands it arrays.
 */
import uPlot from 'uplot';
import { Palette } from '../chart';
import { trans } from '../i18n';
import { addTimeGaps, CellBand, drawCellBands } from '../timeplot';
import { drawLines, sparseEnough, visibleRange } from './lines';
import {
  byteSteps,
  byteTickLabels,
  TickLabels,
  TIME_STEPS_S,
  timeSpacePx,
  Y_LABEL_PX
} from './ticks';

/** The dashboard's charts share the cursor: hover one, read all. */
export const DASHBOARD_SYNC_KEY = 'jupyter-gpu-dashboard';

export const CHART_HEIGHT_PX = 150;
/** A line's width in CSS pixels. */
const LINE_WIDTH = 1.5;

const HM = uPlot.fmtDate('{HH}:{mm}');
const HMS = uPlot.fmtDate('{HH}:{mm}:{ss}');
/** uPlot's own line builder: for bucketed data, and for live data too dense to draw (lines.ts). */
const LINEAR = uPlot.paths.linear!();

export interface ILineSpec {
  /** Shown in the hover line. */
  label: string;
  colorVar: string;
  /** With a min–max band (bucketed data). */
  band: boolean;
}

export interface ITimeChartOptions {
  /** What it shows, for screen readers and the chart's title, e.g. `Memory used`. */
  title: string;
  lines: ILineSpec[];
  palette: Palette;
  /** The y range, given the largest value shown. */
  range: (dataMax: number) => [number, number];
  /** Axis tick labels. */
  formatTick: (value: number) => string;
  /** `bytes`: ticks on round numbers of GiB (MiB), labelled in one unit; else uPlot's own. */
  yTicks?: 'bytes';
  /** The y axis's width (px): room for its longest label. */
  yAxisSize?: number;
  /** The cursor moved over sample `index` (`null`: it left). */
  onHover: (index: number | null) => void;
  /** The user dragged over `[from, to]` (server time). */
  onZoom: (from: number, to: number) => void;
  /** A double click: back to the whole range. */
  onResetZoom: () => void;
  /** Bands to draw: `[start, end, failed]` in server time. */
  bands: () => readonly CellBand[];
}

/** The data of one chart: `xs`, then per line its mean, and (band lines) its min and max. */
export interface IChartData {
  xs: number[];
  /** Per line: `[mean]` or `[mean, min, max]`. */
  lines: (number | null)[][][];
  /** Samples further apart than this (s) draw a gap. */
  gapS: number;
}

export class TimeChart {
  constructor(options: ITimeChartOptions) {
    this._options = options;
    this.node = document.createElement('div');
    this.node.className = 'jp-gpu-dash-chart';
    this.node.setAttribute('role', 'img');
    this._observer = new ResizeObserver(entries => {
      const box = entries[0]?.contentRect;
      if (box) {
        this._resized(Math.floor(box.width));
      }
    });
    this._observer.observe(this.node);
    this.node.addEventListener('dblclick', () => options.onResetZoom());
  }

  readonly node: HTMLDivElement;

  /** Show `data` over `[xMin, xMax]`. */
  update(data: IChartData, xMin: number, xMax: number): void {
    this._data = data;
    this._xRange[0] = xMin;
    this._xRange[1] = xMax;
    this._draw();
  }

  /** Draw again (new colours, new bands). */
  redraw(): void {
    this._plot?.redraw(false);
  }

  /** The y scale's top as drawn (the test and the label read it). */
  get yMax(): number | null {
    return this._plot?.scales.y.max ?? null;
  }

  dispose(): void {
    this._observer.disconnect();
    this._plot?.destroy();
    this._plot = null;
    this.node.remove();
  }

  private _resized(width: number): void {
    if (width === this._width) {
      return;
    }
    this._width = width;
    if (this._plot && width > 0) {
      this._plot.setSize({ width, height: CHART_HEIGHT_PX });
    } else {
      this._draw();
    }
  }

  private _flat(data: IChartData): uPlot.AlignedData {
    const out: (number | null)[][] = [data.xs];
    for (const line of data.lines) {
      out.push(...line);
    }
    return out as uPlot.AlignedData;
  }

  private _draw(): void {
    const data = this._data;
    if (!data || this._width <= 0) {
      return;
    }
    this._gapS = data.gapS;
    const flat = this._flat(data);
    if (!this._plot || this._shape !== shapeOf(data)) {
      this._plot?.destroy();
      this._shape = shapeOf(data);
      this._plot = this._create(flat, data);
    } else {
      const plot = this._plot;
      plot.batch(() => plot.setData(flat));
    }
  }

  /**
   * What was drawn, as `data-*` for the tests: from uPlot's `draw` hook, since a new uPlot
   * draws later (its first commit is queued) and a scale is known only once it has.
   */
  private _afterDraw(): void {
    const top = this.yMax;
    if (top !== null) {
      this._setData('yMax', top);
    }
    this._setData('xMin', this._xRange[0]);
    this._setData('xMax', this._xRange[1]);
  }

  private _create(flat: uPlot.AlignedData, data: IChartData): uPlot {
    const { palette, lines, range, formatTick, onHover, onZoom, bands } =
      this._options;
    const series: uPlot.Series[] = [{}];
    const uBands: uPlot.Band[] = [];
    // Live data (a mean per line, no band): its lines are drawn by `_drawLines` in one pass,
    // unless a draw finds them too dense (see lines.ts).
    this._live = data.lines.every(parts => parts.length === 1);
    data.lines.forEach((parts, i) => {
      const spec = lines[i];
      const first = series.length;
      series.push({
        label: spec.label,
        stroke: () => palette.color(spec.colorVar),
        width: LINE_WIDTH,
        points: { show: false },
        spanGaps: false,
        gaps: (u, _s, i0, i1, g) => addTimeGaps(u, i0, i1, g, this._gapS),
        paths: (u, si, i0, i1) =>
          this._ownLines ? null : LINEAR(u, si, i0, i1)
      });
      if (parts.length === 3) {
        for (const label of ['min', 'max']) {
          series.push({
            label: `${spec.label} ${label}`,
            stroke: () => palette.translucent(spec.colorVar, 0.25),
            width: 0.5,
            points: { show: false },
            spanGaps: false
          });
        }
        uBands.push({
          series: [first + 2, first + 1],
          fill: () => palette.translucent(spec.colorVar, 0.15)
        });
      }
    });
    const axisStroke = () => palette.color('--jp-ui-font-color2');
    const grid = {
      stroke: () => palette.color('--jp-border-color2'),
      width: 1
    };
    const options: uPlot.Options = {
      width: this._width,
      height: CHART_HEIGHT_PX,
      legend: { show: false },
      cursor: {
        sync: { key: DASHBOARD_SYNC_KEY },
        drag: { x: true, y: false, setScale: false },
        points: { size: 6 },
        y: false
      },
      select: { show: true, left: 0, top: 0, width: 0, height: 0 },
      scales: {
        x: { time: true, range: () => this._xRange },
        y: {
          range: (_u, _min, max) => range(Number.isFinite(max) ? max : 0)
        }
      },
      axes: [
        {
          stroke: axisStroke,
          grid,
          ticks: grid,
          size: 30,
          // Round clock steps, as close as their labels allow (uPlot's own steps jump from 1 to
          // 5 min: a 5 min chart got one tick).
          incrs: TIME_STEPS_S as number[],
          space: (_u, _i, min, max, width) => timeSpacePx(max - min, width),
          // 24-hour clock time, with seconds where the ticks are less than a minute apart.
          values: (_u, splits, _i, _space, incr) =>
            this._ticks('xTicks', splits, incr < 60 ? 1 : 0, s =>
              s.map(v => (incr < 60 ? HMS : HM)(new Date(v * 1000)))
            )
        },
        {
          stroke: axisStroke,
          grid,
          ticks: grid,
          size: this._options.yAxisSize ?? 60,
          ...(this._options.yTicks === 'bytes'
            ? {
                incrs: (_u, _i, min, max) => byteSteps(max - min),
                space: Y_LABEL_PX,
                values: (u, splits) => {
                  const max = u.scales.y.max ?? 0;
                  return this._ticks('yTicks', splits, max, s =>
                    byteTickLabels(s, max)
                  );
                }
              }
            : {
                values: (_u, splits) =>
                  this._ticks('yTicks', splits, 0, s => s.map(formatTick))
              })
        }
      ],
      series,
      bands: uBands,
      hooks: {
        drawClear: [
          (u: uPlot) => {
            this._planLines(u);
            const drawn = drawCellBands(
              u,
              bands(),
              this._xRange,
              palette,
              0.22
            );
            this._setData('bands', drawn);
          }
        ],
        draw: [
          (u: uPlot) => {
            this._drawLines(u);
            this._afterDraw();
          }
        ],
        setCursor: [(u: uPlot) => onHover(u.cursor.idx ?? null)],
        setSelect: [
          (u: uPlot) => {
            const { left, width } = u.select;
            if (width > 4) {
              onZoom(u.posToVal(left, 'x'), u.posToVal(left + width, 'x'));
            }
            u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
          }
        ]
      }
    };
    this.node.setAttribute('aria-label', this._options.title);
    return new uPlot(options, flat, this.node);
  }

  /** Keep an axis's labels as drawn, for `data-x-ticks` / `data-y-ticks` (the tests read them). */
  private _ticks(
    axis: 'xTicks' | 'yTicks',
    splits: number[],
    key: number,
    make: (splits: number[]) => string[]
  ): string[] {
    const memo = this._tickLabels[axis];
    const labels = memo.get(splits, key, make);
    if (memo.changed) {
      this._setData(axis, labels.join(' | '));
    }
    return labels;
  }

  /**
   * Set a `data-*` attribute when its value changed, compared with what this chart last wrote
   * (reading `dataset` back costs more than the comparison: several per chart per update).
   */
  private _setData(key: string, value: string | number): void {
    if (this._written.get(key) !== value) {
      this._written.set(key, value);
      this.node.dataset[key] = String(value);
    }
  }

  /** Before a draw: which samples are in view, and whether `_drawLines` draws them. */
  private _planLines(u: uPlot): void {
    const { min, max } = u.scales.x;
    if (!this._live || min === undefined || max === undefined) {
      this._ownLines = false;
      return;
    }
    this._lineRange = visibleRange(u.data[0], min, max);
    const [i0, i1] = this._lineRange;
    this._ownLines = sparseEnough(i1 - i0 + 1, u.bbox.width);
  }

  private _drawLines(u: uPlot): void {
    if (!this._ownLines) {
      return;
    }
    const { left, top, width, height } = u.bbox;
    const x = u.scales.x;
    const y = u.scales.y;
    const { palette, lines } = this._options;
    drawLines(
      u.ctx,
      {
        left,
        top,
        width,
        height,
        xMin: x.min ?? 0,
        xMax: x.max ?? 0,
        yMin: y.min ?? 0,
        yMax: y.max ?? 0
      },
      u.data[0],
      this._lineRange,
      lines.map((spec, i) => ({
        ys: u.data[i + 1] as (number | null | undefined)[],
        color: palette.color(spec.colorVar)
      })),
      this._gapS,
      LINE_WIDTH * uPlot.pxRatio,
      this._scratch
    );
  }

  private _options: ITimeChartOptions;
  private _observer: ResizeObserver;
  private _plot: uPlot | null = null;
  private _data: IChartData | null = null;
  private _shape = '';
  private _xRange: [number, number] = [0, 1];
  private _gapS = 3;
  private _width = -1;
  private _tickLabels = { xTicks: new TickLabels(), yTicks: new TickLabels() };
  private _written = new Map<string, string | number>();
  private _live = false;
  private _ownLines = false;
  private _lineRange: [number, number] = [0, -1];
  private _scratch = { px: new Float64Array(0) };
}

function shapeOf(data: IChartData): string {
  return data.lines.map(l => l.length).join(',');
}

/** "Drag to zoom, double-click to see the whole range." */
export function zoomHint(): string {
  return trans.__(
    'Drag across a chart to zoom in; double-click for the whole range.'
  );
}
