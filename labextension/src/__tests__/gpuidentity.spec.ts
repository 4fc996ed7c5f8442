// One view of a GPU (issue 35): the sidebar's card and the dashboard's row hold one
// GpuIdentity, so they name a GPU, label it simulated, know its memory total and power limit,
// and say why it is not ok the same way.
import { DeviceCard } from '../cards/device';
import { Palette } from '../chart';
import { IRowContext, GpuRow } from '../dashboard/row';
import { GpuIdentity } from '../gpuidentity';
import { IDeviceInfo, IDeviceSample } from '../types';
import { FakeElement, installFakeDom } from './fakedom';

const GIB = 2 ** 30;

const INFO: IDeviceInfo = {
  index: 1,
  uuid: 'GPU-1234',
  name: 'NVIDIA H200',
  mem_total_bytes: 141 * GIB,
  power_limit_w: 700,
  pci_bus_id: '00000000:1B:00.0'
};

/** GPU 1 in a sample, in `state`, with what else is given. */
function sample(
  state: string,
  more: Partial<IDeviceSample> = {}
): IDeviceSample {
  return {
    index: 1,
    uuid: 'GPU-1234',
    name: null,
    state,
    error: null,
    ...more
  } as IDeviceSample;
}

/** The card's and the row's identity, made as each view makes it. */
const VIEWS: [string, (index: number) => DeviceCard | GpuRow][] = [
  ['the card', index => new DeviceCard(index, new Palette(), null)],
  // The row's constructor and setInfo use none of its context (it is for drawing).
  ['the row', index => new GpuRow(index, {} as IRowContext)]
];

let removeDom: () => void;
beforeEach(() => {
  removeDom = installFakeDom();
});
afterEach(() => removeDom());

describe('GpuIdentity', () => {
  const look = {
    indexTag: 'span',
    indexClass: 'idx',
    nameClass: 'name'
  } as const;

  it('names the GPU, with its UUID and bus id in the tooltip', () => {
    const gpu = new GpuIdentity(1, look);
    expect((gpu.indexNode as unknown as FakeElement).textContent).toBe('GPU 1');
    gpu.setInfo(INFO);
    expect(gpu.nameNode.textContent).toBe('NVIDIA H200');
    expect(gpu.nameNode.title).toBe('NVIDIA H200\nGPU-1234\n00000000:1B:00.0');
    expect(gpu.memTotalBytes).toBe(141 * GIB);
    expect(gpu.powerLimitW).toBe(700);
  });

  it('keeps the totals a later list or sample leaves out, and a list it is not in', () => {
    const gpu = new GpuIdentity(1, look);
    gpu.setInfo(INFO);
    gpu.setInfo({ ...INFO, mem_total_bytes: null, power_limit_w: null });
    gpu.setInfo(undefined);
    gpu.setSample(sample('ok', { mem_total_bytes: null }));
    expect(gpu.memTotalBytes).toBe(141 * GIB);
    expect(gpu.powerLimitW).toBe(700);
    expect(gpu.nameNode.textContent).toBe('NVIDIA H200');
    gpu.setSample(
      sample('ok', { name: 'NVIDIA H100', mem_total_bytes: 80 * GIB })
    );
    expect(gpu.nameNode.textContent).toBe('NVIDIA H100');
    expect(gpu.memTotalBytes).toBe(80 * GIB);
  });

  it('says why a GPU is not ok, and nothing when it is', () => {
    const gpu = new GpuIdentity(1, look);
    expect(gpu.state).toBe('missing');
    gpu.setSample(sample('ok'));
    expect([gpu.state, gpu.stateMessage()]).toEqual(['ok', '']);
    gpu.setSample(sample('lost', { error: 'GPU is lost' }));
    expect(gpu.stateMessage()).toBe('GPU 1 is lost: GPU is lost');
    gpu.setSample(sample('not_responding', { stale_s: 12.4 }));
    expect(gpu.stateMessage()).toBe('GPU 1 not responding for 12 s');
    gpu.setSample(sample('error'));
    expect(gpu.stateMessage()).toBe('GPU 1: every read failed');
    gpu.setSample(undefined);
    expect([gpu.state, gpu.stateMessage()]).toEqual([
      'missing',
      'GPU 1 is no longer reported by the server.'
    ]);
  });

  it('labels a simulated GPU only when told', () => {
    const gpu = new GpuIdentity(1, look);
    expect(gpu.badgeNode.hidden).toBe(true);
    gpu.setSimulated(true);
    expect(gpu.badgeNode.hidden).toBe(false);
    expect(gpu.badgeNode.title).toMatch(/synthetic/);
  });
});

describe.each(VIEWS)('%s', (_name, make) => {
  it('shows the GPU through its identity: index, name, tooltip, badge', () => {
    const view = make(1);
    view.identity.setInfo(INFO);
    const head = (view.node as unknown as FakeElement)
      .children[0] as FakeElement;
    expect(head.children.slice(0, 3)).toEqual([
      view.identity.indexNode,
      view.identity.nameNode,
      view.identity.badgeNode
    ]);
    expect(head.textContent).toMatch(/^GPU 1NVIDIA H200simulated/);
    expect(view.identity.nameNode.title).toBe(
      'NVIDIA H200\nGPU-1234\n00000000:1B:00.0'
    );
  });

  it('passes the devices’ list to its identity', () => {
    const view = make(1);
    view.setInfo(INFO);
    expect(view.identity.memTotalBytes).toBe(141 * GIB);
    expect(view.identity.powerLimitW).toBe(700);
  });
});
