// A group of readings declared in the server's catalog reaches the sidebar and the dashboard
// through the generated table alone (readings.generated.ts): NVLink throughput, say, is kept
// in the buffer, drawn on a chart of its own, and shown on its line of a GPU's card.
import { gpuKey, SampleBuffer } from '../buffer';
import { IRenderContext } from '../cards/common';
import { DeviceCard, groupLineText } from '../cards/device';
import { Palette } from '../chart';
import { columnsSource } from '../dashboard/series';
import { freshnessOf } from '../freshness';
import { formatReading } from '../format';
import { BUFFERED, chartMetrics } from '../readings';
import { CHARTS, GROUP_HELP, GROUP_METRICS } from '../readings.generated';
import { DEFAULT_SETTINGS } from '../settings';
import { ISample } from '../types';
import { FakeElement, installFakeDom } from './fakedom';
import { makeSample } from './fakeserver';

const GIB = 2 ** 30;

/** A sample whose GPU 0 sends 2 GiB/s and receives 1 GiB/s over NVLink. */
function withNvlink(seq: number, ts: number): ISample {
  const sample = makeSample(seq, ts);
  Object.assign(sample.devices[0], {
    nvlink_tx_bytes_per_s: 2 * GIB,
    nvlink_rx_bytes_per_s: GIB,
    nvlink_age_s: 0.3
  });
  return sample;
}

describe('a group of readings from the generated table', () => {
  it('is declared with its metrics, its chart and its card line', () => {
    expect(GROUP_METRICS.nvlink).toEqual([
      'nvlink_tx_bytes_per_s',
      'nvlink_rx_bytes_per_s'
    ]);
    expect(CHARTS.map(c => c.id)).toContain('nvlink');
    expect(chartMetrics('nvlink').map(m => m.name)).toEqual(
      GROUP_METRICS.nvlink
    );
    expect(BUFFERED.map(m => m.name)).toContain('nvlink_rx_bytes_per_s');
    expect(GROUP_HELP.nvlink).toMatch(/NVLink/);
  });

  it('is kept in the buffer under the server’s names, only where a sample has it', () => {
    const buffer = new SampleBuffer(60);
    buffer.add([withNvlink(1, 100), withNvlink(2, 101)]);
    expect(buffer.column(gpuKey(0, 'nvlink_tx_bytes_per_s'))).toEqual([
      2 * GIB,
      2 * GIB
    ]);
    expect(buffer.has(gpuKey(1, 'nvlink_tx_bytes_per_s'))).toBe(false);
  });

  it('has no column where the server does not read the group (null, no age)', () => {
    const off = makeSample(1, 100);
    Object.assign(off.devices[0], {
      nvlink_tx_bytes_per_s: null, // the option off: its fields are null, with no age
      nvlink_age_s: null,
      sm_active_pct: null, // GPM read, but stale: null with its age
      gpm_age_s: 9
    });
    const buffer = new SampleBuffer(60);
    buffer.add([off]);
    expect(buffer.has(gpuKey(0, 'nvlink_tx_bytes_per_s'))).toBe(false);
    expect(buffer.has(gpuKey(0, 'sm_active_pct'))).toBe(true);
    expect(buffer.has(gpuKey(0, 'util_pct'))).toBe(true); // the tick's: every sample
  });

  it('is read from the server’s columns of the long history', () => {
    const source = columnsSource({
      interval_s: 1,
      bucket_s: 10,
      resolution_s: 10,
      ts: [100],
      series: {
        'gpu.0.nvlink_tx_bytes_per_s': { min: [1], mean: [2], max: [3] }
      }
    });
    expect(source.has(0, 'nvlink_tx_bytes_per_s')).toBe(true);
    expect(source.lines(0, 'nvlink_tx_bytes_per_s')).toEqual([[2], [1], [3]]);
    expect(source.has(0, 'nvlink_rx_bytes_per_s')).toBe(false);
  });

  it('says its values in their unit', () => {
    expect(formatReading('bytes_per_s', 2 * GIB)).toBe('2.0 GiB/s');
    expect(formatReading('bytes_per_s', null)).toBe('–');
    expect(
      groupLineText('nvlink', m =>
        m === 'nvlink_tx_bytes_per_s' ? 2 * GIB : GIB
      )
    ).toBe('NVLink tx 2.0 GiB/s · rx 1.0 GiB/s');
    expect(groupLineText('nvlink', () => null)).toBe('');
  });
});

describe('a GPU card', () => {
  let restoreDom: () => void;
  beforeEach(() => {
    restoreDom = installFakeDom();
  });
  afterEach(() => restoreDom());

  function render(sample: ISample, index: number): FakeElement {
    const buffer = new SampleBuffer(300);
    buffer.add([sample]);
    const ctx: IRenderContext = {
      buffer,
      latest: sample,
      charts: DEFAULT_SETTINGS.charts,
      xMin: sample.ts - 300,
      xMax: sample.ts,
      intervalS: 1,
      simulated: true,
      compact: false,
      markers: {
        overlapping: () => []
      } as unknown as IRenderContext['markers'],
      readings: {
        freshness: (i: number) => freshnessOf(sample.devices[i]),
        lastKnown: () => null,
        readAgeS: () => null,
        lastLive: () => null
      },
      now: sample.ts,
      onHoverTime: () => undefined
    };
    const card = new DeviceCard(index, new Palette(), null);
    card.render(sample.devices[index], ctx, false);
    return card.node as unknown as FakeElement;
  }

  it('shows the NVLink line of a GPU that has the readings, with what it means', () => {
    const node = render(withNvlink(1, 100), 0);
    const line = node
      .findAll('jp-gpu-activity')
      .find(e => e.dataset.group === 'nvlink')!;
    expect(line.textContent).toBe('NVLink tx 2.0 GiB/s · rx 1.0 GiB/s');
    expect(line.title).toBe(GROUP_HELP.nvlink);
    expect(line.hidden).toBe(false);
  });

  it('shows no NVLink line where the server sends none (the option off)', () => {
    const node = render(withNvlink(1, 100), 1);
    expect(
      node.findAll('jp-gpu-activity').filter(e => e.dataset.group === 'nvlink')
    ).toEqual([]);
  });
});
