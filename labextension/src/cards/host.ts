/**
 * The host's card: CPU, memory (the cgroup limit where there is one), and the torch.compile
 * cache on disk with its change over the window.
 */
import { SampleBuffer } from '../buffer';
import { Palette } from '../chart';
import {
  formatBytes,
  formatBytesDelta,
  formatBytesOf,
  formatDuration,
  formatPct
} from '../format';
import { setText, Tile } from '../tile';
import { ISample } from '../types';
import { el, fitRange, IRenderContext, pctRange, redrawTiles } from './common';

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

  /** Redraw the charts as they are (the theme changed). */
  redraw(): void {
    redrawTiles([this._cpu, this._mem, this._cache]);
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
