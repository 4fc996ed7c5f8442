// The DOM part is covered by ui-tests/tests/data.spec.ts (jest runs without a DOM here).
import { idleText, processRows } from '../proctable';
import { ISample } from '../types';

function sample(simulated = false): ISample {
  const proc = (pid: number, bytes: number, extra: object = {}) => ({
    pid,
    name: 'python',
    used_mem_bytes: bytes,
    kernel_id: null,
    notebook: null,
    ...extra
  });
  return {
    seq: 1,
    ts: 1000,
    backend: 'simulated',
    simulated,
    reason: null,
    host: null,
    compile_cache: null,
    devices: [
      {
        index: 0,
        uuid: 'a',
        name: 'GPU',
        state: 'ok',
        error: null,
        util_pct: 1,
        mem_used_bytes: 1,
        mem_total_bytes: 10,
        power_w: 1,
        power_limit_w: 2,
        temperature_c: 30,
        processes: [proc(11, 1e9)]
      },
      {
        index: 1,
        uuid: 'b',
        name: 'GPU',
        state: 'ok',
        error: null,
        util_pct: 1,
        mem_used_bytes: 1,
        mem_total_bytes: 10,
        power_w: 1,
        power_limit_w: 2,
        temperature_c: 30,
        processes: [
          proc(22, 5e9, {
            kernel_id: 'k22',
            notebook: 'a/train.ipynb',
            idle_s: 1200,
            idle_holder: true
          })
        ]
      }
    ]
  };
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
