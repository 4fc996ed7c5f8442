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
import { Palette } from '../chart';
import { el, setData, setHidden, setText } from '../dom';
import { formatBytesOf, formatPct, nvmlWaitMessage } from '../format';
import { trans } from '../i18n';
import { ICellMarker, meanUtil, peakMem } from '../markers';
import { GpuMonitorModel } from '../model';
import { IHistoryColumns } from '../types';
import { ModelView } from '../view';
import { EmptyState } from './empty';
import { GpuRow } from './row';
import {
  bufferSource,
  columnsSource,
  frozenSource,
  ISeriesSource,
  LONG_RANGE_POINTS,
  RangeName,
  RANGES,
  rangeLabel
} from './series';
import { zoomHint } from './timechart';

/** The performance-timeline name of one dashboard update. */
export const DASHBOARD_MEASURE = 'jupyter-gpu:dashboard-update';

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
    const latest = this.model.latest;
    this._empty.show(
      noGpu ? (latest?.reason ?? info.reason) : undefined,
      latest && (latest.nvml_wait_s ?? null) !== null
        ? nvmlWaitMessage(latest)
        : null
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
