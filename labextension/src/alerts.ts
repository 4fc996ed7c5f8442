/**
 * Alerts: a GPU lost (or not responding), memory or temperature above a threshold, a kernel
 * holding GPU memory while idle. Each is said once when it starts, not on every sample; it is
 * said again only after it has cleared (memory and temperature clear a margin below their
 * threshold, so a value wobbling around it does not repeat the alert). index.ts shows them
 * through JupyterLab's notifications. Pure: no DOM, no JupyterLab.
 */
import { formatBytes, formatCelsius, formatPct, processLabel } from './format';
import { trans } from './i18n';
import { ISample } from './types';

export interface IAlertSettings {
  /** Say anything at all. */
  enabled: boolean;
  /** A GPU lost, failing or not responding. */
  gpuLost: boolean;
  /** Memory used above this % of the total (0: never). */
  memoryPct: number;
  /** Temperature above this (°C; 0: never). */
  temperatureC: number;
  /** Kernels the server flags as idle while holding GPU memory. */
  idleHolders: boolean;
}

export const DEFAULT_ALERTS: IAlertSettings = {
  enabled: true,
  gpuLost: true,
  memoryPct: 95,
  temperatureC: 85,
  idleHolders: true
};

/** How far below its threshold a value must fall before the alert can be said again. */
export const MEMORY_CLEAR_MARGIN_PCT = 5;
export const TEMPERATURE_CLEAR_MARGIN_C = 5;

export interface IAlert {
  /** What the event is (one per GPU and kind, or per idle kernel). */
  key: string;
  level: 'error' | 'warning';
  message: string;
}

export class AlertTracker {
  /** The alerts that start with this sample (empty on most samples). */
  check(sample: ISample, settings: IAlertSettings): IAlert[] {
    const out: IAlert[] = [];
    if (!settings.enabled) {
      this._active.clear();
      return out;
    }
    const now = new Set<string>();
    // An event counts as still on while its value sits between the clear level and the
    // threshold: it was on before and has not cleared.
    const hold = (key: string) => {
      if (this._active.has(key)) {
        now.add(key);
      }
    };
    const raise = (key: string, level: IAlert['level'], message: string) => {
      now.add(key);
      if (!this._active.has(key)) {
        out.push({ key, level, message });
      }
    };
    for (const d of sample.devices ?? []) {
      const gpu = trans.__('GPU %1', d.index);
      if (d.state !== 'ok') {
        if (settings.gpuLost) {
          const what =
            d.state === 'lost'
              ? trans.__('%1 is lost', gpu)
              : d.state === 'not_responding'
                ? trans.__('%1 is not responding', gpu)
                : trans.__('%1 is failing', gpu);
          raise(
            `state:${d.index}`,
            'error',
            d.error ? `${what}: ${d.error}` : `${what}.`
          );
        }
        continue;
      }
      const total = d.mem_total_bytes;
      if (
        settings.memoryPct > 0 &&
        d.mem_used_bytes !== null &&
        total !== null &&
        total > 0
      ) {
        const pct = (100 * d.mem_used_bytes) / total;
        const key = `mem:${d.index}`;
        if (pct >= settings.memoryPct) {
          raise(
            key,
            'warning',
            trans.__(
              '%1 memory is %2 full (%3 of %4), above the alert threshold of %5.',
              gpu,
              formatPct(pct),
              formatBytes(d.mem_used_bytes),
              formatBytes(total),
              formatPct(settings.memoryPct)
            )
          );
        } else if (pct > settings.memoryPct - MEMORY_CLEAR_MARGIN_PCT) {
          hold(key);
        }
      }
      if (settings.temperatureC > 0 && d.temperature_c !== null) {
        const key = `temp:${d.index}`;
        if (d.temperature_c >= settings.temperatureC) {
          raise(
            key,
            'warning',
            trans.__(
              '%1 is at %2, above the alert threshold of %3.',
              gpu,
              formatCelsius(d.temperature_c),
              formatCelsius(settings.temperatureC)
            )
          );
        } else if (
          d.temperature_c >
          settings.temperatureC - TEMPERATURE_CLEAR_MARGIN_C
        ) {
          hold(key);
        }
      }
      if (settings.idleHolders) {
        for (const p of d.processes ?? []) {
          if (!p.idle_holder) {
            continue;
          }
          const who = processLabel(p, trans.__('pid %1', p.pid ?? '?'));
          const idle =
            typeof p.idle_s === 'number'
              ? trans.__(' for %1 min', Math.round(p.idle_s / 60))
              : '';
          raise(
            `idle:${p.kernel_id ?? p.pid}:${d.index}`,
            'warning',
            trans.__(
              '%1 has been idle%2 while holding %3 on %4. Shut its kernel down to free it.',
              who,
              idle,
              formatBytes(p.used_mem_bytes),
              gpu
            )
          );
        }
      }
    }
    this._active = now;
    return out;
  }

  private _active = new Set<string>();
}
