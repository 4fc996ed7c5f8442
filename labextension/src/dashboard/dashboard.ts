/**
 * The GPU dashboard (main area): one row per GPU, as nvtop has, each with four large charts
 * (utilization with NVML's GPM readings beside it where the GPU gives them, memory up to the
 * GPU's total, power up to its limit, temperature), time axes, a hover line with the time and
 * every value, cell runs as bands, drag to zoom, 5 min / 1 h / 24 h, pause.
 *
 * 5 min draws the model's live buffer; 1 h and 24 h read the server's long history
 * (`GET history?points=…`: min/mean/max rows) and refresh it every row's width.
 *
 * Without a GPU it says why (the server's reason, in NVML's words and plain ones) and what to
 * do (the driver; the simulated backend), with no controls that would act on nothing.
 */
import { Message } from '@lumino/messaging';
import { Metric } from '../buffer';
import { Palette } from '../chart';
import { fitRange, pctRange } from '../cards/common';
import { el, setData, setHidden, setText, setTextWithOptions } from '../dom';
import {
  ageText,
  formatBytes,
  formatBytesOf,
  formatCelsius,
  formatPct,
  formatWatts,
  noGpuMessage,
  plainNoGpuReason
} from '../format';
import { GROUP_METRICS } from '../freshness';
import { trans } from '../i18n';
import { ICellMarker, meanUtil, peakMem } from '../markers';
import { GpuMonitorModel } from '../model';
import { IDeviceInfo, IHistoryColumns } from '../types';
import { ModelView } from '../view';
import {
  bufferSource,
  columnsSource,
  formatClock,
  frozenSource,
  ISeriesSource,
  LONG_RANGE_POINTS,
  metricLabel,
  RangeName,
  RANGES,
  rangeLabel,
  utilMetrics
} from './series';
import { IChartData, TimeChart, zoomHint } from './timechart';

/** The performance-timeline name of one dashboard update. */
export const DASHBOARD_MEASURE = 'jupyter-gpu:dashboard-update';

const COLORS: { [metric in Metric]: string } = {
  util: '--jp-brand-color1',
  sm_active: '--jp-success-color1',
  sm_occupancy: '--jp-info-color1',
  tensor_active: '--jp-accent-color2',
  dram_bw: '--jp-warn-color2',
  mem: '--jp-accent-color1',
  power: '--jp-warn-color1',
  // Not the error colour: a normal temperature is not an error.
  temp: '--jp-info-color0'
};

/** The fast readings' metrics (freshness.ts); the others of a row are GPM readings. */
const FAST_METRICS: ReadonlySet<Metric> = new Set(GROUP_METRICS.fast);

/** What a row needs of the dashboard. */
interface IRowContext {
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

class GpuRow {
  constructor(
    readonly index: number,
    ctx: IRowContext
  ) {
    this._ctx = ctx;
    this.node = el('section', 'jp-gpu-dash-row');
    this.node.setAttribute('aria-label', trans.__('GPU %1', index));
    const head = el('header', 'jp-gpu-dash-row-head');
    this._name = el('span', 'jp-gpu-dash-name');
    head.append(
      el('h3', 'jp-gpu-dash-index', trans.__('GPU %1', index)),
      this._name
    );
    this._hover = el('div', 'jp-gpu-dash-hover');
    this._time = document.createElement('time');
    this._values = el('span', 'jp-gpu-dash-values');
    // Stale readings (the GPU stopped answering): their last known values, greyed, and age.
    this._staleValues = el('span', 'jp-gpu-dash-values jp-gpu-mod-stale');
    this._hover.append(this._time, this._values, this._staleValues);
    this._band = el('div', 'jp-gpu-dash-band');
    this._charts = el('div', 'jp-gpu-dash-charts');
    this.node.append(head, this._hover, this._band, this._charts);
  }

  readonly node: HTMLElement;

  setInfo(info: IDeviceInfo | undefined): void {
    if (info) {
      setText(this._name, info.name);
      this._name.title = [info.name, info.uuid, info.pci_bus_id]
        .filter(Boolean)
        .join('\n');
      this._memTotal = info.mem_total_bytes ?? this._memTotal;
      this._powerLimit = info.power_limit_w ?? this._powerLimit;
    }
  }

  /** Draw `source` over `[xMin, xMax]`. */
  render(
    source: ISeriesSource,
    xMin: number,
    xMax: number,
    draw: boolean
  ): void {
    this._source = source;
    const gpu = this.index;
    const util = utilMetrics(m => source.has(gpu, m));
    if (!sameMetrics(util, this._util)) {
      this._util = util;
      this._specs = [
        ['util', util, `util:${util.join(',')}`],
        ['mem', ['mem'], 'mem'],
        ['power', ['power'], 'power'],
        ['temp', ['temp'], 'temp']
      ];
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
    const order = ['util', 'mem', 'power', 'temp'];
    this._charts.replaceChildren(
      ...order
        .map(id => this._chartsById.get(id))
        .filter(c => c !== undefined)
        .map(c => c.chart.node.parentElement ?? c.chart.node)
    );
  }

  private _makeChart(id: string, metrics: Metric[]): TimeChart {
    const { palette } = this._ctx;
    const title = {
      util: trans.__('Utilization (%)'),
      mem: trans.__('Memory used'),
      power: trans.__('Power (W)'),
      temp: trans.__('Temperature (°C)')
    }[id as 'util' | 'mem' | 'power' | 'temp'];
    const range =
      id === 'mem'
        ? (max: number): [number, number] => [
            0,
            this._memTotal ?? fitRange(max)[1]
          ]
        : id === 'power'
          ? (max: number): [number, number] => [
              0,
              // The power limit, unless the draw went past it.
              this._powerLimit !== null
                ? Math.max(this._powerLimit, max)
                : fitRange(max)[1]
            ]
          : pctRange;
    const formatTick =
      id === 'mem'
        ? (v: number) => formatBytes(v)
        : id === 'power'
          ? (v: number) => `${Math.round(v)} W`
          : id === 'temp'
            ? (v: number) => `${Math.round(v)} °C`
            : (v: number) => `${Math.round(v)}%`;
    const chart = new TimeChart({
      title: trans.__('GPU %1 %2', this.index, title),
      lines: metrics.map(m => ({
        label: metricLabel(m),
        colorVar: COLORS[m],
        band: true
      })),
      palette,
      range,
      formatTick,
      yAxisSize: id === 'mem' ? 76 : 60,
      yTicks: id === 'mem' ? 'bytes' : undefined,
      onHover: index => this._onHover(index),
      onZoom: this._ctx.onZoom,
      onResetZoom: this._ctx.onResetZoom,
      bands: this._ctx.bands
    });
    const box = el('figure', 'jp-gpu-dash-figure');
    const caption = el('figcaption', 'jp-gpu-dash-caption');
    const scale =
      id === 'mem'
        ? this._memTotal !== null
          ? trans.__('0 to %1', formatBytes(this._memTotal))
          : ''
        : id === 'power'
          ? this._powerLimit !== null
            ? trans.__(
                '0 to %1 (the power limit)',
                formatWatts(this._powerLimit)
              )
            : ''
          : '';
    caption.append(el('span', 'jp-gpu-dash-caption-title', title));
    for (const m of metrics) {
      const key = el('span', 'jp-gpu-dash-key', metricLabel(m));
      key.style.setProperty('--jp-gpu-tile-color', `var(${COLORS[m]})`);
      caption.append(key);
    }
    if (scale) {
      caption.append(el('span', 'jp-gpu-dash-scale', scale));
    }
    box.append(caption, chart.node);
    return chart;
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
    const add = (m: Metric, format: (v: number | null) => string) => {
      const gpm = !FAST_METRICS.has(m);
      if (fresh && fresh[gpm ? 'gpm' : 'fast'].stale) {
        stale.push(
          `${this._label(m)} ${format(model.lastKnown(gpu, m)?.value ?? null)}`
        );
      } else {
        live.push(
          `${this._label(m)} ${format(source.lines(gpu, m)?.[0][i] ?? null)}`
        );
      }
    };
    for (const m of this._util) {
      add(m, formatPct);
    }
    add('mem', v => formatBytesOf(v, this._memTotal));
    add('power', formatWatts);
    add('temp', formatCelsius);
    setText(this._values, live.join(' · '));
    if (stale.length && fresh) {
      const group = fresh.fast.stale ? 'fast' : 'gpm';
      stale.push(ageText(model.readAgeS(gpu, group)));
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
  private _util: Metric[] = [];
  private _specs: [string, Metric[], string][] = [];
  private _timeShown = NaN;
  private _timeLatest = false;
  private _ctx: IRowContext;
  private _name: HTMLSpanElement;
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
  private _memTotal: number | null = null;
  private _powerLimit: number | null = null;
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

/** The text of a band under the cursor: the cell, and each GPU's numbers over its run. */
export function bandText(
  marker: ICellMarker,
  gpus: readonly number[],
  memTotals: ReadonlyMap<number, number | null>
): string {
  const count =
    marker.executionCount !== null
      ? trans.__('In [%1]', marker.executionCount)
      : trans.__('In [*]');
  const name = marker.notebook.split('/').pop() ?? marker.notebook;
  const per = gpus
    .map(g =>
      trans.__(
        'GPU %1: mean util %2, peak mem %3',
        g,
        formatPct(meanUtil(marker, g)),
        formatBytesOf(peakMem(marker, g), memTotals.get(g) ?? null)
      )
    )
    .join('; ');
  const failed = marker.success === false ? trans.__(' (failed)') : '';
  return `${name} ${count}${failed}: ${marker.firstLine} — ${per}`;
}

/** What the dashboard says without a GPU: why, and what to do about it. */
class EmptyState {
  constructor() {
    this.node = el('section', 'jp-gpu-dash-empty');
    this.node.setAttribute('role', 'status');
    this.node.hidden = true;
    this._why = el('p', 'jp-gpu-dash-empty-why');
    this._todo = el('ul', 'jp-gpu-dash-empty-todo');
    this.node.append(
      el('h3', 'jp-gpu-dash-empty-title', trans.__('No GPU to show')),
      this._why,
      el('p', 'jp-gpu-dash-empty-lead', trans.__('What you can do:')),
      this._todo
    );
  }

  readonly node: HTMLElement;

  /** Show why there is no GPU (`reason`: the server's words); `undefined`: hide. */
  show(reason: string | null | undefined): void {
    setHidden(this.node, reason === undefined);
    if (reason === undefined || reason === this._reason) {
      return;
    }
    this._reason = reason;
    setText(
      this._why,
      trans.__('%1. %2', noGpuMessage(reason), plainNoGpuReason(reason))
    );
    const off = (reason ?? '').includes('switched off');
    const steps = [
      off
        ? trans.__(
            'Read the GPUs: start JupyterLab with --JupyterGpu.backend=auto (or remove the setting that says none).'
          )
        : trans.__(
            'On a machine with an NVIDIA GPU: check that nvidia-smi lists it (install or load the NVIDIA driver if not), then restart JupyterLab.'
          ),
      trans.__(
        'Without a GPU: start JupyterLab with --JupyterGpu.backend=simulated to see the dashboard with simulated GPUs (labelled as such).'
      )
    ];
    this._todo.replaceChildren(
      ...steps.map(step => {
        const item = el('li', '');
        setTextWithOptions(item, step);
        return item;
      })
    );
  }

  private _why: HTMLParagraphElement;
  private _todo: HTMLUListElement;
  private _reason: string | null | undefined = undefined;
}

export class GpuDashboard extends ModelView {
  constructor(model: GpuMonitorModel) {
    super(model, 'dashboard');
    this.id = 'jupyter-gpu-dashboard';
    this.addClass('jp-gpu-dashboard');
    this.title.label = trans.__('GPU dashboard');
    this.title.closable = true;
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', trans.__('GPU dashboard'));

    const bar = el('div', 'jp-gpu-dash-toolbar');
    const ranges = el('div', 'jp-gpu-dash-ranges');
    ranges.setAttribute('role', 'group');
    ranges.setAttribute('aria-label', trans.__('Time range'));
    for (const name of Object.keys(RANGES) as RangeName[]) {
      const button = el(
        'button',
        'jp-mod-styled jp-gpu-dash-range',
        rangeLabel(name)
      );
      button.setAttribute('aria-pressed', String(name === this._range));
      button.addEventListener('click', () => this.setRange(name));
      this._rangeButtons.set(name, button);
      ranges.append(button);
    }
    this._pause = el(
      'button',
      'jp-mod-styled jp-gpu-dash-pause',
      trans.__('Pause')
    );
    this._pause.setAttribute('aria-pressed', 'false');
    this._pause.addEventListener('click', () => this.setPaused(!this._paused));
    this._resetZoom = el(
      'button',
      'jp-mod-styled jp-gpu-dash-reset',
      trans.__('Whole range')
    );
    this._resetZoom.hidden = true;
    this._resetZoom.addEventListener('click', () => this._setZoom(null));
    this._state = el('span', 'jp-gpu-dash-state');
    this._state.setAttribute('role', 'status');
    const hint = el('span', 'jp-gpu-dash-hint', zoomHint());
    bar.append(ranges, this._pause, this._resetZoom, this._state, hint);
    // Its controls act on charts: hidden while there is no GPU to chart.
    this._toolbar = bar;
    this._rows = el('div', 'jp-gpu-dash-rows');
    this._empty = new EmptyState();
    this.node.append(bar, this._empty.node, this._rows);
    model.changed.connect(this._onChanged, this);
  }

  get range(): RangeName {
    return this._range;
  }

  /** Show 5 min, 1 h or 24 h (the zoom is reset). */
  setRange(name: RangeName): void {
    this._range = name;
    for (const [n, b] of this._rangeButtons) {
      b.setAttribute('aria-pressed', String(n === name));
    }
    this._zoom = null;
    setHidden(this._resetZoom, true);
    this._columns = null;
    this._frozen = null;
    if (name !== '5m') {
      void this._fetchColumns();
    }
    this._render();
  }

  /** Stop (or resume) following new data; the charts keep what they show. */
  setPaused(paused: boolean): void {
    this._paused = paused;
    this._frozen = null;
    setText(this._pause, paused ? trans.__('Resume') : trans.__('Pause'));
    this._pause.setAttribute('aria-pressed', String(paused));
    if (!paused && this._range !== '5m') {
      void this._fetchColumns();
    }
    this._render();
  }

  themeChanged(): void {
    this._palette.reset();
    for (const row of this._rowsByGpu.values()) {
      row.redraw();
    }
  }

  override dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._stopTimer();
    for (const row of this._rowsByGpu.values()) {
      row.dispose();
    }
    super.dispose();
  }

  protected override onShown(): void {
    if (this._range !== '5m' && !this._paused) {
      void this._fetchColumns();
    }
    this._render();
  }

  protected override onAfterHide(msg: Message): void {
    this._stopTimer();
    super.onAfterHide(msg);
  }

  protected override onBeforeDetach(msg: Message): void {
    this._stopTimer();
    super.onBeforeDetach(msg);
  }

  private _onChanged(): void {
    if (!this.isVisible) {
      return;
    }
    // Bands and the live range follow every change; long ranges follow their timer.
    const version = this.model.markers.version;
    if (this._range === '5m' || version !== this._markersVersion) {
      this._render();
    }
  }

  private _stopTimer(): void {
    if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
  }

  private async _fetchColumns(): Promise<void> {
    this._stopTimer();
    const transport = this.model.transport;
    if (!transport.historyColumns) {
      return;
    }
    const span = RANGES[this._range];
    const now = this.model.serverNow();
    const zoom = this._zoom;
    // Zoomed into a long range: ask for the zoomed span at the chart's resolution.
    const since = zoom ? zoom[0] : now - span;
    const points = zoom
      ? Math.min(
          20000,
          Math.ceil((LONG_RANGE_POINTS * (now - zoom[0])) / (zoom[1] - zoom[0]))
        )
      : LONG_RANGE_POINTS;
    const range = this._range;
    const started = performance.now();
    try {
      const columns = await transport.historyColumns({ since, points });
      if (range !== this._range || this.isDisposed) {
        return;
      }
      this._columns = columns;
      setData(
        this.node,
        'fetchMs',
        String(Math.round(performance.now() - started))
      );
      setData(this.node, 'resolutionS', String(columns.resolution_s));
      this._render();
    } catch (err) {
      setText(
        this._state,
        trans.__('Could not read the long history: %1', String(err))
      );
    }
    if (this.isVisible && !this._paused && range === this._range) {
      const wait = Math.max(10, this._columns?.resolution_s ?? 10) * 1000;
      this._timer = setTimeout(() => void this._fetchColumns(), wait);
    }
  }

  private _setZoom(zoom: [number, number] | null): void {
    // uPlot hands a drag to every chart that shares the cursor, each after the first has
    // already rescaled them all: take the first only.
    if (this._zooming) {
      return;
    }
    this._zooming = true;
    queueMicrotask(() => (this._zooming = false));
    this._zoom = zoom;
    setHidden(this._resetZoom, zoom === null);
    if (this._range !== '5m') {
      void this._fetchColumns();
    }
    this._render();
  }

  private _source(): ISeriesSource | null {
    const info = this.model.info;
    if (this._range === '5m') {
      const live = bufferSource(
        this.model.buffer,
        info?.config.interval_s ?? 1
      );
      if (this._paused) {
        this._frozen ??= frozenSource(live, this._gpus());
        return this._frozen;
      }
      return live;
    }
    return this._columns ? columnsSource(this._columns) : null;
  }

  private _gpus(): number[] {
    const info = this.model.info;
    const latest = this.model.latest;
    const set = new Set<number>();
    for (const d of info?.devices ?? []) {
      set.add(d.index);
    }
    for (const d of latest?.devices ?? []) {
      set.add(d.index);
    }
    return [...set].sort((a, b) => a - b);
  }

  private _render(): void {
    if (!this.isVisible) {
      return;
    }
    performance.mark(`${DASHBOARD_MEASURE}:start`);
    const info = this.model.info;
    const gpus = this._gpus();
    this._syncRows(gpus);
    const source = this._source();
    const now = this.model.serverNow();
    let end = this._range === '5m' ? (this.model.latest?.ts ?? now) : now;
    if (this._paused) {
      end = this._pausedEnd ??= end; // paused: the charts hold where they were
    } else {
      this._pausedEnd = null;
    }
    const [xMin, xMax] = this._zoom ?? [end - RANGES[this._range], end];
    this._markersVersion = this.model.markers.version;
    this._bands = this.model.markers
      .overlapping(xMin, xMax, now)
      .map(
        m =>
          [m.start, m.end ?? now, m.success === false] as [
            number,
            number,
            boolean
          ]
      );
    const noGpu = !!info && !gpus.length;
    setHidden(this._toolbar, noGpu);
    this._empty.show(
      noGpu ? (this.model.latest?.reason ?? info.reason) : undefined
    );
    setData(this.node, 'empty', String(noGpu));
    setText(
      this._state,
      !info
        ? trans.__('Connecting…')
        : noGpu
          ? ''
          : this._paused
            ? trans.__('Paused')
            : source
              ? ''
              : trans.__('Loading the long history…')
    );
    if (source) {
      for (const gpu of gpus) {
        const row = this._rowsByGpu.get(gpu);
        row?.render(source, xMin, xMax, !this._offscreen.has(row.node));
      }
    }
    setData(this.node, 'range', this._range);
    setData(this.node, 'points', String(source?.xs.length ?? 0));
    performance.measure(DASHBOARD_MEASURE, `${DASHBOARD_MEASURE}:start`);
    performance.clearMarks(`${DASHBOARD_MEASURE}:start`);
    if (++this._measures % 600 === 0) {
      performance.clearMeasures(DASHBOARD_MEASURE);
    }
  }

  private _syncRows(gpus: number[]): void {
    const info = this.model.info;
    for (const [gpu, row] of this._rowsByGpu) {
      if (!gpus.includes(gpu)) {
        this._unobserve(row.node);
        row.dispose();
        this._rowsByGpu.delete(gpu);
      }
    }
    let changed = false;
    for (const gpu of gpus) {
      let row = this._rowsByGpu.get(gpu);
      if (!row) {
        row = new GpuRow(gpu, {
          palette: this._palette,
          model: this.model,
          bands: () => this._bands,
          onZoom: (from, to) => this._setZoom([from, to]),
          onResetZoom: () => this._setZoom(null),
          onHoverTime: ts => this._onHoverTime(ts),
          watch: node => this._observe(node),
          unwatch: node => this._unobserve(node),
          onScreen: node => !this._offscreen.has(node)
        });
        this._rowsByGpu.set(gpu, row);
        this._observe(row.node);
        changed = true;
      }
      if (info !== this._infoShown) {
        row.setInfo(info?.devices.find(d => d.index === gpu));
      }
    }
    this._infoShown = info;
    if (changed) {
      this._rows.replaceChildren(
        ...gpus.map(g => this._rowsByGpu.get(g)!.node)
      );
    }
  }

  private _observe(node: Element): void {
    if (typeof IntersectionObserver === 'undefined') {
      return;
    }
    // Off screen until the observer says otherwise (it reports every node at once): the first
    // render then creates and draws only the charts in view, not all of them (4 per GPU).
    this._offscreen.add(node);
    this._intersection ??= new IntersectionObserver(entries => {
      let shown = false;
      for (const entry of entries) {
        if (entry.isIntersecting) {
          shown = this._offscreen.delete(entry.target) || shown;
        } else {
          this._offscreen.add(entry.target);
        }
      }
      if (shown) {
        this._render();
      }
    });
    this._intersection.observe(node);
  }

  private _unobserve(node: Element): void {
    this._intersection?.unobserve(node);
    this._offscreen.delete(node);
  }

  private _onHoverTime(ts: number | null): void {
    const marker =
      ts === null ? null : this.model.markers.at(ts, this.model.serverNow());
    const id = marker?.id ?? null;
    if (id === this._bandShown && marker?.end !== null) {
      return;
    }
    this._bandShown = id;
    const gpus = this._gpus();
    const totals = new Map<number, number | null>();
    for (const d of this.model.info?.devices ?? []) {
      totals.set(d.index, d.mem_total_bytes);
    }
    const text = marker ? bandText(marker, gpus, totals) : '';
    for (const row of this._rowsByGpu.values()) {
      row.showBand(text);
    }
  }

  private _palette = new Palette();
  private _range: RangeName = '5m';
  private _paused = false;
  private _pausedEnd: number | null = null;
  private _zoom: [number, number] | null = null;
  private _zooming = false;
  private _columns: IHistoryColumns | null = null;
  private _frozen: ISeriesSource | null = null;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _rangeButtons = new Map<RangeName, HTMLButtonElement>();
  private _pause: HTMLButtonElement;
  private _resetZoom: HTMLButtonElement;
  private _state: HTMLSpanElement;
  private _rows: HTMLDivElement;
  private _empty: EmptyState;
  private _toolbar: HTMLDivElement;
  private _rowsByGpu = new Map<number, GpuRow>();
  private _infoShown: unknown = null;
  private _bands: readonly [number, number, boolean][] = [];
  private _markersVersion = -1;
  private _bandShown: number | null = null;
  private _intersection: IntersectionObserver | null = null;
  private _offscreen = new Set<Element>();
  private _measures = 0;
}
