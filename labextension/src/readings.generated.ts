// Generated from jupyter_gpu/readings/catalog.py: do not edit. Regenerate it with
// `jlpm generate:readings` (python -m jupyter_gpu.readings.typescript --write);
// tests/unit/test_readings_catalog.py fails while it is stale.

/** A group of readings, read on a cadence of its own. */
export type ReadingGroup = 'fast' | 'gpm' | 'pcie' | 'nvlink';

/** A reading of a GPU: its one name, in the API too. */
export type MetricName =
  | 'util_pct'
  | 'mem_util_pct'
  | 'mem_used_bytes'
  | 'mem_total_bytes'
  | 'power_w'
  | 'power_limit_w'
  | 'temperature_c'
  | 'sm_clock_mhz'
  | 'pcie_tx_bytes_per_s'
  | 'pcie_rx_bytes_per_s'
  | 'sm_active_pct'
  | 'sm_occupancy_pct'
  | 'tensor_active_pct'
  | 'dram_bw_pct'
  | 'nvlink_tx_bytes_per_s'
  | 'nvlink_rx_bytes_per_s';

/** A group's age field in the API. */
export type AgeField =
  'read_age_s' | 'gpm_age_s' | 'pcie_age_s' | 'nvlink_age_s';

/** A chart of the dashboard's rows. */
export type ChartId = 'util' | 'mem' | 'power' | 'temp' | 'nvlink';

/** The unit a reading's name ends in. */
export type Unit = 'pct' | 'bytes_per_s' | 'bytes' | 'mhz' | 'w' | 'c';

/**
 * A GPU's readings and its groups' ages, in a sample (null: not read). The tick's
 * readings are in every sample; the others and the ages may be absent (older servers).
 */
export interface IDeviceReadings {
  util_pct: number | null;
  mem_util_pct: number | null;
  mem_used_bytes: number | null;
  mem_total_bytes: number | null;
  power_w: number | null;
  power_limit_w: number | null;
  temperature_c: number | null;
  sm_clock_mhz: number | null;
  pcie_tx_bytes_per_s?: number | null;
  pcie_rx_bytes_per_s?: number | null;
  sm_active_pct?: number | null;
  sm_occupancy_pct?: number | null;
  tensor_active_pct?: number | null;
  dram_bw_pct?: number | null;
  nvlink_tx_bytes_per_s?: number | null;
  nvlink_rx_bytes_per_s?: number | null;
  read_age_s?: number | null;
  gpm_age_s?: number | null;
  pcie_age_s?: number | null;
  nvlink_age_s?: number | null;
}

/** One reading: how the browser shows it. */
export interface IMetricSpec {
  /** Its field in the API: the one name on the server and here. */
  readonly name: MetricName;
  readonly group: ReadingGroup;
  readonly unit: Unit;
  /** The dashboard chart that draws it (kept in the client's buffer then), or null. */
  readonly chart: ChartId | null;
  /** Its name in a chart's legend and the hover line. */
  readonly label: string;
  /** Its name on its group's line of a GPU's card, or null (not on it). */
  readonly cardLabel: string | null;
}

/** Every reading, in the API's order. */
export const METRICS: readonly IMetricSpec[] = [
  {
    name: 'util_pct',
    group: 'fast',
    unit: 'pct',
    chart: 'util',
    label: 'Util',
    cardLabel: null
  },
  {
    name: 'mem_util_pct',
    group: 'fast',
    unit: 'pct',
    chart: null,
    label: '',
    cardLabel: null
  },
  {
    name: 'mem_used_bytes',
    group: 'fast',
    unit: 'bytes',
    chart: 'mem',
    label: 'Mem',
    cardLabel: null
  },
  {
    name: 'mem_total_bytes',
    group: 'fast',
    unit: 'bytes',
    chart: null,
    label: '',
    cardLabel: null
  },
  {
    name: 'power_w',
    group: 'fast',
    unit: 'w',
    chart: 'power',
    label: 'Power',
    cardLabel: null
  },
  {
    name: 'power_limit_w',
    group: 'fast',
    unit: 'w',
    chart: null,
    label: '',
    cardLabel: null
  },
  {
    name: 'temperature_c',
    group: 'fast',
    unit: 'c',
    chart: 'temp',
    label: 'Temp',
    cardLabel: null
  },
  {
    name: 'sm_clock_mhz',
    group: 'fast',
    unit: 'mhz',
    chart: null,
    label: '',
    cardLabel: null
  },
  {
    name: 'pcie_tx_bytes_per_s',
    group: 'pcie',
    unit: 'bytes_per_s',
    chart: null,
    label: '',
    cardLabel: null
  },
  {
    name: 'pcie_rx_bytes_per_s',
    group: 'pcie',
    unit: 'bytes_per_s',
    chart: null,
    label: '',
    cardLabel: null
  },
  {
    name: 'sm_active_pct',
    group: 'gpm',
    unit: 'pct',
    chart: 'util',
    label: 'SM active',
    cardLabel: 'SM active'
  },
  {
    name: 'sm_occupancy_pct',
    group: 'gpm',
    unit: 'pct',
    chart: 'util',
    label: 'SM occupancy',
    cardLabel: null
  },
  {
    name: 'tensor_active_pct',
    group: 'gpm',
    unit: 'pct',
    chart: 'util',
    label: 'Tensor active',
    cardLabel: 'tensor'
  },
  {
    name: 'dram_bw_pct',
    group: 'gpm',
    unit: 'pct',
    chart: 'util',
    label: 'DRAM bw',
    cardLabel: 'DRAM'
  },
  {
    name: 'nvlink_tx_bytes_per_s',
    group: 'nvlink',
    unit: 'bytes_per_s',
    chart: 'nvlink',
    label: 'NVLink tx',
    cardLabel: 'NVLink tx'
  },
  {
    name: 'nvlink_rx_bytes_per_s',
    group: 'nvlink',
    unit: 'bytes_per_s',
    chart: 'nvlink',
    label: 'NVLink rx',
    cardLabel: 'rx'
  }
];

/** The groups, in the API's order. */
export const READING_GROUPS: readonly ReadingGroup[] = [
  'fast',
  'gpm',
  'pcie',
  'nvlink'
];

/** The group the server's tick reads: its processes and the GPU's state come with it. */
export const TICK_GROUP: ReadingGroup = 'fast';

/** Each group's readings. */
export const GROUP_METRICS: {
  readonly [group in ReadingGroup]: readonly MetricName[];
} = {
  fast: [
    'util_pct',
    'mem_util_pct',
    'mem_used_bytes',
    'mem_total_bytes',
    'power_w',
    'power_limit_w',
    'temperature_c',
    'sm_clock_mhz'
  ],
  gpm: [
    'sm_active_pct',
    'sm_occupancy_pct',
    'tensor_active_pct',
    'dram_bw_pct'
  ],
  pcie: ['pcie_tx_bytes_per_s', 'pcie_rx_bytes_per_s'],
  nvlink: ['nvlink_tx_bytes_per_s', 'nvlink_rx_bytes_per_s']
};

/** Each group's age field. */
export const AGE_FIELDS: { readonly [group in ReadingGroup]: AgeField } = {
  fast: 'read_age_s',
  gpm: 'gpm_age_s',
  pcie: 'pcie_age_s',
  nvlink: 'nvlink_age_s'
};

/** What each group's line on a GPU's card means (its tooltip; '' for none). */
export const GROUP_HELP: { readonly [group in ReadingGroup]: string } = {
  fast: '',
  gpm: 'NVML GPM (Hopper and newer): the share of SMs busy, of time on tensor cores, and of DRAM bandwidth. Utilization only says that a kernel ran.',
  pcie: '',
  nvlink:
    'NVLink data throughput (NVML field values, all links summed): what this GPU sent to and received from its peers over NVLink, per second, protocol overhead excluded.'
};

/** A chart of a dashboard row. */
export interface IChartSpec {
  readonly id: ChartId;
  readonly title: string;
}

/** The charts of a dashboard row, in order. */
export const CHARTS: readonly IChartSpec[] = [
  { id: 'util', title: 'Utilization (%)' },
  { id: 'mem', title: 'Memory used' },
  { id: 'power', title: 'Power (W)' },
  { id: 'temp', title: 'Temperature (°C)' },
  { id: 'nvlink', title: 'NVLink (bytes/s)' }
];
