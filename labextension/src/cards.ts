/**
 * The panel's cards: one per GPU, and one for the host (CPU, memory, torch.compile cache).
 * They only render what the model holds.
 */
import { gpuKey, SampleBuffer } from './buffer';
import { Palette } from './chart';
import {
  formatBytes,
  formatBytesDelta,
  formatBytesOf,
  formatCelsius,
  formatDuration,
  formatPct,
  formatWatts
} from './format';
import { ProcessList } from './processes';
import { IChartSettings } from './settings';
import { setText, Tile } from './tile';
import { IDeviceInfo, IDeviceSample, ISample } from './types';

/** What every card needs for one render. */
export interface IRenderContext {
  buffer: SampleBuffer;
  latest: ISample;
  charts: IChartSettings;
  /** The charts' shared time axis (Unix seconds). */
  xMin: number;
  xMax: number;
  /** The server's sampling interval (s). */
  intervalS: number;
  simulated: boolean;
  /** Two charts per GPU (power and temperature as numbers in the header). */
  compact: boolean;
}

const pctRange = (max: number): [number, number] => [0, Math.max(100, max)];
const fitRange = (max: number): [number, number] => [
  0,
  max > 0 ? max * 1.15 : 1
];

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** A GPU's card: header, a message when it is lost, four charts, its processes. */
export class DeviceCard {
  constructor(
    readonly index: number,
    palette: Palette,
    openNotebook: ((path: string) => void) | null
  ) {
    const node = (this.node = el('section', 'jp-gpu-card'));
    node.dataset.gpuIndex = String(index);
    const header = el('header', 'jp-gpu-card-header');
    header.append(el('span', 'jp-gpu-card-index', `GPU ${index}`));
    this._name = el('span', 'jp-gpu-card-name');
    this._badge = el('span', 'jp-gpu-badge', 'simulated');
    this._badge.title =
      'A simulated device (backend=simulated): the numbers are synthetic.';
    this._extra = el('span', 'jp-gpu-card-extra');
    header.append(this._name, this._badge, this._extra);
    this._message = el('div', 'jp-gpu-card-message');
    this._message.setAttribute('role', 'status');
    const column = (metric: 'util' | 'mem' | 'power' | 'temp') => () =>
      this._buffer?.column(gpuKey(index, metric)) ?? [];
    const at =
      (
        metric: 'util' | 'mem' | 'power' | 'temp',
        fmt: (v: number | null) => string
      ) =>
      (i: number) =>
        fmt(column(metric)()[i] ?? null);
    this._util = new Tile({
      label: 'Util',
      metric: 'util',
      colorVar: '--jp-brand-color1',
      palette,
      range: pctRange,
      formatAt: at('util', formatPct)
    });
    this._mem = new Tile({
      label: 'Mem',
      metric: 'mem',
      colorVar: '--jp-accent-color1',
      palette,
      range: max => [0, this._memTotal ?? fitRange(max)[1]],
      formatAt: at('mem', v => formatBytesOf(v, this._memTotal))
    });
    this._power = new Tile({
      label: 'Power',
      metric: 'power',
      colorVar: '--jp-warn-color1',
      palette,
      range: max => [0, Math.max(this._powerLimit ?? 0, fitRange(max)[1])],
      formatAt: at('power', formatWatts)
    });
    this._temp = new Tile({
      label: 'Temp',
      metric: 'temp',
      colorVar: '--jp-error-color1',
      palette,
      range: pctRange,
      formatAt: at('temp', formatCelsius)
    });
    this._tiles = el('div', 'jp-gpu-tiles');
    this._tiles.append(
      this._util.node,
      this._mem.node,
      this._power.node,
      this._temp.node
    );
    this._procs = new ProcessList(openNotebook);
    node.append(header, this._message, this._tiles, this._procs.node);
  }

  readonly node: HTMLElement;

  /** Show the static facts from `GET devices`. */
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

  /**
   * Show `device` (undefined: the server stopped reporting it). Charts are drawn only when
   * `draw` (the card is on screen); the numbers always.
   */
  render(
    device: IDeviceSample | undefined,
    ctx: IRenderContext,
    draw = true
  ): void {
    this._buffer = ctx.buffer;
    this._badge.hidden = !ctx.simulated;
    const state = device?.state ?? 'missing';
    this.node.dataset.state = state;
    if (device) {
      this._memTotal = device.mem_total_bytes ?? this._memTotal;
      this._powerLimit = device.power_limit_w ?? this._powerLimit;
      if (device.name) {
        setText(this._name, device.name);
      }
    }
    const message =
      state === 'ok'
        ? ''
        : state === 'lost'
          ? `GPU ${this.index} is lost${device?.error ? `: ${device.error}` : ''}`
          : state === 'missing'
            ? `GPU ${this.index} is no longer reported by the server.`
            : `GPU ${this.index}: ${device?.error ?? 'every read failed'}`;
    setText(this._message, message);
    this._message.hidden = !message;

    const ok = state === 'ok' && device !== undefined;
    const missing = (field: string) => device?.unavailable?.[field] ?? '';
    this._util.setValue(
      ok ? formatPct(device.util_pct) : '–',
      missing('util_pct')
    );
    this._mem.setValue(
      ok ? formatBytesOf(device.mem_used_bytes, this._memTotal) : '–',
      missing('mem_used_bytes')
    );
    this._power.setValue(
      ok ? formatWatts(device.power_w) : '–',
      missing('power_w') ||
        (this._powerLimit ? `Power limit ${formatWatts(this._powerLimit)}` : '')
    );
    this._temp.setValue(
      ok ? formatCelsius(device.temperature_c) : '–',
      missing('temperature_c')
    );

    const { charts, compact } = ctx;
    this.node.classList.toggle('jp-gpu-mod-compact', compact);
    const extra: string[] = [];
    if (compact && ok && charts.power) {
      extra.push(formatWatts(device.power_w));
    }
    if (compact && ok && charts.temperature) {
      extra.push(formatCelsius(device.temperature_c));
    }
    setText(this._extra, extra.join(' · '));
    const tiles: [Tile, boolean, 'util' | 'mem' | 'power' | 'temp'][] = [
      [this._util, charts.utilization, 'util'],
      [this._mem, charts.memory, 'mem'],
      [this._power, charts.power && !compact, 'power'],
      [this._temp, charts.temperature && !compact, 'temp']
    ];
    this._tiles.hidden = !tiles.some(([, show]) => show);
    for (const [tile, show, metric] of tiles) {
      tile.visible = show;
      if (show && draw) {
        const ys = ctx.buffer.column(gpuKey(this.index, metric));
        tile.update(ctx.buffer.ts, ys, ctx.xMin, ctx.xMax, ctx.intervalS);
      }
    }
    this._procs.visible = charts.processes && ok;
    if (charts.processes && ok) {
      this._procs.update(device.processes, this._memTotal);
    }
  }

  /** Redraw the charts as they are (theme change, or a resize when `resized`). */
  redraw(resized: boolean): void {
    redrawTiles([this._util, this._mem, this._power, this._temp], resized);
  }

  dispose(): void {
    for (const tile of [this._util, this._mem, this._power, this._temp]) {
      tile.dispose();
    }
    this.node.remove();
  }

  private _buffer: SampleBuffer | null = null;
  private _name: HTMLSpanElement;
  private _badge: HTMLSpanElement;
  private _extra: HTMLSpanElement;
  private _message: HTMLDivElement;
  private _tiles: HTMLDivElement;
  private _util: Tile;
  private _mem: Tile;
  private _power: Tile;
  private _temp: Tile;
  private _procs: ProcessList;
  private _memTotal: number | null = null;
  private _powerLimit: number | null = null;
}

/** The host's card: CPU, memory (the cgroup limit where there is one), compile cache. */
export class HostCard {
  constructor(palette: Palette) {
    const node = (this.node = el('section', 'jp-gpu-card jp-gpu-host-card'));
    const header = el('header', 'jp-gpu-card-header');
    header.append(el('span', 'jp-gpu-card-index', 'Host'));
    this._name = el('span', 'jp-gpu-card-name');
    header.append(this._name);
    const at =
      (key: string, fmt: (v: number | null) => string) => (i: number) =>
        fmt(this._buffer?.column(key)[i] ?? null);
    this._cpu = new Tile({
      label: 'CPU',
      metric: 'cpu',
      colorVar: '--jp-brand-color1',
      palette,
      range: pctRange,
      formatAt: at('host.cpu', formatPct)
    });
    this._mem = new Tile({
      label: 'RAM',
      metric: 'host-mem',
      colorVar: '--jp-accent-color1',
      palette,
      range: max => [0, this._memTotal ?? fitRange(max)[1]],
      formatAt: at('host.mem', v => formatBytesOf(v, this._memTotal))
    });
    this._cache = new Tile({
      label: 'Cache',
      metric: 'cache',
      colorVar: '--jp-info-color1',
      palette,
      range: fitRange,
      formatAt: at('cache.size', formatBytes)
    });
    this._tiles = el('div', 'jp-gpu-tiles');
    this._tiles.append(this._cpu.node, this._mem.node, this._cache.node);
    this._trend = el('div', 'jp-gpu-cache-trend');
    node.append(header, this._tiles, this._trend);
  }

  readonly node: HTMLElement;

  render(ctx: IRenderContext): void {
    this._buffer = ctx.buffer;
    const { host, compile_cache: cache } = ctx.latest;
    const { charts, buffer } = ctx;
    this.node.hidden = !charts.host && !charts.compileCache;
    this._memTotal = host?.mem_total_bytes ?? null;
    const cpus = host?.cpu_count ? `${+host.cpu_count.toFixed(1)} CPUs` : '';
    setText(this._name, cpus);
    this._cpu.setValue(
      formatPct(host?.cpu_pct),
      cpus ? `Share of ${cpus}` : ''
    );
    const limit =
      host?.mem_limit_source === 'cgroup'
        ? 'Total is the container (cgroup) limit'
        : '';
    this._mem.setValue(
      formatBytesOf(host?.mem_used_bytes, this._memTotal),
      limit
    );
    this._cache.setValue(formatBytes(cache?.size_bytes), cacheTitle(cache));
    const show: [Tile, boolean, string][] = [
      [this._cpu, charts.host, 'host.cpu'],
      [this._mem, charts.host, 'host.mem'],
      [this._cache, charts.compileCache, 'cache.size']
    ];
    for (const [tile, visible, key] of show) {
      tile.visible = visible;
      if (visible) {
        tile.update(
          buffer.ts,
          buffer.column(key),
          ctx.xMin,
          ctx.xMax,
          ctx.intervalS
        );
      }
    }
    this._trend.hidden = !charts.compileCache;
    if (charts.compileCache) {
      setText(this._trend, cacheTrend(buffer));
    }
  }

  redraw(resized: boolean): void {
    redrawTiles([this._cpu, this._mem, this._cache], resized);
  }

  dispose(): void {
    for (const tile of [this._cpu, this._mem, this._cache]) {
      tile.dispose();
    }
    this.node.remove();
  }

  private _buffer: SampleBuffer | null = null;
  private _name: HTMLSpanElement;
  private _tiles: HTMLDivElement;
  private _trend: HTMLDivElement;
  private _cpu: Tile;
  private _mem: Tile;
  private _cache: Tile;
  private _memTotal: number | null = null;
}

/** Redraw visible tiles; after a resize, measure all of them before drawing any. */
function redrawTiles(tiles: Tile[], resized: boolean): void {
  const visible = tiles.filter(tile => tile.visible);
  if (resized) {
    for (const tile of visible) {
      tile.chart.measure(); // all reads before any write: one layout, not one per chart
    }
  }
  for (const tile of visible) {
    tile.chart.redraw();
  }
}

function cacheTitle(cache: ISample['compile_cache']): string {
  if (!cache) {
    return 'The torch.compile cache has not been scanned yet.';
  }
  const lines = ['torch.compile caches on disk (inductor, triton, …):'];
  for (const dir of cache.dirs ?? []) {
    lines.push(
      dir.exists
        ? `${dir.kind}: ${formatBytes(dir.size_bytes)} in ${dir.file_count} files, ${dir.path}`
        : `${dir.kind}: none yet (${dir.path})`
    );
  }
  return lines.join('\n');
}

/** "torch.compile cache: +12.0 MiB in 5 min, 2,770 files", from the buffer's first and last sizes. */
export function cacheTrend(buffer: SampleBuffer): string {
  const sizes = buffer.column('cache.size');
  let first: number | null = null;
  let firstTs = 0;
  let last: number | null = null;
  let lastTs = 0;
  for (let i = 0; i < sizes.length; i++) {
    const value = sizes[i];
    if (value !== null) {
      if (first === null) {
        first = value;
        firstTs = buffer.ts[i];
      }
      last = value;
      lastTs = buffer.ts[i];
    }
  }
  if (first === null || last === null) {
    return 'torch.compile cache: not scanned yet';
  }
  const span = lastTs - firstTs;
  if (span <= 0) {
    return `torch.compile cache: ${formatBytes(last)}`;
  }
  return `torch.compile cache: ${formatBytesDelta(last - first)} in ${formatDuration(span)}`;
}
