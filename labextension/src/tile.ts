/**
 * One metric of a card: a label, the current value, and its live chart.
 */
import { Column } from './buffer';
import { Palette, Sparkline } from './chart';

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
}

export class Tile {
  constructor(options: ITileOptions) {
    this._formatAt = options.formatAt;
    const node = (this.node = document.createElement('div'));
    node.className = 'jp-gpu-tile';
    node.dataset.metric = options.metric;
    const head = document.createElement('div');
    head.className = 'jp-gpu-tile-head';
    // The swatch says which line is which; the label gives way first when the panel is narrow.
    const swatch = document.createElement('span');
    swatch.className = 'jp-gpu-tile-swatch';
    swatch.style.setProperty('--jp-gpu-tile-color', `var(${options.colorVar})`);
    const label = document.createElement('span');
    label.className = 'jp-gpu-tile-label';
    label.textContent = options.label;
    this._value = document.createElement('span');
    this._value.className = 'jp-gpu-tile-value';
    head.append(swatch, label, this._value);
    this._label = options.label;
    this.chart = new Sparkline({
      colorVar: options.colorVar,
      palette: options.palette,
      range: options.range,
      onHover: index => this._hover(index)
    });
    node.append(head, this.chart.node);
  }

  readonly node: HTMLDivElement;
  readonly chart: Sparkline;

  /** Set the current value (and its tooltip); kept while the cursor shows an older one. */
  setValue(text: string, title = ''): void {
    this._text = text;
    if (this._hovered === null) {
      setText(this._value, text);
    }
    const full = title ? `${this._label}: ${title}` : this._label;
    if (this.node.title !== full) {
      this.node.title = full;
    }
  }

  update(
    xs: number[],
    ys: Column,
    xMin: number,
    xMax: number,
    gapS: number
  ): void {
    this.chart.update(xs, ys, xMin, xMax, gapS);
  }

  set visible(visible: boolean) {
    this.node.hidden = !visible;
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
    setText(this._value, index === null ? this._text : this._formatAt(index));
  }

  private _formatAt: (index: number) => string;
  private _label: string;
  private _value: HTMLSpanElement;
  private _text = '';
  private _hovered: number | null = null;
}

/** Set text only when it changed: no layout work for a value that stayed the same. */
export function setText(node: HTMLElement, text: string): void {
  if (node.textContent !== text) {
    node.textContent = text;
  }
}
