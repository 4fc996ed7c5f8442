/**
 * A GPU's readings as the server declares them (readings.generated.ts, written from
 * jupyter_gpu/readings/catalog.py): look-ups by name and chart, and each unit in words.
 *
 * This module imports nothing from JupyterLab: the model and its tests use it as it is.
 */
import {
  formatBytes,
  formatBytesOf,
  formatCelsius,
  formatPct,
  formatWatts
} from './format';
import { trans } from './i18n';
import {
  ChartId,
  IMetricSpec,
  METRICS,
  MetricName,
  ReadingGroup,
  TICK_GROUP,
  Unit
} from './readings.generated';

export type { ChartId, IMetricSpec, MetricName, ReadingGroup, Unit };

const BY_NAME = new Map<MetricName, IMetricSpec>(METRICS.map(m => [m.name, m]));

/** The declaration of reading `name`. */
export function metricSpec(name: MetricName): IMetricSpec {
  const spec = BY_NAME.get(name);
  if (!spec) {
    throw new Error(`no reading called ${name} in readings.generated.ts`);
  }
  return spec;
}

/** The readings the client's buffer keeps: those a chart draws, in the API's order. */
export const BUFFERED: readonly IMetricSpec[] = METRICS.filter(
  m => m.chart !== null
);

/** The readings chart `chart` draws, in order. */
export function chartMetrics(chart: ChartId): IMetricSpec[] {
  return METRICS.filter(m => m.chart === chart);
}

/** Whether the server's tick reads it: then every sample of a GPU that answers has it. */
export function everySample(spec: IMetricSpec): boolean {
  return spec.group === TICK_GROUP;
}

/** A reading's name in legends and the hover line, translated. */
export function metricLabel(name: MetricName): string {
  return trans.__(metricSpec(name).label);
}

/**
 * A value in its unit, as the hover line shows it: `87%`, `31.2/140 GiB` (memory, with the
 * GPU's total when known), `620 W`, `61 °C`, `1.2 GiB/s`; a missing value is a dash.
 */
export function formatReading(
  unit: Unit,
  value: number | null | undefined,
  totalBytes: number | null = null
): string {
  switch (unit) {
    case 'pct':
      return formatPct(value);
    case 'bytes':
      return formatBytesOf(value, totalBytes);
    case 'w':
      return formatWatts(value);
    case 'c':
      return formatCelsius(value);
    case 'bytes_per_s':
    case 'mhz':
      if (value === null || value === undefined || !Number.isFinite(value)) {
        return formatBytes(null);
      }
      return unit === 'mhz'
        ? trans.__('%1 MHz', Math.round(value))
        : trans.__('%1/s', formatBytes(value));
  }
}
