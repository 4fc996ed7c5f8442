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
    this._title = el(
      'h3',
      'jp-gpu-dash-empty-title',
      trans.__('No GPU to show')
    );
    this.node.append(
      this._title,
      this._why,
      el('p', 'jp-gpu-dash-empty-lead', trans.__('What you can do:')),
      this._todo
    );
  }

  readonly node: HTMLElement;

  /**
   * Show why there is no GPU (`reason`: the server's words); `undefined`: hide. `waiting`:
   * NVML has not answered at the server's start (what to say, `nvmlWaitMessage`), so the GPUs
   * may yet come.
   */
  show(reason: string | null | undefined, waiting: string | null = null): void {
    setHidden(this.node, reason === undefined);
    if (
      reason === undefined ||
      (reason === this._reason && waiting === this._waiting)
    ) {
      return;
    }
    this._reason = reason;
    this._waiting = waiting;
    if (waiting !== null) {
      setText(this._title, trans.__('Waiting for NVML'));
      setText(this._why, waiting);
      this._steps([
        trans.__(
          'Nothing, if it answers soon: the GPUs then appear here by themselves.'
        ),
        trans.__(
          'If it lasts: nvidia-smi on the server hangs too when the driver does; the driver or a GPU may need a reset (ask the administrator).'
        )
      ]);
      return;
    }
    setText(this._title, trans.__('No GPU to show'));
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
    this._steps(steps);
  }

  private _steps(steps: string[]): void {
    this._todo.replaceChildren(
      ...steps.map(step => {
        const item = el('li', '');
        setTextWithOptions(item, step);
        return item;
      })
    );
  }

  private _title: HTMLHeadingElement;
  private _waiting: string | null = null;

  private _why: HTMLParagraphElement;
  private _todo: HTMLUListElement;
  private _reason: string | null | undefined = undefined;
}
