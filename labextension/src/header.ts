/**
 * The top of the panel: the title, the server's host and driver, the connection state, and
 * the one notice a person should read first (no GPU, simulated GPUs, the extension off, the
 * server unreachable with a *Retry now* button).
 */
import {
  el,
  setData,
  setHidden,
  setText,
  setTextWithOptions,
  setTitle
} from './dom';
import { nvmlWaitMessage, noGpuMessage, plainNoGpu } from './format';
import { trans } from './i18n';
import { ConnectionStatus, GpuMonitorModel } from './model';
import { IDevicesInfo } from './types';

function statusLabel(status: ConnectionStatus): [string, string] {
  switch (status) {
    case 'idle':
      return [trans.__('idle'), trans.__('Not connected yet.')];
    case 'connecting':
      return [
        trans.__('connecting…'),
        trans.__('Loading the devices and their history.')
      ];
    case 'live':
      return [
        trans.__('live'),
        trans.__('Streaming samples over a WebSocket.')
      ];
    case 'polling':
      return [
        trans.__('polling'),
        trans.__(
          'The WebSocket does not connect or stays silent (a proxy may block it): polling over HTTP instead.'
        )
      ];
    case 'reconnecting':
      return [
        trans.__('reconnecting…'),
        trans.__('The connection was lost; retrying with backoff.')
      ];
    case 'paused':
      return [
        trans.__('paused'),
        trans.__('Hidden: no connection, no updates.')
      ];
    case 'disabled':
      return [
        trans.__('off'),
        trans.__('The jupyter-gpu server extension is not enabled.')
      ];
    case 'forbidden':
      return [
        trans.__('no access'),
        trans.__('This user may not read GPU metrics.')
      ];
    case 'signed-out':
      return [trans.__('signed out'), trans.__('The login expired.')];
    case 'misconfigured':
      return [
        trans.__('misconfigured'),
        trans.__("The server's jupyter-gpu configuration is invalid.")
      ];
    case 'refused':
      return [
        trans.__('refused'),
        trans.__(
          'The server streams to as many clients as it allows: no live stream for this tab.'
        )
      ];
    case 'incompatible':
      return [
        trans.__('incompatible'),
        trans.__('The server speaks another version of the jupyter-gpu API.')
      ];
  }
}

export class PanelHeader {
  constructor(model: GpuMonitorModel, openDashboard: (() => void) | null) {
    this._model = model;
    this.node = el('div', 'jp-gpu-header');
    this._subtitle = el('span', 'jp-gpu-subtitle');
    this._status = el('span', 'jp-gpu-status');
    this._age = el('span', 'jp-gpu-age');
    setHidden(this._age, true);
    this.node.append(
      el('h2', 'jp-gpu-title', trans.__('GPUs')),
      this._status,
      this._age
    );
    if (openDashboard) {
      const button = el(
        'button',
        'jp-mod-styled jp-gpu-open-dashboard',
        trans.__('Dashboard')
      );
      button.title = trans.__(
        'Open the GPU dashboard in the main area: large charts, 5 min to 24 h'
      );
      button.addEventListener('click', openDashboard);
      this.node.append(button);
    }
    this.node.append(this._subtitle);

    this.notice = el('div', 'jp-gpu-notice');
    this.notice.setAttribute('role', 'status');
    this._noticeText = el('div', 'jp-gpu-notice-text');
    this._retry = el(
      'button',
      'jp-mod-styled jp-gpu-retry',
      trans.__('Retry now')
    );
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
    const [label, help] = statusLabel(status);
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
      setText(this._age, trans.__('data is %1 s old', Math.round(dataAgeS)));
      setTitle(
        this._age,
        trans.__(
          'No new sample for this long: the server’s GPU sampler may be stuck (see its log) or the connection stalled.'
        )
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
      info.hostname ? trans.__('on %1', info.hostname) : null,
      info.driver_version ? trans.__('driver %1', info.driver_version) : null,
      info.cuda_driver_version
        ? trans.__('CUDA %1', info.cuda_driver_version)
        : null
    ]
      .filter(Boolean)
      .join(' · ');
    setText(this._subtitle, subtitle);
    // Say what the host name is: the machine the Jupyter server (and its kernels) runs on.
    setTitle(
      this._subtitle,
      info.hostname
        ? trans.__(
            'The Jupyter server runs on the host "%1"; these GPUs are that machine\'s.\n%2',
            info.hostname,
            subtitle
          )
        : subtitle
    );
  }

  /** The one notice a person should read first, if any. */
  updateNotice(): void {
    const { status, error, info, latest } = this._model;
    let kind = '';
    let text = '';
    if (status === 'disabled') {
      kind = 'disabled';
      text = trans.__(
        'The jupyter-gpu server extension is not enabled, so there is nothing to show. Enable it with “jupyter server extension enable jupyter_gpu” and restart Jupyter.'
      );
    } else if (status === 'forbidden') {
      kind = 'error';
      text = trans.__(
        "%1 Ask the server's administrator for the jupyter_gpu:read permission.",
        error ?? ''
      );
    } else if (status === 'signed-out') {
      kind = 'error';
      text = trans.__('%1 Reload the page to log in again.', error ?? '');
    } else if (status === 'misconfigured') {
      kind = 'error';
      text = trans.__(
        "The server's GPU monitoring is off because its configuration is invalid: %1 Fix it in jupyter_server_config.py (or the command line) and restart Jupyter.",
        error ?? ''
      );
    } else if (status === 'incompatible') {
      kind = 'error';
      text = trans.__(
        '%1 Install the same jupyter-gpu version for the server and JupyterLab (pip install -U jupyter-gpu), then restart Jupyter and reload the page.',
        error ?? ''
      );
    } else if (status === 'refused') {
      kind = 'error';
      text = trans.__(
        'The server refused the live stream: %1. Close other JupyterLab tabs of this server, or ask its administrator to raise JupyterGpu.max_stream_clients. The charts show the history up to now; trying again every minute.',
        error ?? ''
      );
    } else if (status === 'reconnecting' && error) {
      kind = 'error';
      text = trans.__(
        '%1 Retrying; the charts keep their history and fill the gap on reconnect.',
        error
      );
    } else if (latest && (latest.nvml_wait_s ?? null) !== null) {
      kind = 'waiting';
      text = trans.__(
        '%1 Host metrics are still shown.',
        nvmlWaitMessage(latest)
      );
    } else if (
      info &&
      !info.gpu_available &&
      !(latest && latest.devices.length)
    ) {
      kind = 'no-gpu';
      const reason = latest?.reason ?? info.reason;
      text = trans.__(
        '%1. %2 Host metrics are still shown.',
        noGpuMessage(reason),
        plainNoGpu(reason)
      );
    } else if (info?.simulated || latest?.simulated) {
      kind = 'simulated';
      text = trans.__(
        'Simulated GPUs: synthetic numbers from the simulated backend, for demos and tests.'
      );
    }
    setHidden(this.notice, !kind);
    setData(this.notice, 'kind', kind);
    setTextWithOptions(this._noticeText, text);
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
