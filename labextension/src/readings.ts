/**
 * A GPU's readings as the server declares them (readings.generated.ts, written from
 * jupyter_gpu/readings/catalog.py): look-ups by name and chart (format.ts says each unit).
 *
 * This module imports nothing from JupyterLab: the model and its tests use it as it is.
 */
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
