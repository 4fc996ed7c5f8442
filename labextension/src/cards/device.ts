/**
 * A GPU's card: a header, a message when it is lost or failing, four charts (two in compact
 * cards, power and temperature then being numbers in the header), its processes.
 */
import { gpuKey, SampleBuffer } from '../buffer';
import { Palette } from '../chart';
import {
  formatBytesOf,
  formatCelsius,
  formatPct,
  formatWatts
} from '../format';
import { ProcessList } from '../processes';
import { setText, Tile } from '../tile';
import { IDeviceInfo, IDeviceSample } from '../types';
import { el, fitRange, IRenderContext, pctRange, redrawTiles } from './common';

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

  /** Redraw the charts as they are (the theme changed). */
  redraw(): void {
    redrawTiles([this._util, this._mem, this._power, this._temp]);
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
