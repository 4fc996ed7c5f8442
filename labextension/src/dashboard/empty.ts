/**
 * What the dashboard says without a GPU: why (the server's reason, in NVML's words and plain
 * ones) and what to do about it (the driver; the simulated backend). The dashboard shows it in
 * place of its toolbar and rows, so that no control acts on nothing.
 */
import { el, setHidden, setText, setTextWithOptions } from '../dom';
import { noGpuMessage, plainNoGpuReason } from '../format';
import { trans } from '../i18n';

/** What the dashboard says without a GPU: why, and what to do about it. */
export class EmptyState {
  constructor() {
    this.node = el('section', 'jp-gpu-dash-empty');
    this.node.setAttribute('role', 'status');
    this.node.hidden = true;
    this._why = el('p', 'jp-gpu-dash-empty-why');
    this._todo = el('ul', 'jp-gpu-dash-empty-todo');
    this.node.append(
      el('h3', 'jp-gpu-dash-empty-title', trans.__('No GPU to show')),
      this._why,
      el('p', 'jp-gpu-dash-empty-lead', trans.__('What you can do:')),
      this._todo
    );
  }

  readonly node: HTMLElement;

  /** Show why there is no GPU (`reason`: the server's words); `undefined`: hide. */
  show(reason: string | null | undefined): void {
    setHidden(this.node, reason === undefined);
    if (reason === undefined || reason === this._reason) {
      return;
    }
    this._reason = reason;
    setText(
      this._why,
      trans.__('%1. %2', noGpuMessage(reason), plainNoGpuReason(reason))
    );
    const off = (reason ?? '').includes('switched off');
    const steps = [
      off
        ? trans.__(
            'Read the GPUs: start JupyterLab with --JupyterGpu.backend=auto (or remove the setting that says none).'
          )
        : trans.__(
            'On a machine with an NVIDIA GPU: check that nvidia-smi lists it (install or load the NVIDIA driver if not), then restart JupyterLab.'
          ),
      trans.__(
        'Without a GPU: start JupyterLab with --JupyterGpu.backend=simulated to see the dashboard with simulated GPUs (labelled as such).'
      )
    ];
    this._todo.replaceChildren(
      ...steps.map(step => {
        const item = el('li', '');
        setTextWithOptions(item, step);
        return item;
      })
    );
  }

  private _why: HTMLParagraphElement;
  private _todo: HTMLUListElement;
  private _reason: string | null | undefined = undefined;
}
