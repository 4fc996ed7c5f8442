/**
 * What a view knows of one GPU itself, apart from its readings: its index, its name (with its
 * UUID and PCI bus id in the tooltip), its memory total and power limit (the tops of the
 * memory and power charts), whether it is simulated, and the state the server gives it (lost,
 * not responding, every read failed, no longer reported) with the sentence that says so. The
 * sidebar's card and the dashboard's row each hold one, so the two say the same of a GPU.
 */
import { el, setHidden, setText } from './dom';
import { trans } from './i18n';
import { IDeviceInfo, IDeviceSample } from './types';

/** The server's state of a GPU, or `missing`: the server no longer reports it. */
export type GpuState = IDeviceSample['state'] | 'missing';

/** How a view heads a GPU: the index's element and class, the name's class. */
export interface IIdentityLook {
  indexTag: 'span' | 'h3';
  indexClass: string;
  nameClass: string;
}

export class GpuIdentity {
  constructor(
    readonly index: number,
    look: IIdentityLook
  ) {
    this.indexNode = el(
      look.indexTag,
      look.indexClass,
      trans.__('GPU %1', index)
    );
    this.nameNode = el('span', look.nameClass);
    this.badgeNode = el('span', 'jp-gpu-badge', trans.__('simulated'));
    this.badgeNode.title = trans.__(
      'A simulated device (backend=simulated): the numbers are synthetic.'
    );
    // Shown once a sample or the devices' list says the backend is simulated.
    this.badgeNode.hidden = true;
  }

  /** "GPU 0". */
  readonly indexNode: HTMLElement;
  /** The GPU's name; its tooltip has the name, UUID and PCI bus id, one a line. */
  readonly nameNode: HTMLSpanElement;
  /** "simulated", shown only for the simulated backend. */
  readonly badgeNode: HTMLSpanElement;

  /** The GPU's memory in bytes, as last reported (`null`: not known yet). */
  get memTotalBytes(): number | null {
    return this._memTotalBytes;
  }

  /** The GPU's power limit in watts, as last reported (`null`: not known yet). */
  get powerLimitW(): number | null {
    return this._powerLimitW;
  }

  /** The state of the last sample given (`missing` before any, or once it had no GPU). */
  get state(): GpuState {
    return this._device?.state ?? 'missing';
  }

  /**
   * Show the static facts from `GET devices` (`undefined`: not listed; nothing changes). A
   * total or limit the list does not give keeps the one known.
   */
  setInfo(info: IDeviceInfo | undefined): void {
    if (info) {
      setText(this.nameNode, info.name ?? '');
      this.nameNode.title = [info.name, info.uuid, info.pci_bus_id]
        .filter(Boolean)
        .join('\n');
      this._memTotalBytes = info.mem_total_bytes ?? this._memTotalBytes;
      this._powerLimitW = info.power_limit_w ?? this._powerLimitW;
    }
  }

  /**
   * Take what a sample says of the GPU: its state, and its name, memory total and power limit
   * where it gives them (`undefined`: the server stopped reporting the GPU).
   */
  setSample(device: IDeviceSample | undefined): void {
    this._device = device;
    if (device) {
      this._memTotalBytes = device.mem_total_bytes ?? this._memTotalBytes;
      this._powerLimitW = device.power_limit_w ?? this._powerLimitW;
      if (device.name) {
        setText(this.nameNode, device.name);
      }
    }
  }

  /** Show the "simulated" badge or not. */
  setSimulated(simulated: boolean): void {
    setHidden(this.badgeNode, !simulated);
  }

  /** The sentence for a GPU that is not `ok` in the last sample given, or '' for one that is. */
  stateMessage(): string {
    const device = this._device;
    const state = this.state;
    const index = this.index;
    if (state === 'ok') {
      return '';
    }
    const detail = device?.error ? `: ${device.error}` : '';
    if (state === 'lost') {
      return trans.__('GPU %1 is lost%2', index, detail);
    }
    if (state === 'not_responding') {
      const stale = Math.round(device?.stale_s ?? 0);
      return trans.__('GPU %1 not responding for %2 s%3', index, stale, detail);
    }
    if (state === 'missing') {
      return trans.__('GPU %1 is no longer reported by the server.', index);
    }
    return trans.__(
      'GPU %1: %2',
      index,
      device?.error ?? trans.__('every read failed')
    );
  }

  private _device: IDeviceSample | undefined = undefined;
  private _memTotalBytes: number | null = null;
  private _powerLimitW: number | null = null;
}
