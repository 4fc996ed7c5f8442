/**
 * Numbers for people: the units here are the ones nvidia-smi and the JupyterLab status bar
 * use (GiB/MiB for memory, % for utilization, W, °C). `null` shows as an en dash.
 */
import type { ConnectionStatus } from './model';
import type { SampleBuffer } from './buffer';
import { trans } from './i18n';
import type { Unit } from './readings.generated';
import { IDeviceSample, IDevicesInfo, IGpuProcess, ISample } from './types';

const GiB = 2 ** 30;
const MiB = 2 ** 20;
const DASH = '–';

/** `87%`: whole numbers, as NVML measures utilization. */
export function formatPct(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) {
    return DASH;
  }
  return `${Math.round(value)}%`;
}

/** A byte count with the unit that keeps 2 to 3 digits: `31.2 GiB`, `512 MiB`, `140 GiB`. */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) {
    return DASH;
  }
  if (bytes >= GiB) {
    return `${digits(bytes / GiB)} GiB`;
  }
  if (bytes >= MiB) {
    return `${digits(bytes / MiB)} MiB`;
  }
  if (bytes >= 1024) {
    return `${digits(bytes / 1024)} KiB`;
  }
  return `${Math.round(bytes)} B`;
}

/** `31.2/140 GiB`: used and total in the total's unit. */
export function formatBytesOf(
  used: number | null | undefined,
  total: number | null | undefined
): string {
  if (
    total === null ||
    total === undefined ||
    !Number.isFinite(total) ||
    total <= 0
  ) {
    return formatBytes(used);
  }
  const unit = total >= GiB ? GiB : MiB;
  const name = unit === GiB ? 'GiB' : 'MiB';
  const usedText =
    used === null || used === undefined || !Number.isFinite(used)
      ? DASH
      : digits(used / unit);
  return `${usedText}/${digits(total / unit)} ${name}`;
}

/** `512 W`. */
export function formatWatts(watts: number | null | undefined): string {
  if (watts === null || watts === undefined || !Number.isFinite(watts)) {
    return DASH;
  }
  return `${Math.round(watts)} W`;
}

/** `54 °C`. */
export function formatCelsius(celsius: number | null | undefined): string {
  if (celsius === null || celsius === undefined || !Number.isFinite(celsius)) {
    return DASH;
  }
  return `${Math.round(celsius)} °C`;
}

/** A signed change in bytes, for trends: `+12.0 MiB`, `−3.1 GiB`, `±0`. */
export function formatBytesDelta(delta: number | null): string {
  if (delta === null || !Number.isFinite(delta)) {
    return DASH;
  }
  if (Math.abs(delta) < 1) {
    return '±0';
  }
  return `${delta > 0 ? '+' : '−'}${formatBytes(Math.abs(delta))}`;
}

/** A duration in seconds, rounded for a label: `45 s`, `5 min`, `1.5 h`. */
export function formatDuration(seconds: number): string {
  if (seconds < 90) {
    return `${Math.round(seconds)} s`;
  }
  if (seconds < 5400) {
    return `${Math.round(seconds / 60)} min`;
  }
  return `${digits(seconds / 3600)} h`;
}

/** A stale reading's age: "last read 12 s ago" (`null`: no reading within the window). */
export function ageText(ageS: number | null): string {
  return ageS === null
    ? trans.__('no reading in this window')
    : trans.__('last read %1 ago', formatDuration(ageS));
}

// The formatters, made once: `toLocaleTimeString(…, options)` builds a new one on every call,
// and that was a quarter of the dashboard's update (8 rows' hover lines every second).
let timeFormat: Intl.DateTimeFormat | null = null;
let dayFormat: Intl.DateTimeFormat | null = null;

/** `14:03:07`, or with the date when it is not today (`Nov 30 14:03`). */
export function formatClock(
  ts: number,
  now: number = Date.now() / 1000
): string {
  const date = new Date(ts * 1000);
  const today = new Date(now * 1000);
  timeFormat ??= new Intl.DateTimeFormat(undefined, {
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hour12: false
  });
  const time = timeFormat.format(date);
  if (
    date.getDate() === today.getDate() &&
    date.getMonth() === today.getMonth() &&
    date.getFullYear() === today.getFullYear()
  ) {
    return time;
  }
  dayFormat ??= new Intl.DateTimeFormat(undefined, {
    month: 'short',
    day: 'numeric'
  });
  return `${dayFormat.format(date)} ${time}`;
}

/** A notebook path as a short label: its file name without `.ipynb`. */
export function notebookLabel(path: string): string {
  const name = path.split('/').pop() ?? path;
  return name.replace(/\.ipynb$/, '');
}

/** The label of a row that stands for processes nobody here may or can name. */
export function summaryLabel(p: IGpuProcess): string {
  if (p.scope === 'unattributable') {
    // "Not attributable from inside this container: NVML lists …" -> its first clause
    return (p.reason ?? trans.__('Not attributable')).split(':')[0];
  }
  return trans.__("other users' processes");
}

/**
 * What a process is called wherever it is shown (the card's list, the table, an alert): its
 * notebook, else its kernel, else the summary a row of several stands for, else `other` (a
 * process of this user that no kernel here started).
 */
export function processLabel(p: IGpuProcess, other: string): string {
  if (p.notebook) {
    return notebookLabel(p.notebook);
  }
  if (p.kernel_id) {
    return trans.__('kernel %1', p.kernel_id.slice(0, 8));
  }
  return p.pid === null ? summaryLabel(p) : other;
}

/** One decimal under 100 (two under 1), none from 100 up: 0.51, 5.1, 12.0, 31.2, 140. */
function digits(value: number): string {
  if (value >= 100) {
    return String(Math.round(value));
  }
  if (value >= 10) {
    return value.toFixed(1);
  }
  return value.toFixed(value >= 1 ? 1 : 2);
}

/** The short line of one GPU: `87% · 31.2/140 GiB`. */
function deviceLine(device: IDeviceSample): string {
  if (device.state === 'lost') {
    return trans.__('lost');
  }
  if (device.state === 'not_responding') {
    return trans.__('not responding');
  }
  if (device.state !== 'ok') {
    return trans.__('error');
  }
  return `${formatPct(device.util_pct)} · ${formatBytesOf(
    device.mem_used_bytes,
    device.mem_total_bytes
  )}`;
}

/** What the status-bar item says, and its tooltip. */
export interface IStatusText {
  text: string;
  title: string;
}

/**
 * The status-bar summary: `GPU 0: 87% · 31.2/140 GiB` for one GPU; for several the busiest
 * GPU (a mean would hide one idle GPU of 8, or one busy one) and the summed memory,
 * `4 GPUs · GPU 2: 97% · 120/560 GiB`; the tooltip has every GPU.
 */
export function statusText(
  status: ConnectionStatus,
  info: IDevicesInfo | null,
  latest: ISample | null
): IStatusText {
  if (status === 'disabled') {
    return {
      text: trans.__('GPU: extension off'),
      title: trans.__('The jupyter-gpu server extension is not enabled.')
    };
  }
  if (
    status === 'forbidden' ||
    status === 'signed-out' ||
    status === 'misconfigured' ||
    status === 'incompatible'
  ) {
    const text = {
      forbidden: trans.__('GPU: no access'),
      'signed-out': trans.__('GPU: signed out'),
      misconfigured: trans.__('GPU: misconfigured'),
      incompatible: trans.__('GPU: version mismatch')
    }[status];
    return { text, title: trans.__('The GPU monitor says why.') };
  }
  if (!info || !latest) {
    return {
      text: trans.__('GPU …'),
      title: trans.__('Connecting to the GPU monitor…')
    };
  }
  const simulated =
    latest.simulated || info.simulated ? trans.__(' (simulated)') : '';
  const devices = latest.devices ?? [];
  if (!devices.length && (latest.nvml_wait_s ?? null) !== null) {
    return {
      text: trans.__('GPU: waiting for NVML'),
      title: trans.__(
        '%1 Open the monitor for the host metrics.',
        nvmlWaitMessage(latest)
      )
    };
  }
  if (!devices.length) {
    const reason =
      latest.reason ?? info.reason ?? trans.__('No NVIDIA GPU found');
    return {
      text: trans.__('No GPU'),
      title: trans.__(
        '%1. %2 Open the monitor for the host metrics.',
        noGpuMessage(reason),
        plainNoGpu(reason)
      )
    };
  }
  const lines = devices.map(d =>
    `${trans.__('GPU %1', d.index)} ${d.name ?? ''}: ${deviceLine(d)}`.trim()
  );
  const stale = status === 'live' || status === 'polling' ? '' : ` [${status}]`;
  const title =
    lines.join('\n') +
    (simulated ? `\n${trans.__('Simulated devices: synthetic numbers.')}` : '');
  const bad = devices.filter(d => d.state !== 'ok');
  const badText = bad.length
    ? bad.length === 1
      ? ` · ${trans.__('GPU %1', bad[0].index)} ${deviceLine(bad[0])}`
      : ` · ${trans.__('%1 GPUs failing', bad.length)}`
    : '';
  if (devices.length === 1) {
    const device = devices[0];
    return {
      text: `${trans.__('GPU %1', device.index)}: ${deviceLine(device)}${simulated}${stale}`,
      title
    };
  }
  const ok = devices.filter(d => d.state === 'ok');
  let busiest: IDeviceSample | null = null;
  for (const d of ok) {
    if (
      d.util_pct !== null &&
      (busiest === null || d.util_pct > (busiest.util_pct ?? -1))
    ) {
      busiest = d;
    }
  }
  const sum = (values: (number | null)[]) =>
    values.some(v => v === null)
      ? null
      : (values as number[]).reduce((a, b) => a + b, 0);
  const used = sum(ok.map(d => d.mem_used_bytes));
  const total = sum(ok.map(d => d.mem_total_bytes));
  const busy = busiest
    ? trans.__('busiest GPU %1: %2', busiest.index, formatPct(busiest.util_pct))
    : DASH;
  return {
    text: `${trans.__('%1 GPUs', devices.length)} · ${busy} · ${formatBytesOf(used, total)}${badText}${simulated}${stale}`,
    title
  };
}

/**
 * Why a reading is missing, for people: the server's reason (NVML's words, such as "Not
 * Supported" or "Insufficient Permissions") and what it means.
 */
export function unavailableHelp(reason: string): string {
  const lower = reason.toLowerCase();
  if (lower.startsWith('not supported')) {
    return trans.__(
      '%1: this GPU or its driver does not report it (NVML), so there is nothing to chart.',
      reason
    );
  }
  if (lower.includes('permission')) {
    return trans.__(
      '%1: the user running Jupyter may not read it (NVML).',
      reason
    );
  }
  return trans.__('%1 (NVML).', reason);
}

/**
 * What a sample says while NVML has not answered at the server's start (`nvml_wait_s`): for
 * how long, what that means, and that the GPUs come in by themselves.
 */
export function nvmlWaitMessage(sample: ISample): string {
  const seconds = Math.round(sample.nvml_wait_s ?? 0);
  const text = trans.__(
    'NVML has not answered for %1 s: its start-up (nvmlInit, counting the GPUs) has not returned on the server, so the driver is slow to start or hung. The GPUs appear here when it answers, without a restart.',
    seconds
  );
  return sample.simulated
    ? trans.__('Simulated fault (hang:init): %1', text)
    : text;
}

/** "No NVIDIA GPU found: NVML Shared Library Not Found", without saying it twice. */
export function noGpuMessage(reason: string | null): string {
  // The server's reason is NVML's English: compare with the English lead, show a translated one.
  const lead = 'No NVIDIA GPU found';
  if (!reason) {
    return trans.__('No NVIDIA GPU found');
  }
  if (reason.toLowerCase().startsWith(lead.toLowerCase())) {
    return reason;
  }
  return trans.__('No NVIDIA GPU found: %1', reason);
}

/** Where to see the monitor without a GPU (said with every "No GPU"). */
export function simulatedDemo(): string {
  return trans.__(
    'To see the monitor without a GPU, start JupyterLab with --JupyterGpu.backend=simulated (labelled, simulated GPUs).'
  );
}

/** What a no-GPU reason means in plain words. */
export function plainNoGpuReason(reason: string | null): string {
  const r = reason ?? '';
  if (r.includes('switched off')) {
    return trans.__(
      "GPU monitoring is switched off on this server (JupyterGpu.backend is 'none')."
    );
  }
  // Keys: the server's (NVML's) English reasons; the explanations are ours, translated.
  const plain: [string, () => string][] = [
    [
      'NVML Shared Library Not Found',
      () =>
        trans.__(
          'This machine has no NVIDIA driver (its library libnvidia-ml.so.1 is not installed), so there is no NVIDIA GPU to use here.'
        )
    ],
    [
      'NVIDIA driver is not loaded',
      () =>
        trans.__(
          'The NVIDIA driver is installed but not running (load the nvidia kernel module, or reboot).'
        )
    ],
    [
      'No NVIDIA GPU found',
      () =>
        trans.__('The NVIDIA driver is there but found no GPU on this machine.')
    ],
    [
      'nvidia-ml-py is not installed',
      () =>
        trans.__(
          'The nvidia-ml-py package is missing (pip install nvidia-ml-py), so the GPUs cannot be read.'
        )
    ],
    [
      'No permission to use NVML',
      () =>
        trans.__(
          'This user may not read the GPUs through the NVIDIA driver (ask the administrator).'
        )
    ]
  ];
  const found = plain.find(([key]) => r.includes(key));
  return found
    ? found[1]()
    : r
      ? trans.__('No NVIDIA GPU can be used here (%1).', r)
      : trans.__('No NVIDIA GPU can be used here.');
}

/**
 * What a no-GPU reason means in plain words, and where the simulated demo is (the same
 * sentences as `%gpu`, from jupyter_gpu/backends/reasons.py).
 */
export function plainNoGpu(reason: string | null): string {
  if ((reason ?? '').includes('switched off')) {
    return plainNoGpuReason(reason);
  }
  return `${plainNoGpuReason(reason)} ${simulatedDemo()}`;
}

/** "torch.compile cache: +12.0 MiB in 5 min", from the buffer's first and last known sizes. */
export function cacheTrend(buffer: SampleBuffer): string {
  const sizes = buffer.column('cache.size');
  // From both ends: the first and last known sizes are almost always at the ends.
  let i = 0;
  while (i < sizes.length && sizes[i] === null) {
    i++;
  }
  let j = sizes.length - 1;
  while (j > i && sizes[j] === null) {
    j--;
  }
  const first = sizes[i] ?? null;
  const last = sizes[j] ?? null;
  if (first === null || last === null) {
    return trans.__('torch.compile cache: not scanned yet');
  }
  const firstTs = buffer.ts[i];
  const lastTs = buffer.ts[j];
  const span = lastTs - firstTs;
  if (span <= 0) {
    return trans.__('torch.compile cache: %1', formatBytes(last));
  }
  return trans.__(
    'torch.compile cache: %1 in %2',
    formatBytesDelta(last - first),
    formatDuration(span)
  );
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
