// Stale readings (issue 19): what the model says about a GPU whose readings stopped (the
// server's `stale` groups with their ages, or `state: "not_responding"`), and what the card
// and the process table show for it: the last known values, greyed, with their age; never as
// live. A server without these fields (an older one) has nothing stale.
import { DeviceCard } from '../cards/device';
import { IRenderContext } from '../cards/common';
import { Palette } from '../chart';
import { freshnessOf, lastKnown, staleAgeS } from '../freshness';
import { GpuMonitorModel } from '../model';
import { ProcessTable } from '../proctable';
import { DEFAULT_SETTINGS } from '../settings';
import { IDeviceSample, ISample } from '../types';
import { FakeElement, installFakeDom } from './fakedom';
import { FakeServer } from './fakeserver';

/** GPU `index` of a sample. */
function gpu(sample: ISample, index: number): IDeviceSample {
  return sample.devices.find(d => d.index === index)!;
}

/** What the readings engineer's server sends for a hung GPU: past its deadline, no values. */
function notResponding(device: IDeviceSample, staleS: number): void {
  Object.assign(device, {
    state: 'not_responding',
    error: 'NVML has not answered',
    util_pct: null,
    mem_used_bytes: null,
    power_w: null,
    temperature_c: null,
    processes: null,
    stale_s: staleS
  });
}

describe('freshnessOf', () => {
  it('finds nothing stale in a sample of an older server (no age fields)', () => {
    const older = new FakeServer();
    older.tick();
    const device = gpu(older.history_[0], 0);
    for (const group of ['fast', 'gpm', 'pcie'] as const) {
      expect(freshnessOf(device)[group]).toEqual({ stale: false, ageS: null });
    }
    expect(freshnessOf(undefined).fast.stale).toBe(false);
  });

  it('reads each group from `stale` and its own age field', () => {
    const f = freshnessOf({
      index: 0,
      state: 'ok',
      read_age_s: 0.3,
      gpm_age_s: 9.5,
      pcie_age_s: 2,
      stale: ['gpm']
    } as IDeviceSample);
    expect(f.fast).toEqual({ stale: false, ageS: 0.3 });
    expect(f.gpm).toEqual({ stale: true, ageS: 9.5 });
    expect(f.pcie).toEqual({ stale: false, ageS: 2 });
  });

  it('takes every group of a GPU that is not responding as stale, as old as stale_s', () => {
    const f = freshnessOf({
      index: 1,
      state: 'not_responding',
      stale_s: 12
    } as IDeviceSample);
    expect(f.fast).toEqual({ stale: true, ageS: 12 });
    expect(f.gpm).toEqual({ stale: true, ageS: 12 });
  });

  it('finds the last known value and, without the server’s age, ages it from there', () => {
    const ts = [10, 11, 12, 13];
    expect(lastKnown(ts, [5, 6, null, null])).toEqual({ value: 6, ts: 11 });
    expect(lastKnown(ts, [null, null, null, null])).toBeNull();
    const stale = { stale: true, ageS: null };
    expect(staleAgeS(stale, [{ value: 6, ts: 11 }, null], 13)).toBe(2);
    expect(staleAgeS(stale, [null], 13)).toBeNull();
    expect(
      staleAgeS({ stale: true, ageS: 7 }, [{ value: 6, ts: 11 }], 13)
    ).toBe(7);
    // No value known (never answered, or older than the window): no age to give.
    expect(staleAgeS({ stale: true, ageS: 7 }, [null], 13)).toBeNull();
  });
});

describe('a GPU whose readings go stale', () => {
  let server: FakeServer;
  let model: GpuMonitorModel;
  let restoreDom: () => void;

  beforeEach(() => {
    jest.useFakeTimers({ now: 1_700_000_000_000 });
    restoreDom = installFakeDom();
    server = new FakeServer();
    server.tick(30); // GPU 1 answers for 30 s
    // ... then hangs: 12 more samples "not responding", counting up.
    let hungFor = 0;
    server.shape = sample => notResponding(gpu(sample, 1), ++hungFor);
    server.tick(12);
    model = new GpuMonitorModel({
      transport: server,
      watchPageVisibility: false
    });
  });

  afterEach(() => {
    model.dispose();
    restoreDom();
    jest.useRealTimers();
  });

  async function connect(): Promise<void> {
    model.setVisible('panel', true);
    await jest.advanceTimersByTimeAsync(20);
  }

  /** A render context over the model, as the panel builds it. */
  function context(): IRenderContext {
    const latest = model.latest!;
    return {
      buffer: model.buffer,
      latest,
      charts: DEFAULT_SETTINGS.charts,
      xMin: latest.ts - 300,
      xMax: latest.ts,
      intervalS: 1,
      simulated: true,
      compact: false,
      markers: model.markers,
      readings: model,
      now: latest.ts,
      onHoverTime: () => undefined
    };
  }

  /** GPU `index`'s card, rendered without drawing its charts (no canvas here). */
  function card(index: number): FakeElement {
    const c = new DeviceCard(index, new Palette(), null);
    c.setInfo(model.info!.devices[index]);
    c.render(gpu(model.latest!, index), context(), false);
    return c.node as unknown as FakeElement;
  }

  /** The value of a card's tile, and whether it is greyed as stale. */
  function tile(node: FakeElement, metric: string) {
    const t = node
      .findAll('jp-gpu-tile')
      .find(e => e.dataset.metric === metric)!;
    return {
      value: t.find('jp-gpu-tile-value').textContent,
      stale: t.classList.contains('jp-gpu-mod-stale')
    };
  }

  it('the model: stale with its age, the last known values from its buffer', async () => {
    await connect();
    const lastOk = server.history_[29];
    expect(model.freshness(1).fast).toEqual({ stale: true, ageS: 12 });
    expect(model.freshness(0).fast.stale).toBe(false);
    expect(model.lastKnown(1, 'util_pct')).toEqual({
      value: gpu(lastOk, 1).util_pct,
      ts: lastOk.ts
    });
    expect(model.readAgeS(1, 'fast')).toBe(12);
    expect(model.lastLive(1)?.ts).toBe(lastOk.ts);
  });

  it('the card: last known values greyed, "last read 12 s ago"; the other GPU live', async () => {
    await connect();
    const lastOk = gpu(server.history_[29], 1);
    const hung = card(1);
    expect(tile(hung, 'util')).toEqual({
      value: `${lastOk.util_pct}%`,
      stale: true
    });
    expect(tile(hung, 'power')).toEqual({
      value: `${lastOk.power_w} W`,
      stale: true
    });
    const age = hung.find('jp-gpu-card-age');
    expect(age.hidden).toBe(false);
    expect(age.textContent).toBe('last read 12 s ago');
    // Its state is still said as before.
    expect(hung.find('jp-gpu-card-message').textContent).toMatch(
      /^GPU 1 not responding for 12 s/
    );

    const live = card(0);
    expect(tile(live, 'util').stale).toBe(false);
    expect(tile(live, 'util').value).toBe(`${gpu(model.latest!, 0).util_pct}%`);
    expect(live.find('jp-gpu-card-age').hidden).toBe(true);
  });

  it('a stale GPM group (the server says so): its last values greyed with their age', async () => {
    server.shape = sample => {
      const d = gpu(sample, 0);
      Object.assign(d, {
        read_age_s: 0.2,
        gpm_age_s: 8,
        stale: ['gpm'],
        sm_active_pct: null,
        tensor_active_pct: null,
        dram_bw_pct: null
      });
    };
    // Before: GPM readings that were live.
    server.history_.forEach(s =>
      Object.assign(gpu(s, 0), {
        sm_active_pct: 40,
        tensor_active_pct: 30,
        dram_bw_pct: 20
      })
    );
    server.tick(3);
    await connect();
    expect(model.freshness(0).gpm).toEqual({ stale: true, ageS: 8 });
    expect(model.freshness(0).fast.stale).toBe(false);
    const node = card(0);
    const activity = node.find('jp-gpu-activity');
    expect(activity.textContent).toBe(
      'SM active 40% · tensor 30% · DRAM 20% · last read 8 s ago'
    );
    expect(activity.classList.contains('jp-gpu-mod-stale')).toBe(true);
    // The fast readings are live: shown as such.
    expect(tile(node, 'util').stale).toBe(false);
    expect(node.find('jp-gpu-card-age').hidden).toBe(true);
  });

  it('the process table lists what a stale GPU last reported, greyed', async () => {
    server.history_[29].devices[1].processes = [
      {
        pid: 4242,
        name: 'python',
        used_mem_bytes: 5e9,
        kernel_id: 'k1',
        notebook: 'train.ipynb'
      }
    ];
    await connect();
    const table = new ProcessTable({});
    table.update(model.latest, model);
    const rows = (table.node as unknown as FakeElement).findAll(
      'jp-gpu-proc-row'
    );
    expect(rows.map(r => r.dataset.pid)).toEqual(['4242']);
    expect(rows[0].classList.contains('jp-gpu-mod-stale')).toBe(true);
    // Without the model (no staleness known): the newest sample's, which has none.
    const plain = new ProcessTable({});
    plain.update(model.latest);
    expect(
      (plain.node as unknown as FakeElement).findAll('jp-gpu-proc-row')
    ).toHaveLength(0);
  });
});
