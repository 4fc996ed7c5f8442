/**
 * The top of the panel: the title, the server's host and driver, the connection state, and
 * the one notice a person should read first (no GPU, simulated GPUs, the extension off, the
 * server unreachable with a *Retry now* button).
 */
import { el, setData, setHidden, setText, setTitle } from './dom';
import { noGpuMessage, plainNoGpu } from './format';
import { ConnectionStatus, GpuMonitorModel } from './model';
import { IDevicesInfo } from './types';

const STATUS_LABELS: { [status in ConnectionStatus]: [string, string] } = {
  idle: ['idle', 'Not connected yet.'],
  connecting: ['connecting…', 'Loading the devices and their history.'],
  live: ['live', 'Streaming samples over a WebSocket.'],
  polling: [
    'polling',
    'The WebSocket does not connect (a proxy may block it): polling over HTTP instead.'
  ],
  reconnecting: [
    'reconnecting…',
    'The connection was lost; retrying with backoff.'
  ],
  paused: ['paused', 'Hidden: no connection, no updates.'],
  disabled: ['off', 'The jupyter-gpu server extension is not enabled.'],
  forbidden: ['no access', 'This user may not read GPU metrics.']
};

export class PanelHeader {
  constructor(model: GpuMonitorModel) {
    this._model = model;
    this.node = el('div', 'jp-gpu-header');
    this._subtitle = el('span', 'jp-gpu-subtitle');
    this._status = el('span', 'jp-gpu-status');
    this._age = el('span', 'jp-gpu-age');
    setHidden(this._age, true);
    this.node.append(
      el('h2', 'jp-gpu-title', 'GPUs'),
      this._subtitle,
      this._status,
      this._age
    );

    this.notice = el('div', 'jp-gpu-notice');
    this.notice.setAttribute('role', 'status');
    this._noticeText = el('div', 'jp-gpu-notice-text');
    this._retry = el('button', 'jp-mod-styled jp-gpu-retry', 'Retry now');
    this._retry.addEventListener('click', () => model.retryNow());
    this.notice.append(this._noticeText, this._retry);
  }

  /** The title line. */
  readonly node: HTMLDivElement;
  /** The notice under it (hidden when there is nothing to say). */
  readonly notice: HTMLDivElement;

  /** Show the connection state and the notice that goes with it. */
  updateStatus(): void {
    const { status, error } = this._model;
    const [label, help] = STATUS_LABELS[status];
    setText(this._status, label);
    setData(this._status, 'status', status);
    setTitle(this._status, error ? `${help}\n${error}` : help);
    this.updateNotice();
    this.updateAge();
  }

  /**
   * "data is N s old" when the latest sample is older than three intervals (at least 5 s):
   * the server's sampler is stuck, or the samples stopped arriving. Hidden otherwise.
   */
  updateAge(): void {
    const { dataAgeS, info, status } = this._model;
    const interval = info?.config.interval_s ?? 1;
    const old =
      dataAgeS !== null &&
      status !== 'paused' &&
      dataAgeS > Math.max(5, 3 * interval);
    setHidden(this._age, !old);
    if (old) {
      setText(this._age, `data is ${Math.round(dataAgeS)} s old`);
      setTitle(
        this._age,
        'No new sample for this long: the server’s GPU sampler may be stuck (see its log) or ' +
          'the connection stalled.'
      );
    }
  }

  /** Show the host, driver and CUDA version (worked out again only for new info). */
  setInfo(info: IDevicesInfo): void {
    if (info === this._info) {
      return;
    }
    this._info = info;
    const subtitle = [
      info.hostname,
      info.driver_version ? `driver ${info.driver_version}` : null,
      info.cuda_driver_version ? `CUDA ${info.cuda_driver_version}` : null
    ]
      .filter(Boolean)
      .join(' · ');
    setText(this._subtitle, subtitle);
    setTitle(this._subtitle, subtitle); // the whole line when a narrow panel shortens it
  }

  /** The one notice a person should read first, if any. */
  updateNotice(): void {
    const { status, error, info, latest } = this._model;
    let kind = '';
    let text = '';
    if (status === 'disabled') {
      kind = 'disabled';
      text =
        'The jupyter-gpu server extension is not enabled, so there is nothing to show. ' +
        'Enable it with “jupyter server extension enable jupyter_gpu” and restart Jupyter.';
    } else if (status === 'forbidden') {
      kind = 'error';
      text = `${error ?? ''} Ask the server's administrator for the jupyter_gpu:read permission.`;
    } else if (status === 'reconnecting' && error) {
      kind = 'error';
      text = `${error} Retrying; the charts keep their history and fill the gap on reconnect.`;
    } else if (
      info &&
      !info.gpu_available &&
      !(latest && latest.devices.length)
    ) {
      kind = 'no-gpu';
      const reason = latest?.reason ?? info.reason;
      text = `${noGpuMessage(reason)}. ${plainNoGpu(reason)} Host metrics are still shown.`;
    } else if (info?.simulated || latest?.simulated) {
      kind = 'simulated';
      text =
        'Simulated GPUs: synthetic numbers from the simulated backend, for demos and tests.';
    }
    setHidden(this.notice, !kind);
    setData(this.notice, 'kind', kind);
    setText(this._noticeText, text);
    setHidden(this._retry, kind !== 'error');
  }

  private _model: GpuMonitorModel;
  private _subtitle: HTMLSpanElement;
  private _status: HTMLSpanElement;
  private _age: HTMLSpanElement;
  private _noticeText: HTMLDivElement;
  private _retry: HTMLButtonElement;
  private _info: IDevicesInfo | null = null;
}
