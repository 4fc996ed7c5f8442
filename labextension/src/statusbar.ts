/**
 * The status-bar item: `GPU 0: 87% · 31.2/140 GiB`, the whole list in its tooltip; a click
 * opens a menu: the panel or the dashboard. It keeps the model running while the status bar shows it (the status bar
 * hides it when the setting is off).
 */
import { statusText } from './format';
import { gpuIcon } from './icon';
import { GpuMonitorModel } from './model';
import { setData, setText, setTitle } from './dom';
import { ModelView } from './view';
import { trans } from './i18n';

export class GpuStatusItem extends ModelView {
  /** `onClick` gets where to open its menu (the item's top left corner, in page pixels). */
  constructor(model: GpuMonitorModel, onClick: (x: number, y: number) => void) {
    super(model, 'statusbar');
    this.addClass('jp-gpu-statusbar');
    this.node.setAttribute('role', 'button');
    this.node.tabIndex = 0;
    const icon = gpuIcon.element({
      tag: 'span',
      className: 'jp-gpu-statusbar-icon'
    });
    this._text = document.createElement('span');
    this._text.className = 'jp-gpu-statusbar-text';
    this.node.append(icon, this._text);
    this.node.setAttribute('aria-haspopup', 'menu');
    const open = () => {
      const box = this.node.getBoundingClientRect();
      onClick(box.left, box.top);
    };
    this.node.addEventListener('click', open);
    this.node.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        open();
      }
    });
    model.changed.connect(this._render, this);
    model.statusChanged.connect(this._render, this);
    this._render();
  }

  protected override onShown(): void {
    this._render();
  }

  private _render(): void {
    if (!this.isVisible) {
      return;
    }
    const { text, title } = statusText(
      this.model.status,
      this.model.info,
      this.model.latest
    );
    setText(this._text, text);
    setTitle(
      this.node,
      `${title}\n${trans.__('Click to open the GPU monitor or the dashboard.')}`
    );
    const latest = this.model.latest;
    const warn =
      latest?.devices.some(d => d.state !== 'ok') ||
      (latest?.nvml_wait_s ?? null) !== null ||
      this.model.status === 'disabled';
    setData(this.node, 'state', warn ? 'warn' : 'ok');
  }

  private _text: HTMLSpanElement;
}
