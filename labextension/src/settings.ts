/**
 * The user's settings (schema: labextension/schema/plugin.json), read with their defaults and
 * clamped to the schema's bounds so that a hand-edited value out of range still works.
 */

import { DEFAULT_ALERTS, IAlertSettings } from './alerts';

/** Which parts of the panel to show. */
export interface IChartSettings {
  utilization: boolean;
  memory: boolean;
  power: boolean;
  temperature: boolean;
  processes: boolean;
  host: boolean;
  compileCache: boolean;
}

/** Four charts per GPU, or two (compact); `auto`: compact from 5 GPUs up. */
export type CardLayout = 'auto' | 'full' | 'compact';

export interface IMonitorSettings {
  refreshIntervalMs: number;
  historyWindowS: number;
  charts: IChartSettings;
  layout: CardLayout;
  showStatusBar: boolean;
  /** Draw each cell execution as a band on the charts. */
  cellMarkers: boolean;
  alerts: IAlertSettings;
}

export const DEFAULT_SETTINGS: IMonitorSettings = {
  refreshIntervalMs: 1000,
  historyWindowS: 0,
  charts: {
    utilization: true,
    memory: true,
    power: true,
    temperature: true,
    processes: true,
    host: true,
    compileCache: true
  },
  layout: 'auto',
  showStatusBar: true,
  cellMarkers: true,
  alerts: DEFAULT_ALERTS
};

/** The sidebar's window when the setting is 0: the server's `history_s`, at most an hour. */
export function effectiveWindowS(
  settingS: number,
  serverHistoryS: number | undefined
): number {
  if (settingS > 0) {
    return settingS;
  }
  return Math.min(3600, Math.max(30, serverHistoryS ?? 300));
}

function clampInt(
  value: unknown,
  min: number,
  max: number,
  fallback: number
): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    return fallback;
  }
  return Math.round(Math.min(max, Math.max(min, value)));
}

/** Settings from the registry's composite value (anything missing takes its default). */
export function readSettings(composite: {
  [key: string]: unknown;
}): IMonitorSettings {
  const charts = { ...DEFAULT_SETTINGS.charts };
  const given = composite.charts;
  if (given && typeof given === 'object') {
    for (const key of Object.keys(charts) as (keyof IChartSettings)[]) {
      const value = (given as { [key: string]: unknown })[key];
      if (typeof value === 'boolean') {
        charts[key] = value;
      }
    }
  }
  return {
    refreshIntervalMs: clampInt(
      composite.refreshIntervalMs,
      250,
      60000,
      DEFAULT_SETTINGS.refreshIntervalMs
    ),
    historyWindowS:
      composite.historyWindowS === 0
        ? 0
        : clampInt(
            composite.historyWindowS,
            30,
            3600,
            DEFAULT_SETTINGS.historyWindowS
          ),
    charts,
    layout:
      composite.layout === 'full' || composite.layout === 'compact'
        ? composite.layout
        : 'auto',
    showStatusBar:
      typeof composite.showStatusBar === 'boolean'
        ? composite.showStatusBar
        : DEFAULT_SETTINGS.showStatusBar,
    cellMarkers:
      typeof composite.cellMarkers === 'boolean'
        ? composite.cellMarkers
        : DEFAULT_SETTINGS.cellMarkers,
    alerts: readAlerts(composite.alerts)
  };
}

function readAlerts(given: unknown): IAlertSettings {
  const a = (given && typeof given === 'object' ? given : {}) as {
    [key: string]: unknown;
  };
  const flag = (key: 'enabled' | 'gpuLost' | 'idleHolders') =>
    typeof a[key] === 'boolean' ? (a[key] as boolean) : DEFAULT_ALERTS[key];
  return {
    enabled: flag('enabled'),
    gpuLost: flag('gpuLost'),
    idleHolders: flag('idleHolders'),
    memoryPct: clampInt(a.memoryPct, 0, 100, DEFAULT_ALERTS.memoryPct),
    temperatureC: clampInt(a.temperatureC, 0, 120, DEFAULT_ALERTS.temperatureC)
  };
}
