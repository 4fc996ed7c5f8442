/**
 * The GPU monitor's model as a token, for other extensions (as jupyterlab-git provides
 * `IGitExtension`): require `IGpuMonitor` to read the devices, the samples and the cell
 * markers, and to be told when they change.
 */
import { Token } from '@lumino/coreutils';
import { ISignal } from '@lumino/signaling';
import type { Metric, SampleBuffer } from './buffer';
import type { ConnectionStatus } from './connection';
import type { IDeviceFreshness, ILastKnown, ReadingGroup } from './freshness';
import type { CellMarkers } from './markers';
import type { IDeviceSample, IDevicesInfo, ISample } from './types';

export interface IGpuMonitor {
  /** `GET devices` as last read (`null` before the first answer). */
  readonly info: IDevicesInfo | null;
  /** The newest sample. */
  readonly latest: ISample | null;
  /** The client-side history (columns aligned with `buffer.ts`). */
  readonly buffer: SampleBuffer;
  /** Cell executions seen by this JupyterLab, with their per-GPU numbers. */
  readonly markers: CellMarkers;
  readonly status: ConnectionStatus;
  /** How fresh GPU `index`'s readings are in the newest sample (stale groups, their age). */
  freshness(index: number): IDeviceFreshness;
  /** The newest reading of a GPU's metric in the buffer: a stale reading's last known value. */
  lastKnown(index: number, metric: Metric): ILastKnown | null;
  /** Seconds since a group of a GPU's readings was read (`null`: none in the window). */
  readAgeS(index: number, group: ReadingGroup): number | null;
  /** The GPU as it was in the newest sample whose fast readings were live. */
  lastLive(index: number): { device: IDeviceSample; ts: number } | null;
  /** New data or info (at most once per refresh interval). */
  readonly changed: ISignal<unknown, void>;
  /**
   * Say that a consumer of yours is visible: the monitor streams while any consumer is
   * (and pauses when none is).
   */
  setVisible(consumer: string, visible: boolean): void;
}

export const IGpuMonitor = new Token<IGpuMonitor>(
  'jupyter-gpu:IGpuMonitor',
  'The GPU monitor: device info, live samples, history and cell markers.'
);
