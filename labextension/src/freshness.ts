/**
 * How old a GPU's readings are, and what to show for a stale one: its last known value,
 * greyed, with its age; never as live.
 *
 * The server reads groups of fields at their own intervals (readings.generated.ts, from its
 * catalog) and says, per device and sample (docs/api.md), how old each group is: `read_age_s`
 * (the fast readings: utilization, memory, power, temperature, clocks, processes), `gpm_age_s`
 * (NVML GPM: SM active and occupancy, tensor active, DRAM bandwidth), `pcie_age_s` (PCIe
 * throughput)…; `stale` lists the groups older than two of their own intervals, whose fields
 * are then `null`. A GPU whose read is past its deadline is `state: "not_responding"`, every
 * group stale, `stale_s` its age. A server that sends none of these fields (an older one) has
 * nothing stale.
 *
 * This module imports nothing from JupyterLab: the model and its tests use it as it is.
 */
import { Column } from './buffer';
import {
  AGE_FIELDS,
  GROUP_METRICS,
  READING_GROUPS,
  ReadingGroup
} from './readings.generated';
import { IDeviceSample } from './types';

export { GROUP_METRICS, READING_GROUPS };
export type { ReadingGroup };

/** One group's freshness in one sample. */
export interface IGroupFreshness {
  /** Not live: older than two of its intervals, or the GPU is not responding. */
  stale: boolean;
  /** Seconds since the group was read, at the sample's time; `null` when nobody says. */
  ageS: number | null;
}

export type IDeviceFreshness = { [group in ReadingGroup]: IGroupFreshness };

function numberOr(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** How fresh each group of `device`'s readings is in its sample. */
export function freshnessOf(
  device: IDeviceSample | undefined
): IDeviceFreshness {
  const result = {} as IDeviceFreshness;
  const notResponding = device?.state === 'not_responding';
  const stale = Array.isArray(device?.stale) ? device.stale : [];
  for (const group of READING_GROUPS) {
    const age = numberOr(device?.[AGE_FIELDS[group]]);
    result[group] = notResponding
      ? // Past its deadline, every group is as old as the GPU's last answer at least.
        { stale: true, ageS: maxOf(age, numberOr(device?.stale_s)) }
      : { stale: stale.includes(group), ageS: age };
  }
  return result;
}

function maxOf(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.max(a, b);
}

/** The newest reading in a column, and when it was taken. */
export interface ILastKnown {
  value: number;
  ts: number;
}

/** The newest non-null value of `column` (aligned with `ts`), or `null` when it has none. */
export function lastKnown(
  ts: readonly number[],
  column: Column
): ILastKnown | null {
  for (let i = Math.min(ts.length, column.length) - 1; i >= 0; i--) {
    const value = column[i];
    if (value !== null) {
      return { value, ts: ts[i] };
    }
  }
  return null;
}

/**
 * The age to show for a stale group whose last known values are `known`: the server's, else
 * the time since the newest of them (`now`: the newest sample's time). `null` when none of
 * them is known: there is no value to give an age to (a GPU that never answered, or whose last
 * answer is older than the window; the server's `stale_s` cannot tell these apart).
 */
export function staleAgeS(
  freshness: IGroupFreshness,
  known: readonly (ILastKnown | null)[],
  now: number
): number | null {
  let newest: number | null = null;
  for (const k of known) {
    if (k && (newest === null || k.ts > newest)) {
      newest = k.ts;
    }
  }
  if (newest === null) {
    return null;
  }
  return freshness.ageS ?? Math.max(0, now - newest);
}
