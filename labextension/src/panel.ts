/**
 * The sidebar panel: a header with the connection state and the notice a person can act on
 * (header.ts), one card per GPU and one for the host (cards/). It renders only while visible;
 * the model does the rest.
 */
import { Message } from '@lumino/messaging';
import { DeviceCard, HostCard, IRenderContext } from './cards';
import { Palette } from './chart';
import { PanelHeader } from './header';
import { GpuMonitorModel } from './model';
import { DEFAULT_SETTINGS, IMonitorSettings } from './settings';
import { setData, setHidden } from './dom';
import { IDeviceSample, IDevicesInfo, ISample } from './types';
import { ModelView } from './view';
import { IProcessActions, ProcessTable } from './proctable';
import { CacheSection, ICacheActions } from './cachesection';
import { trans } from './i18n';

/** The performance-timeline name of one panel update (read by the browser benchmark). */
export const UPDATE_MEASURE = 'jupyter-gpu:update';
const UPDATE_START = `${UPDATE_MEASURE}:start`;

/** The device of `index` in a sample, without a closure per lookup. */
function deviceAt(
  devices: readonly IDeviceSample[],
  index: number
): IDeviceSample | undefined {
  for (const device of devices) {
    if (device.index === index) {
      return device;
    }
  }
  return undefined;
}

export interface IPanelOptions {
  model: GpuMonitorModel;
  /** Opens a notebook by path (its name in a card is then a button). */
  openNotebook?: (path: string) => void;
  /** The process table's kernel actions (none: the table only shows). */
  processActions?: IProcessActions;
  /** Clearing a compile cache (none: no "Clear…" buttons). */
  cacheActions?: ICacheActions;
  /** Opens the main-area dashboard (a button in the header). */
  openDashboard?: () => void;
}

export class GpuPanel extends ModelView {
  constructor(options: IPanelOptions) {
    super(options.model, 'panel');
    this._openNotebook = options.openNotebook ?? null;
    this.id = 'jupyter-gpu-panel';
    this.addClass('jp-gpu-panel');
    this.title.caption = trans.__('GPU monitor');
    // A named region, as JupyterLab's own side panels are, for screen readers.
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', this.title.caption);

    this._header = new PanelHeader(this.model, options.openDashboard ?? null);
    this._cards = document.createElement('div');
    this._cards.className = 'jp-gpu-cards';
    this._host = new HostCard(this._palette);
    this._host.node.hidden = true;
    this._procTable = new ProcessTable(options.processActions ?? {});
    this._caches = new CacheSection(options.cacheActions ?? null);
    // The processes right under the GPUs they run on, with their kernel actions; the host after.
    this.node.append(
      this._header.node,
      this._header.notice,
      this._cards,
      this._procTable.node,
      this._host.node,
      this._caches.node
    );

    this.model.changed.connect(this._onChanged, this);
    this.model.statusChanged.connect(this._onStatus, this);
    this._onStatus();
  }

  get settings(): IMonitorSettings {
    return this._settings;
  }
  set settings(settings: IMonitorSettings) {
    this._settings = settings;
    this._dirty = true;
    this._renderIfVisible();
  }

  /** How much history the charts show (s); the model's buffer may hold more. */
  get windowS(): number {
    return this._windowS;
  }
  set windowS(value: number) {
    if (value !== this._windowS) {
      this._windowS = value;
      this._dirty = true;
      this._renderIfVisible();
    }
  }

  /** The theme changed: read the colours again and redraw. */
  themeChanged(): void {
    this._palette.reset();
    if (this.isVisible) {
      this._redrawCharts();
    } else {
      this._dirty = true;
    }
  }

  override dispose(): void {
    if (this.isDisposed) {
      return;
    }
    for (const card of this._deviceCards.values()) {
      card.dispose();
    }
    this._host.dispose();
    this._stopAgeTimer();
    super.dispose();
  }

  protected override onAfterAttach(msg: Message): void {
    // The observer first: the render that follows (super reports the panel visible) uses it.
    this._intersection = new IntersectionObserver(
      entries => this._onIntersection(entries),
      {
        root: this.node
      }
    );
    for (const card of this._deviceCards.values()) {
      this._intersection.observe(card.node);
    }
    this._intersection.observe(this._host.node);
    super.onAfterAttach(msg);
    if (this.isVisible) {
      this._startAgeTimer();
    }
  }

  protected override onBeforeDetach(msg: Message): void {
    this._stopAgeTimer();
    this._intersection?.disconnect();
    this._intersection = null;
    this._offscreen.clear();
    super.onBeforeDetach(msg);
  }

  protected override onShown(): void {
    this._renderIfVisible();
  }

  protected override onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._startAgeTimer();
  }

  protected override onBeforeHide(msg: Message): void {
    this._stopAgeTimer();
    super.onBeforeHide(msg);
  }

  /** While shown, say "data is N s old" when samples stop coming (no event tells us then). */
  private _startAgeTimer(): void {
    if (this._ageTimer === null) {
      this._ageTimer = window.setInterval(() => this._header.updateAge(), 1000);
    }
  }

  private _stopAgeTimer(): void {
    if (this._ageTimer !== null) {
      window.clearInterval(this._ageTimer);
      this._ageTimer = null;
    }
  }

  private _onIntersection(entries: IntersectionObserverEntry[]): void {
    let shown = false;
    for (const entry of entries) {
      const node = entry.target as HTMLElement;
      if (entry.isIntersecting) {
        shown = shown || this._offscreen.delete(node);
      } else {
        this._offscreen.add(node);
      }
    }
    if (shown) {
      this._dirty = true; // draw the charts that came into view
      this._renderIfVisible();
    }
  }

  private _onChanged(): void {
    this._dirty = true;
    this._renderIfVisible();
  }

  private _renderIfVisible(): void {
    if (this._dirty && this.isVisible) {
      this._dirty = false;
      this._render();
    }
  }

  private _onStatus(): void {
    this._header.updateStatus();
    setData(this.node, 'status', this.model.status);
  }

  private _render(): void {
    performance.mark(UPDATE_START);
    const { info, latest, buffer } = this.model;
    this._header.updateNotice();
    this._header.updateAge();
    if (info) {
      this._header.setInfo(info);
    }
    if (!info || !latest) {
      this._endMeasure();
      return;
    }
    const order = this._deviceOrder(info, latest);
    const { layout, charts } = this._settings;
    const ctx = (this._ctx ??= {
      buffer,
      latest,
      charts,
      xMin: 0,
      xMax: 1,
      intervalS: 1,
      simulated: false,
      compact: false,
      markers: this.model.markers,
      readings: this.model,
      now: 0,
      onHoverTime: ts => this._onHoverTime(ts)
    });
    ctx.buffer = buffer;
    ctx.latest = latest;
    ctx.charts = charts;
    ctx.xMax = latest.ts;
    ctx.xMin = latest.ts - Math.min(this._windowS, buffer.windowS);
    ctx.now = this.model.serverNow();
    ctx.intervalS = info.config.interval_s || 1;
    ctx.simulated = latest.simulated || info.simulated;
    ctx.compact =
      layout === 'compact' || (layout === 'auto' && order.length > 4);
    setData(this.node, 'devices', String(order.length));
    // No GPU: no process table either (the notice says why).
    setHidden(this._procTable.node, order.length === 0);
    for (const index of order) {
      const card = this._deviceCards.get(index);
      // A card scrolled out of view keeps its numbers current but skips its charts; they are
      // drawn when it scrolls back (8 GPUs in a sidebar: about half are off screen).
      card?.render(
        deviceAt(latest.devices, index),
        ctx,
        !this._offscreen.has(card.node)
      );
    }
    setHidden(this._host.node, false);
    this._host.render(ctx, !this._offscreen.has(this._host.node));
    this._procTable.update(latest, this.model);
    this._caches.update(latest);
    // For tests and curious people: how much history the charts hold, and up to when.
    setData(this.node, 'samples', String(buffer.length));
    setData(this.node, 'oldestTs', String(buffer.ts[0] ?? ''));
    setData(this.node, 'newestTs', String(buffer.lastTs ?? ''));
    setData(
      this.node,
      'spanS',
      String(Math.round((buffer.lastTs ?? 0) - (buffer.ts[0] ?? 0)))
    );
    this._endMeasure();
  }

  /**
   * The GPUs to show (those `GET devices` lists and those the newest sample has), in index
   * order, with a card each; worked out again only when either list changes.
   */
  private _deviceOrder(info: IDevicesInfo, latest: ISample): number[] {
    const seen = this._latestIndices;
    const devices = latest.devices;
    let same = info === this._orderOf && devices.length === seen.length;
    for (let i = 0; same && i < devices.length; i++) {
      same = devices[i].index === seen[i];
    }
    if (same) {
      return this._order;
    }
    if (info !== this._orderOf) {
      // New device info (the GPUs came in after NVML answered): the cards made before it
      // get their names too.
      for (const [index, card] of this._deviceCards) {
        card.setInfo(info.devices.find(d => d.index === index));
      }
    }
    this._orderOf = info;
    this._latestIndices = devices.map(d => d.index);
    const indices = new Set<number>(this._latestIndices);
    for (const d of info.devices) {
      indices.add(d.index);
    }
    this._order = [...indices].sort((a, b) => a - b);
    for (const [index, card] of this._deviceCards) {
      if (!indices.has(index)) {
        this._intersection?.unobserve(card.node);
        this._offscreen.delete(card.node);
        card.dispose();
        this._deviceCards.delete(index);
      }
    }
    let previous: HTMLElement | null = null;
    for (const index of this._order) {
      let card = this._deviceCards.get(index);
      if (!card) {
        card = new DeviceCard(index, this._palette, this._openNotebook);
        this._deviceCards.set(index, card);
        this._intersection?.observe(card.node);
        card.setInfo(info.devices.find(d => d.index === index));
        // Keep the cards in index order when a device appears later.
        const before: Element | null = previous
          ? previous.nextElementSibling
          : this._cards.firstElementChild;
        this._cards.insertBefore(card.node, before);
      }
      previous = card.node;
    }
    return this._order;
  }

  private _endMeasure(): void {
    performance.measure(UPDATE_MEASURE, UPDATE_START);
    performance.clearMarks(UPDATE_START);
    // The timeline is a debugging aid, not a log: keep the last few hundred updates.
    if (++this._measures % 600 === 0) {
      performance.clearMeasures(UPDATE_MEASURE);
    }
  }

  /** Draw every chart again with its data (new colours); sizes follow on their own. */
  private _redrawCharts(): void {
    for (const card of this._deviceCards.values()) {
      card.redraw();
    }
    this._host.redraw();
    this._renderIfVisible();
  }

  /** The cursor is over the charts at `ts` (server time): the cards show when, and the cell. */
  private _onHoverTime(ts: number | null): void {
    const marker =
      ts === null ? null : this.model.markers.at(ts, this.model.serverNow());
    for (const card of this._deviceCards.values()) {
      card.showHover(ts, marker);
    }
  }

  private _settings: IMonitorSettings = DEFAULT_SETTINGS;
  private _windowS = 300;
  /** The render context, reused from one update to the next. */
  private _ctx: IRenderContext | null = null;
  private _orderOf: IDevicesInfo | null = null;
  private _latestIndices: number[] = [];
  private _order: number[] = [];
  private _openNotebook: ((path: string) => void) | null;
  private _palette = new Palette();
  private _header: PanelHeader;
  private _cards: HTMLDivElement;
  private _host: HostCard;
  private _procTable: ProcessTable;
  private _caches: CacheSection;
  private _deviceCards = new Map<number, DeviceCard>();
  private _dirty = true;
  private _intersection: IntersectionObserver | null = null;
  private _ageTimer: number | null = null;
  /** Cards scrolled out of the panel's view. */
  private _offscreen = new Set<Element>();
  private _measures = 0;
}
