/**
 * One GPU's row of the dashboard: its name, the hover line (the time and every value; stale
 * readings apart, greyed, with their age), the cell under the cursor, and its charts (those of
 * readings.generated.ts: utilization with the GPM readings, memory, power, temperature…),
 * created when first needed and drawn only while in view.
 */
import { Metric } from '../buffer';
import { fitRange, Palette, pctRange } from '../chart';
import { el, setHidden, setText } from '../dom';
import {
  ageText,
  formatBytes,
  formatClock,
  formatReading,
  formatWatts
} from '../format';
import { trans } from '../i18n';
import { GpuIdentity } from '../gpuidentity';
import { GpuMonitorModel } from '../model';
import {
  chartMetrics,
  ChartId,
  everySample,
  IMetricSpec,
  metricLabel,
  metricSpec
} from '../readings';
import { CHARTS } from '../readings.generated';
import { IDeviceInfo } from '../types';
import { ISeriesSource } from './series';
import { IChartData, TimeChart } from './timechart';

const COLORS: { readonly [metric in Metric]?: string } = {
  util_pct: '--jp-brand-color1',
  sm_active_pct: '--jp-success-color1',
  sm_occupancy_pct: '--jp-info-color1',
  tensor_active_pct: '--jp-accent-color2',
  dram_bw_pct: '--jp-warn-color2',
  mem_used_bytes: '--jp-accent-color1',
  power_w: '--jp-warn-color1',
  // Not the error colour: a normal temperature is not an error.
  temperature_c: '--jp-info-color0'
};
/** The colours of the lines of a reading not named above, by its place in its chart. */
const MORE_COLORS = [
  '--jp-brand-color1',
  '--jp-accent-color1',
  '--jp-success-color1',
  '--jp-warn-color1'
];

/** A line's colour: its reading's own, else one by its place in the chart. */
function colorOf(metric: Metric, place: number): string {
  return COLORS[metric] ?? MORE_COLORS[place % MORE_COLORS.length];
}

/** What a row needs of the dashboard. */
export interface IRowContext {
  palette: Palette;
  model: GpuMonitorModel;
  /** The bands to draw now. */
  bands: () => readonly [number, number, boolean][];
  onZoom: (from: number, to: number) => void;
  onResetZoom: () => void;
  /** Where the cursor is, on the server's clock (`null`: nowhere). */
  onHoverTime: (ts: number | null) => void;
  /** Watch whether `node` is scrolled into view (a chart, so that only those are drawn). */
  watch: (node: Element) => void;
  unwatch: (node: Element) => void;
  /** Whether `node` is in view, as last seen. */
  onScreen: (node: Element) => boolean;
}

export class GpuRow {
  constructor(
    readonly index: number,
    ctx: IRowContext
  ) {
    this._ctx = ctx;
    this.node = el('section', 'jp-gpu-dash-row');
    this.node.setAttribute('aria-label', trans.__('GPU %1', index));
    const head = el('header', 'jp-gpu-dash-row-head');
    // Named, and labelled simulated, as on the sidebar's cards: the same identity.
    const identity = (this.identity = new GpuIdentity(index, {
      indexTag: 'h3',
      indexClass: 'jp-gpu-dash-index',
      nameClass: 'jp-gpu-dash-name'
    }));
    head.append(identity.indexNode, identity.nameNode, identity.badgeNode);
    this._hover = el('div', 'jp-gpu-dash-hover');
    this._time = document.createElement('time');
    this._values = el('span', 'jp-gpu-dash-values');
    // Stale readings (the GPU stopped answering): their last known values, greyed, and age.
    this._staleValues = el('span', 'jp-gpu-dash-stale');
    this._hover.append(this._time, this._values, this._staleValues);
    this._band = el('div', 'jp-gpu-dash-band');
    this._charts = el('div', 'jp-gpu-dash-charts');
    this.node.append(head, this._hover, this._band, this._charts);
  }

  readonly node: HTMLElement;
  /** The GPU itself: its name, memory total, power limit. */
  readonly identity: GpuIdentity;

  /** Show the static facts from `GET devices`. */
  setInfo(info: IDeviceInfo | undefined): void {
    this.identity.setInfo(info);
  }

  /** Draw `source` over `[xMin, xMax]`. */
  render(
    source: ISeriesSource,
    xMin: number,
    xMax: number,
    draw: boolean
  ): void {
    this._source = source;
    const { info, latest } = this._ctx.model;
    this.identity.setSimulated(!!(latest?.simulated || info?.simulated));
    const gpu = this.index;
    // A chart draws the tick's readings always (every sample has them), the others where the
    // data has them (GPM on Hopper, a group switched on); a chart with none is not shown.
    const shown = CHARTS.map(({ id }): [ChartId, Metric[]] => [
      id,
      chartMetrics(id)
        .filter(m => everySample(m) || source.has(gpu, m.name))
        .map(m => m.name)
    ]).filter(([, metrics]) => metrics.length > 0);
    const lines = shown.flatMap(([, metrics]) => metrics);
    if (!sameMetrics(lines, this._shown)) {
      this._shown = lines;
      this._specs = shown.map(([id, metrics]) => [
        id,
        metrics,
        `${id}:${metrics.join(',')}`
      ]);
    }
    for (const [id, metrics, key] of this._specs) {
      let chart = this._chartsById.get(id);
      if (chart && chart.key !== key) {
        this._ctx.unwatch(chart.chart.node);
        chart.chart.dispose();
        chart = undefined;
      }
      if (!chart) {
        chart = { key, metrics, chart: this._makeChart(id, metrics) };
        this._chartsById.set(id, chart);
        this._placeCharts();
        this._ctx.watch(chart.chart.node);
      }
      // Drawing is most of an update's cost: only the charts in view (one scrolled in is
      // drawn then, as the dashboard renders again).
      if (!draw || !this._ctx.onScreen(chart.chart.node)) {
        continue;
      }
      const lines = metrics.map(
        m => source.lines(gpu, m) ?? [new Array(source.xs.length).fill(null)]
      );
      const data: IChartData = { xs: source.xs, lines, gapS: source.gapS };
      chart.chart.update(data, xMin, xMax);
    }
    // The latest values: only on screen (a row scrolled into view is rendered again).
    if (this._hovered === null && draw) {
      this._showValues(source.xs.length - 1, true);
    }
  }

  /** Draw the bands again (a cell started or ended). */
  redraw(): void {
    for (const { chart } of this._chartsById.values()) {
      chart.redraw();
    }
  }

  /** Show the cell run at `marker` (or nothing). */
  showBand(text: string): void {
    setText(this._band, text);
  }

  dispose(): void {
    for (const { chart } of this._chartsById.values()) {
      this._ctx.unwatch(chart.node);
      chart.dispose();
    }
    this.node.remove();
  }

  private _placeCharts(): void {
    this._charts.replaceChildren(
      ...CHARTS.map(({ id }) => this._chartsById.get(id))
        .filter(c => c !== undefined)
        .map(c => c.chart.node.parentElement ?? c.chart.node)
    );
  }

  private _makeChart(id: ChartId, metrics: Metric[]): TimeChart {
    const { palette } = this._ctx;
    const { memTotalBytes, powerLimitW } = this.identity;
    const chart = CHARTS.find(c => c.id === id);
    const title = trans.__(chart?.title ?? id);
    const unit = metricSpec(metrics[0]).unit;
    const range =
      id === 'mem'
        ? (max: number): [number, number] => [
            0,
            memTotalBytes ?? fitRange(max)[1]
          ]
        : id === 'power'
          ? (max: number): [number, number] => [
              0,
              // The power limit, unless the draw went past it.
              powerLimitW !== null
                ? Math.max(powerLimitW, max)
                : fitRange(max)[1]
            ]
          : unit === 'pct' || unit === 'c'
            ? pctRange
            : fitRange;
    const bytes = unit === 'bytes' || unit === 'bytes_per_s';
    const formatTick =
      unit === 'bytes'
        ? (v: number) => formatBytes(v)
        : unit === 'w'
          ? (v: number) => `${Math.round(v)} W`
          : unit === 'c'
            ? (v: number) => `${Math.round(v)} °C`
            : unit === 'pct'
              ? (v: number) => `${Math.round(v)}%`
              : (v: number) => formatReading(unit, v);
    const timeChart = new TimeChart({
      title: trans.__('GPU %1 %2', this.index, title),
      lines: metrics.map((m, i) => ({
        label: metricLabel(m),
        colorVar: colorOf(m, i),
        band: true
      })),
      palette,
      range,
      formatTick,
      yAxisSize: bytes ? 76 : 60,
      yTicks: bytes ? 'bytes' : undefined,
      onHover: index => this._onHover(index),
      onZoom: this._ctx.onZoom,
      onResetZoom: this._ctx.onResetZoom,
      bands: this._ctx.bands
    });
    const box = el('figure', 'jp-gpu-dash-figure');
    const caption = el('figcaption', 'jp-gpu-dash-caption');
    const scale =
      id === 'mem'
        ? memTotalBytes !== null
          ? trans.__('0 to %1', formatBytes(memTotalBytes))
          : ''
        : id === 'power'
          ? powerLimitW !== null
            ? trans.__('0 to %1 (the power limit)', formatWatts(powerLimitW))
            : ''
          : '';
    caption.append(el('span', 'jp-gpu-dash-caption-title', title));
    metrics.forEach((m, i) => {
      const key = el('span', 'jp-gpu-dash-key', metricLabel(m));
      key.style.setProperty('--jp-gpu-tile-color', `var(${colorOf(m, i)})`);
      caption.append(key);
    });
    if (scale) {
      caption.append(el('span', 'jp-gpu-dash-scale', scale));
    }
    box.append(caption, timeChart.node);
    return timeChart;
  }

  private _onHover(index: number | null): void {
    if (index === this._hovered) {
      return;
    }
    this._hovered = index;
    const source = this._source;
    if (index === null || !source) {
      this._ctx.onHoverTime(null);
      if (source) {
        this._showValues(source.xs.length - 1, true);
      }
      return;
    }
    this._showValues(index, false);
    this._ctx.onHoverTime(source.xs[index] ?? null);
  }

  /** The time and every value at row `i` of the data. */
  private _showValues(i: number, latest: boolean): void {
    const source = this._source;
    if (!source || i < 0 || i >= source.xs.length) {
      setText(this._values, '');
      setText(this._staleValues, '');
      return;
    }
    const ts = source.xs[i];
    if (ts !== this._timeShown || latest !== this._timeLatest) {
      // Every row shows the same time: worked out once (the clock's text costs).
      this._timeShown = ts;
      this._timeLatest = latest;
      const clock = clockText(ts, latest);
      if (this._time.dateTime !== clock.iso) {
        this._time.dateTime = clock.iso;
      }
      setText(this._time, clock.text);
    }
    const gpu = this.index;
    const { model } = this._ctx;
    // Now (the newest row): a stale group's fields are null; show its last known values apart.
    const fresh = latest ? model.freshness(gpu) : null;
    const live: string[] = [];
    const stale: string[] = [];
    let staleGroup: IMetricSpec['group'] | null = null;
    for (const m of this._shown) {
      const { group, unit } = metricSpec(m);
      const format = (v: number | null) =>
        `${this._label(m)} ${formatReading(unit, v, this.identity.memTotalBytes)}`;
      if (fresh && fresh[group].stale) {
        stale.push(format(model.lastKnown(gpu, m)?.value ?? null));
        staleGroup ??= group;
      } else {
        live.push(format(source.lines(gpu, m)?.[0][i] ?? null));
      }
    }
    setText(this._values, live.join(' · '));
    if (staleGroup !== null) {
      stale.push(ageText(model.readAgeS(gpu, staleGroup)));
    }
    setText(this._staleValues, stale.join(' · '));
    setHidden(this._staleValues, !stale.length);
  }

  /** A metric's label, translated once (the translator's lookup costs on every update). */
  private _label(metric: Metric): string {
    let label = this._labels.get(metric);
    if (label === undefined) {
      label = metricLabel(metric);
      this._labels.set(metric, label);
    }
    return label;
  }

  private _labels = new Map<Metric, string>();
  /** The readings drawn, chart by chart (the hover line lists them in this order). */
  private _shown: Metric[] = [];
  private _specs: [ChartId, Metric[], string][] = [];
  private _timeShown = NaN;
  private _timeLatest = false;
  private _ctx: IRowContext;
  private _hover: HTMLDivElement;
  private _time: HTMLTimeElement;
  private _values: HTMLSpanElement;
  private _staleValues: HTMLSpanElement;
  private _band: HTMLDivElement;
  private _charts: HTMLDivElement;
  private _chartsById = new Map<
    string,
    { key: string; metrics: Metric[]; chart: TimeChart }
  >();
  private _source: ISeriesSource | null = null;
  private _hovered: number | null = null;
}

/** Whether two lists of metrics are the same. */
function sameMetrics(a: readonly Metric[], b: readonly Metric[]): boolean {
  return a.length === b.length && a.every((m, i) => m === b[i]);
}

let lastClock: { ts: number; latest: boolean; iso: string; text: string } = {
  ts: NaN,
  latest: false,
  iso: '',
  text: ''
};

/** The hover line's time at `ts` (`now (…)` when `latest`), made once for all the rows. */
function clockText(ts: number, latest: boolean): { iso: string; text: string } {
  if (ts !== lastClock.ts || latest !== lastClock.latest) {
    const clock = formatClock(ts);
    lastClock = {
      ts,
      latest,
      iso: new Date(ts * 1000).toISOString(),
      text: latest ? trans.__('now (%1)', clock) : clock
    };
  }
  return lastClock;
}
