import { groupProcesses } from '../processes';
import { IGpuProcess } from '../types';

function proc(over: Partial<IGpuProcess>): IGpuProcess {
  return {
    pid: 1,
    name: 'python3',
    used_mem_bytes: 1000,
    kernel_id: null,
    notebook: null,
    ...over
  };
}

describe('groupProcesses', () => {
  it('shows other users as one row without pids or names', () => {
    const rows = groupProcesses([
      proc({ pid: 10, kernel_id: 'k1', notebook: 'a.ipynb', scope: 'server' }),
      proc({
        pid: null,
        name: null,
        used_mem_bytes: 5000,
        scope: 'other',
        process_count: 2
      })
    ]);
    expect(rows.map(r => r.label)).toEqual(["other users' processes", 'a']);
    expect(rows[0].title).toContain('2 processes of other users');
    expect(rows[0].title).not.toContain('pid');
  });

  it('says why memory is not attributable', () => {
    const reason =
      'Not attributable from inside this container: NVML lists 1 process whose pids match no process visible here.';
    const rows = groupProcesses([
      proc({
        pid: null,
        name: null,
        scope: 'unattributable',
        reason,
        used_mem_bytes: 7000
      })
    ]);
    expect(rows).toHaveLength(1);
    expect(rows[0].label).toBe('Not attributable from inside this container');
    expect(rows[0].bytes).toBe(7000);
    expect(rows[0].title).toContain(reason);
  });
});
