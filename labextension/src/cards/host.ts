/**
 * The host's card: CPU, memory (the cgroup limit where there is one), and the torch.compile
 * cache on disk with its change over the window.
 */
import { SampleBuffer } from '../buffer';
import { fitRange, Palette, pctRange } from '../chart';
import { cacheTrend, formatBytes, formatBytesOf, formatPct } from '../format';
import { el, setHidden, setText } from '../dom';
import { trans } from '../i18n';
import { IChartSettings } from '../settings';
import { Tile } from '../tile';
import { ISample } from '../types';
import { drawTile, IRenderContext, redrawTiles } from './common';

/** The host's card: CPU, memory (the cgroup limit where there is one), compile cache. */
export class HostCard {
  constructor(palette: Palette) {
    const node = (this.node = el('section', 'jp-gpu-card jp-gpu-host-card'));
    const header = el('header', 'jp-gpu-card-header');
    header.append(el('span', 'jp-gpu-card-index', trans.__('Host')));
    this._name = el('span', 'jp-gpu-card-name');
    header.append(this._name);
    const at =
      (key: string, fmt: (v: number | null) => string) => (i: number) =>
        fmt(this._buffer?.column(key)[i] ?? null);
    this._cpu = new Tile({
      label: trans.__('CPU'),
      metric: 'cpu',
      colorVar: '--jp-brand-color1',
      palette,
      range: pctRange,
      formatAt: at('host.cpu', formatPct)
    });
    this._mem = new Tile({
      label: trans.__('RAM'),
      metric: 'host-mem',
      colorVar: '--jp-accent-color1',
      palette,
      range: max => [0, this._memTotal ?? fitRange(max)[1]],
      formatAt: at('host.mem', v => formatBytesOf(v, this._memTotal))
    });
    this._cache = new Tile({
      label: trans.__('Cache'),
      metric: 'cache',
      colorVar: '--jp-info-color1',
      palette,
      range: fitRange,
      formatAt: at('cache.size', formatBytes)
    });
    this._show = [
      [this._cpu, 'host', 'host.cpu'],
      [this._mem, 'host', 'host.mem'],
      [this._cache, 'compileCache', 'cache.size']
    ];
    const tiles = el('div', 'jp-gpu-tiles');
    tiles.append(this._cpu.node, this._mem.node, this._cache.node);
    this._trend = el('div', 'jp-gpu-cache-trend');
    node.append(header, tiles, this._trend);
  }

  readonly node: HTMLElement;

  /** Show the newest sample; the charts only when `draw` (the card is on screen). */
  render(ctx: IRenderContext, draw = true): void {
    this._buffer = ctx.buffer;
    const { host, compile_cache: cache } = ctx.latest;
    const { charts, buffer } = ctx;
    setHidden(this.node, !charts.host && !charts.compileCache);
    this._memTotal = host?.mem_total_bytes ?? null;
    const cpus = host?.cpu_count
      ? trans.__('%1 CPUs', +host.cpu_count.toFixed(1))
      : '';
    setText(this._name, cpus);
    this._cpu.setValue(
      formatPct(host?.cpu_pct),
      cpus ? trans.__('Share of %1', cpus) : ''
    );
    const limit =
      host?.mem_limit_source === 'cgroup'
        ? trans.__('Total is the container (cgroup) limit')
        : '';
    this._mem.setValue(
      formatBytesOf(host?.mem_used_bytes, this._memTotal),
      limit
    );
    // The cache's tooltip lists its folders: rebuilt when the server scans them again.
    const scanned = cache ? cache.scanned_ts : -1;
    if (scanned !== this._cacheScanned) {
      this._cacheScanned = scanned;
      this._cacheTitle = cacheTitle(cache);
    }
    this._cache.setValue(
      cache && cache.scanned_ts !== null && cache.scanned_ts !== undefined
        ? formatBytes(cache.size_bytes)
        : trans.__('not scanned yet'),
      this._cacheTitle
    );
    for (const [tile, setting, key] of this._show) {
      const visible = charts[setting];
      tile.visible = visible;
      if (visible && draw) {
        drawTile(tile, key, ctx);
      }
    }
    setHidden(this._trend, !charts.compileCache);
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
  private _trend: HTMLDivElement;
  private _cpu: Tile;
  private _mem: Tile;
  private _cache: Tile;
  private _memTotal: number | null = null;
  /** Each tile, the setting that shows it, its column. */
  private _show: [Tile, keyof IChartSettings, string][];
  private _cacheScanned: number | null | undefined = undefined;
  private _cacheTitle = '';
}

function cacheTitle(cache: ISample['compile_cache']): string {
  if (!cache) {
    return trans.__('The torch.compile cache has not been scanned yet.');
  }
  const lines = [
    trans.__('torch.compile caches on disk (inductor, triton, …):')
  ];
  for (const dir of cache.dirs ?? []) {
    lines.push(
      dir.exists
        ? trans.__(
            '%1: %2 in %3 files, %4',
            dir.kind,
            formatBytes(dir.size_bytes),
            dir.file_count,
            dir.path
          )
        : trans.__('%1: none yet (%2)', dir.kind, dir.path)
    );
  }
  return lines.join('\n');
}
