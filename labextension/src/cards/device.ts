/**
 * A GPU's card: a header, a message when it is lost or failing, four charts (two in compact
 * cards, power and temperature then being numbers in the header), a line for each other group
 * of readings with something to show (GPM: "SM active 78% · tensor 72% · DRAM 18%"; which
 * readings, from readings.generated.ts), its processes. A reading the GPU cannot give (NVML's
 * "Not Supported") says so in place of its chart. Readings the server marks stale (or all of
 * them, while the GPU is not responding) show their last known values greyed, with "last read
 * 12 s ago" (freshness.ts), never as live.
 */
import { gpuKey, Metric, SampleBuffer } from '../buffer';
import { fitRange, Palette, pctRange } from '../chart';
import { el, setData, setHidden, setText, setTitle } from '../dom';
import { trans } from '../i18n';
import { ICellMarker, meanUtil, peakMem } from '../markers';
import {
  formatBytes,
  formatBytesOf,
  ageText,
  formatCelsius,
  formatClock,
  formatPct,
  formatReading,
  formatWatts,
  unavailableHelp
} from '../format';
import { ProcessList } from '../processes';
import { IChartSettings } from '../settings';
import { Tile } from '../tile';
import { ChartId } from '../readings';
import {
  GROUP_HELP,
  METRICS,
  READING_GROUPS,
  ReadingGroup
} from '../readings.generated';
import { GpuIdentity } from '../gpuidentity';
import { IDeviceInfo, IDeviceSample } from '../types';
import { drawTile, IRenderContext, redrawTiles } from './common';

/** One metric of the card, wired once: no table is built per update. */
interface IMetric {
  tile: Tile;
  label: string;
  /** The sample's field: its column in the buffer, and the key of its reason in `unavailable`. */
  field: 'util_pct' | 'mem_used_bytes' | 'power_w' | 'temperature_c';
  /** Its column in the buffer. */
  key: string;
  /** The setting that shows it. */
  setting: keyof IChartSettings;
  /** Charted in compact cards too (power and temperature are then header numbers). */
  compact: boolean;
  format: (value: number | null) => string;
  /** The tooltip while the value reads. */
  hint: () => string;
}

export class DeviceCard {
  constructor(
    readonly index: number,
    palette: Palette,
    openNotebook: ((path: string) => void) | null
  ) {
    const node = (this.node = el('section', 'jp-gpu-card'));
    node.dataset.gpuIndex = String(index);
    const header = el('header', 'jp-gpu-card-header');
    const identity = (this.identity = new GpuIdentity(index, {
      indexTag: 'span',
      indexClass: 'jp-gpu-card-index',
      nameClass: 'jp-gpu-card-name'
    }));
    this._extra = el('span', 'jp-gpu-card-extra');
    header.append(
      identity.indexNode,
      identity.nameNode,
      identity.badgeNode,
      this._extra
    );
    this._message = el('div', 'jp-gpu-card-message');
    this._message.setAttribute('role', 'status');
    this._message.hidden = true;
    // How old the greyed values are, when the GPU's readings are stale.
    this._age = el('div', 'jp-gpu-card-age');
    this._age.hidden = true;

    const mem = (v: number | null) => formatBytesOf(v, identity.memTotalBytes);
    const metric = (
      label: string,
      chart: ChartId,
      colorVar: string,
      range: (max: number) => [number, number],
      rest: Omit<IMetric, 'tile' | 'key' | 'label'>
    ): IMetric => {
      const key = gpuKey(index, rest.field);
      const tile = new Tile({
        label,
        metric: chart, // the tile is the card's chart of it: `data-metric="util"`
        colorVar,
        palette,
        range,
        formatAt: i => rest.format(this._buffer?.column(key)[i] ?? null),
        onHover: i => this._onHover(i)
      });
      return { tile, key, label, ...rest };
    };
    const none = () => '';
    this._metrics = [
      metric(trans.__('Util'), 'util', '--jp-brand-color1', pctRange, {
        field: 'util_pct',
        setting: 'utilization',
        compact: true,
        format: formatPct,
        hint: none
      }),
      metric(
        trans.__('Mem'),
        'mem',
        '--jp-accent-color1',
        max => [0, identity.memTotalBytes ?? fitRange(max)[1]],
        {
          field: 'mem_used_bytes',
          setting: 'memory',
          compact: true,
          format: mem,
          hint: none
        }
      ),
      metric(
        trans.__('Power'),
        'power',
        '--jp-warn-color1',
        max => [0, Math.max(identity.powerLimitW ?? 0, fitRange(max)[1])],
        {
          field: 'power_w',
          setting: 'power',
          compact: false,
          format: formatWatts,
          hint: () =>
            identity.powerLimitW
              ? trans.__('Power limit %1', formatWatts(identity.powerLimitW))
              : ''
        }
      ),
      // Not the error colour: a normal temperature is no error.
      metric(trans.__('Temp'), 'temp', '--jp-info-color0', pctRange, {
        field: 'temperature_c',
        setting: 'temperature',
        compact: false,
        format: formatCelsius,
        hint: none
      })
    ];
    this._tiles = el('div', 'jp-gpu-tiles');
    this._tiles.append(...this._metrics.map(m => m.tile.node));
    this._procs = new ProcessList(openNotebook);
    this._groupLines = el('div', 'jp-gpu-group-lines');
    this._hoverLine = el('div', 'jp-gpu-card-hover');
    this._hoverLine.hidden = true;
    this._hoverTime = document.createElement('time');
    this._hoverCell = el('span', 'jp-gpu-card-hover-cell');
    this._hoverLine.append(this._hoverTime, this._hoverCell);
    node.append(
      header,
      this._hoverLine,
      this._message,
      this._age,
      this._tiles,
      this._groupLines,
      this._procs.node
    );
  }

  readonly node: HTMLElement;
  /** The GPU itself: its name, memory total, power limit, state. */
  readonly identity: GpuIdentity;

  /** Show the static facts from `GET devices`. */
  setInfo(info: IDeviceInfo | undefined): void {
    this.identity.setInfo(info);
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
    this._ctx = ctx;
    const identity = this.identity;
    identity.setSimulated(ctx.simulated);
    identity.setSample(device);
    setData(this.node, 'state', identity.state);
    const message = identity.stateMessage();
    setText(this._message, message);
    setHidden(this._message, !message);

    const ok = device?.state === 'ok';
    const { charts, compact, readings } = ctx;
    const fresh = readings.freshness(this.index);
    // Stale (the server says so, or the GPU is not responding): the last known values, greyed.
    const stale = fresh.fast.stale;
    this.node.classList.toggle('jp-gpu-mod-compact', compact);
    let anyShown = false;
    let extra = '';
    let extraTitle = '';
    for (const m of this._metrics) {
      const known = stale ? readings.lastKnown(this.index, m.field) : null;
      const value = ok && !stale ? device[m.field] : (known?.value ?? null);
      const reason =
        ok && !stale && value === null
          ? (device.unavailable?.[m.field] ?? null)
          : null;
      const text =
        !ok && !stale
          ? '–'
          : reason !== null
            ? trans.__('n/a')
            : m.format(value);
      m.tile.setUnavailable(reason);
      m.tile.setStale(stale);
      m.tile.setValue(
        text,
        reason !== null
          ? unavailableHelp(reason)
          : stale
            ? this._staleHint(known?.ts ?? null)
            : m.hint()
      );
      const show = charts[m.setting] && (m.compact || !compact);
      m.tile.visible = show;
      anyShown = anyShown || show;
      if (show && draw && reason === null) {
        m.tile.setScale(this._scaleOf(m.field));
        drawTile(m.tile, m.key, ctx);
      }
      if (compact && (ok || stale) && !m.compact && charts[m.setting]) {
        // In the header: "620 W · 61 °C", or "power n/a · 61 °C" with the reason in the tooltip.
        const part = reason !== null ? trans.__('%1 n/a', m.label) : text;
        extra = extra ? `${extra} · ${part}` : part;
        if (reason !== null) {
          extraTitle += `${extraTitle ? '\n' : ''}${m.tile.node.title}`;
        }
      }
    }
    this._extra.classList.toggle('jp-gpu-mod-stale', stale);
    setText(this._extra, extra);
    setTitle(this._extra, extraTitle);
    const age = stale ? readings.readAgeS(this.index, 'fast') : null;
    setHidden(this._age, !stale);
    if (stale) {
      setText(this._age, ageText(age));
      setTitle(
        this._age,
        trans.__(
          'The greyed values are the last this GPU reported; it has not given new ones since.'
        )
      );
    }
    for (const group of CARD_GROUPS) {
      this._renderGroupLine(group, device, ok, ctx);
    }
    setHidden(this._tiles, !anyShown);
    // Processes are fast readings too: while stale, the last ones read, greyed.
    const live = stale ? readings.lastLive(this.index) : null;
    const procs = charts.processes && (ok || live !== null);
    this._procs.visible = procs;
    this._procs.node.classList.toggle('jp-gpu-mod-stale', stale);
    if (procs) {
      const source = stale ? live!.device : device!;
      this._procs.update(
        source.processes,
        identity.memTotalBytes,
        source.unavailable?.processes ?? null,
        ctx.simulated
      );
    }
  }

  /**
   * A group's line ("SM active 78% · tensor 72% · DRAM 18%"): live, or its last known values
   * greyed with their age while stale; made the first time it has something to show.
   */
  private _renderGroupLine(
    group: ReadingGroup,
    device: IDeviceSample | undefined,
    ok: boolean,
    ctx: IRenderContext
  ): void {
    const { readings } = ctx;
    const stale = readings.freshness(this.index)[group].stale;
    let text = '';
    if (stale) {
      const known = groupLineText(
        group,
        m => readings.lastKnown(this.index, m)?.value
      );
      if (known) {
        text = `${known} · ${ageText(readings.readAgeS(this.index, group))}`;
      }
    } else if (ok && device) {
      text = groupLineText(group, m => device[m]);
    }
    let line = this._lines.get(group);
    if (!line && !text) {
      return;
    }
    if (!line) {
      // Its own element, made when first needed: a card shows a line per group it has.
      line = el('div', 'jp-gpu-activity');
      line.dataset.group = group;
      line.title = GROUP_HELP[group];
      this._lines.set(group, line);
      this._groupLines.replaceChildren(
        ...CARD_GROUPS.map(g => this._lines.get(g)).filter(l => l !== undefined)
      );
    }
    line.classList.toggle('jp-gpu-mod-stale', stale);
    setText(line, text);
    setHidden(line, !text);
  }

  /** A stale value's tooltip: when it was read. */
  private _staleHint(ts: number | null): string {
    return ts === null
      ? trans.__('No reading yet in this window (the GPU is not answering).')
      : trans.__(
          'Last known value, read at %1 (stale: the GPU has not reported it since).',
          formatClock(ts)
        );
  }

  /** Show the time under the cursor, and the cell that ran then (`ts` null: hide). */
  showHover(ts: number | null, marker: ICellMarker | null): void {
    setHidden(this._hoverLine, ts === null);
    if (ts === null) {
      return;
    }
    const iso = new Date(ts * 1000).toISOString();
    if (this._hoverTime.dateTime !== iso) {
      this._hoverTime.dateTime = iso;
      setText(this._hoverTime, formatClock(ts));
    }
    let cell = '';
    if (marker) {
      const name = marker.notebook.split('/').pop() ?? marker.notebook;
      const count =
        marker.executionCount !== null ? `[${marker.executionCount}]` : '[*]';
      cell = trans.__(
        ' · %1 %2 %3 · mean util %4, peak %5',
        name,
        count,
        marker.firstLine,
        formatPct(meanUtil(marker, this.index)),
        formatBytesOf(peakMem(marker, this.index), this.identity.memTotalBytes)
      );
    }
    setText(this._hoverCell, cell);
    setTitle(this._hoverLine, `${formatClock(ts)}${cell}`);
  }

  /** The top of a chart's scale in words. */
  private _scaleOf(field: IMetric['field']): string {
    const { memTotalBytes, powerLimitW } = this.identity;
    switch (field) {
      case 'mem_used_bytes':
        return memTotalBytes !== null ? formatBytes(memTotalBytes) : '';
      case 'power_w':
        return powerLimitW !== null ? formatWatts(powerLimitW) : '';
      case 'util_pct':
        return '100%';
      default:
        return '100 °C';
    }
  }

  private _onHover(index: number | null): void {
    const ts = index === null ? null : (this._buffer?.ts[index] ?? null);
    this._ctx?.onHoverTime(ts);
  }

  /** Redraw the charts as they are (the theme changed). */
  redraw(): void {
    redrawTiles(this._metrics.map(m => m.tile));
  }

  dispose(): void {
    for (const m of this._metrics) {
      m.tile.dispose();
    }
    this.node.remove();
  }

  private _buffer: SampleBuffer | null = null;
  private _ctx: IRenderContext | null = null;
  private _hoverLine: HTMLDivElement;
  private _hoverTime: HTMLTimeElement;
  private _hoverCell: HTMLSpanElement;
  private _extra: HTMLSpanElement;
  private _message: HTMLDivElement;
  private _age: HTMLDivElement;
  private _tiles: HTMLDivElement;
  private _metrics: IMetric[];
  private _procs: ProcessList;
  private _groupLines: HTMLDivElement;
  private _lines = new Map<ReadingGroup, HTMLDivElement>();
}

/** The groups with a line on the card: those with readings that have a card label. */
const CARD_GROUPS: readonly ReadingGroup[] = READING_GROUPS.filter(g =>
  METRICS.some(m => m.group === g && m.cardLabel !== null)
);

/**
 * A group's line: "SM active 78% · tensor 72% · DRAM 18%" (GPM), each reading with a card
 * label and a value; "" where there is none.
 */
export function groupLineText(
  group: ReadingGroup,
  value: (metric: Metric) => number | null | undefined
): string {
  const parts: string[] = [];
  for (const m of METRICS) {
    const v = m.group === group && m.cardLabel !== null ? value(m.name) : null;
    if (m.cardLabel !== null && v !== null && v !== undefined) {
      const shown =
        m.unit === 'pct' ? `${Math.round(v)}%` : formatReading(m.unit, v);
      parts.push(`${trans.__(m.cardLabel)} ${shown}`);
    }
  }
  return parts.join(' · ');
}
