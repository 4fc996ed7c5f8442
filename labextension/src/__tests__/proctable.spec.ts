// The kernel actions themselves are covered by ui-tests/tests/data.spec.ts; the rows here run
// on the fake DOM.
import { idleText, processRows, ProcessTable } from '../proctable';
import { ISample } from '../types';
import { FakeElement, installFakeDom } from './fakedom';
import { makeSample } from './fakeserver';

function sample(simulated = false): ISample {
  const proc = (pid: number, bytes: number, extra: object = {}) => ({
    pid,
    name: 'python',
    used_mem_bytes: bytes,
    kernel_id: null,
    notebook: null,
    ...extra
  });
  const s = { ...makeSample(1, 1000), simulated };
  s.devices[0].processes = [proc(11, 1e9)];
  s.devices[1].processes = [
    proc(22, 5e9, {
      kernel_id: 'k22',
      notebook: 'a/train.ipynb',
      idle_s: 1200,
      idle_holder: true
    })
  ];
  return s;
}

describe('ProcessTable', () => {
  it('lists every process of every GPU, biggest first', () => {
    expect(processRows(sample()).map(r => [r.gpu, r.process.pid])).toEqual([
      [1, 22],
      [0, 11]
    ]);
  });

  it('says idle time, busy, or nothing for other processes', () => {
    const [holder, other] = processRows(sample()).map(r => r.process);
    expect(idleText(holder)).toBe('idle 20 min');
    expect(idleText({ ...holder, idle_s: 0 })).toBe('busy');
    expect(idleText(other)).toBe('');
  });
});

describe('ProcessTable', () => {
  let restore: () => void;
  beforeEach(() => (restore = installFakeDom()));
  afterEach(() => restore());

  const rowsOf = (table: ProcessTable) =>
    (table.node as unknown as FakeElement).findAll('jp-gpu-proc-row');

  it('keeps a row (and its buttons) while its process lives; its memory changes in place', () => {
    const table = new ProcessTable({
      interruptKernel: async () => undefined,
      shutdownKernel: async () => undefined
    });
    const first = sample(true);
    table.update(first);
    const [big, small] = rowsOf(table);
    expect(big.dataset.pid).toBe('22');
    expect(big.find('jp-gpu-proc-memory').textContent).toBe(
      '4.7 GiB (simulated)'
    );
    const buttons = big.findAll('jp-gpu-proc-action');
    expect(buttons).toHaveLength(2);

    // A second later: more memory, longer idle. The same elements show it.
    const later = sample(true);
    later.devices[1].processes![0].used_mem_bytes = 6e9;
    later.devices[1].processes![0].idle_s = 1300;
    table.update(later);
    const [big2, small2] = rowsOf(table);
    expect(big2).toBe(big);
    expect(small2).toBe(small);
    expect(big2.findAll('jp-gpu-proc-action')).toEqual(buttons);
    expect(big2.find('jp-gpu-proc-memory').textContent).toBe(
      '5.6 GiB (simulated)'
    );
    expect(big2.find('jp-gpu-proc-idle').textContent).toMatch(
      /^idle 22 min idle holder$/
    );

    // The process ended: its row goes, the other stays.
    const gone = sample(true);
    gone.devices[1].processes = [];
    table.update(gone);
    expect(rowsOf(table)).toEqual([small]);
  });
});
