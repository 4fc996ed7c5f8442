/**
 * One metric of a card: a line with its label, the current value and the chart's scale (its
 * top, so that no label is drawn over the line), and the live chart under it, as wide as the
 * card; or, when the GPU cannot report the metric (NVML's "Not Supported", say), the reason in
 * the chart's place. A stale reading (the GPU stopped answering) shows its last known value,
 * greyed, never as live.
 */
import { Palette, Sparkline } from './chart';
import { el, setHidden, setText, setTitle } from './dom';

export interface ITileOptions {
  /** Short label, e.g. `Util`. */
  label: string;
  /** A stable name for tests and styles, e.g. `util`. */
  metric: string;
  colorVar: string;
  palette: Palette;
  range: (dataMax: number) => [number, number];
  /** The value at a buffer index as text (shown while the cursor is over the charts). */
  formatAt: (index: number) => string;
  /** The cursor is over buffer index `index` (`null`: it left). */
  onHover?: (index: number | null) => void;
}

export class Tile {
  constructor(options: ITileOptions) {
    this._formatAt = options.formatAt;
    const node = (this.node = el('div', 'jp-gpu-tile'));
    node.dataset.metric = options.metric;
    const head = el('div', 'jp-gpu-tile-head');
    // The swatch says which line is which.
    const swatch = el('span', 'jp-gpu-tile-swatch');
    swatch.style.setProperty('--jp-gpu-tile-color', `var(${options.colorVar})`);
    this._value = el('span', 'jp-gpu-tile-value');
    this._scale = el('span', 'jp-gpu-chart-scale');
    head.append(
      swatch,
      el('span', 'jp-gpu-tile-label', options.label),
      this._value,
      this._scale
    );
    this._label = options.label;
    this.chart = new Sparkline({
      colorVar: options.colorVar,
      palette: options.palette,
      range: options.range,
      onHover: index => {
        this._hover(index);
        options.onHover?.(index);
      }
    });
    this._note = el('div', 'jp-gpu-tile-note');
    this._note.hidden = true;
    node.append(head, this.chart.node, this._note);
  }

  readonly node: HTMLDivElement;
  readonly chart: Sparkline;

  /** Set the current value (and its tooltip); kept while the cursor shows an older one. */
  setValue(text: string, title = ''): void {
    this._text = text;
    if (this._hovered === null) {
      setText(this._value, text);
    }
    if (title !== this._title) {
      this._title = title;
      setTitle(this.node, title ? `${this._label}: ${title}` : this._label);
    }
  }

  /** The chart's scale in words (its top: `140 GiB`, `700 W`), at the end of the value line. */
  setScale(text: string): void {
    setText(this._scale, text);
  }

  /**
   * Mark the value as stale (`true`: the last known value, from a GPU that stopped answering):
   * greyed, value and chart. The card says how old it is.
   */
  setStale(stale: boolean): void {
    if (stale !== this._stale) {
      this._stale = stale;
      this.node.classList.toggle('jp-gpu-mod-stale', stale);
    }
  }

  /**
   * Say why the metric cannot be read (`reason`, e.g. NVML's "Not Supported"): the reason
   * shows in place of the chart, which has nothing to draw. `null`: the chart again.
   */
  setUnavailable(reason: string | null): void {
    if (reason === this._unavailable) {
      return;
    }
    this._unavailable = reason;
    this.node.classList.toggle('jp-gpu-mod-unavailable', reason !== null);
    setHidden(this.chart.node, reason !== null);
    setHidden(this._note, reason === null);
    setText(this._note, reason ?? '');
  }

  set visible(visible: boolean) {
    setHidden(this.node, !visible);
  }
  get visible(): boolean {
    return !this.node.hidden;
  }

  dispose(): void {
    this.chart.dispose();
    this.node.remove();
  }

  private _hover(index: number | null): void {
    this._hovered = index;
    this.node.classList.toggle('jp-gpu-mod-hover', index !== null);
    // A metric the GPU cannot report has no older value to show either.
    const past = index !== null && this._unavailable === null;
    setText(this._value, past ? this._formatAt(index) : this._text);
  }

  private _formatAt: (index: number) => string;
  private _label: string;
  private _value: HTMLSpanElement;
  private _note: HTMLDivElement;
  private _scale: HTMLSpanElement;
  private _stale = false;
  private _text = '';
  /** The last tooltip asked for; `null` before the first, so that the first is written. */
  private _title: string | null = null;
  private _unavailable: string | null = null;
  private _hovered: number | null = null;
}
