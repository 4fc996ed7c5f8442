import { SampleBuffer } from '../buffer';
import {
  cacheTrend,
  formatBytes,
  formatBytesDelta,
  formatBytesOf,
  formatPct,
  noGpuMessage,
  nvmlWaitMessage,
  processLabel,
  statusText,
  unavailableHelp
} from '../format';
import { IDevicesInfo, IGpuProcess } from '../types';
import { makeSample } from './fakeserver';

const H200 = 150754820096;

function info(simulated: boolean): IDevicesInfo {
  return {
    api_version: '1',
    backend: simulated ? 'simulated' : 'nvml',
    simulated,
    gpu_available: true,
    reason: null,
    driver_version: null,
    cuda_driver_version: null,
    hostname: null,
    devices: [],
    config: { interval_s: 1, history_s: 600 }
  };
}

describe('format', () => {
  it('formats bytes in binary units with about three digits', () => {
    expect(formatBytes(33.5e9)).toBe('31.2 GiB');
    expect(formatBytes(H200)).toBe('140 GiB');
    expect(formatBytes(512 * 2 ** 20)).toBe('512 MiB');
    expect(formatBytes(null)).toBe('–');
    expect(formatBytesOf(33.5e9, H200)).toBe('31.2/140 GiB');
    expect(formatBytesOf(null, H200)).toBe('–/140 GiB');
    expect(formatBytesDelta(12 * 2 ** 20)).toBe('+12.0 MiB');
    expect(formatBytesDelta(-3 * 2 ** 30)).toBe('−3.0 GiB');
  });

  it('formats percentages', () => {
    expect(formatPct(87.2)).toBe('87%');
    expect(formatPct(3.14)).toBe('3%');
    expect(formatPct(99.6)).toBe('100%');
    expect(formatPct(0)).toBe('0%');
    expect(formatPct(null)).toBe('–');
  });

  it('says why there is no GPU once', () => {
    expect(noGpuMessage('NVML Shared Library Not Found')).toBe(
      'No NVIDIA GPU found: NVML Shared Library Not Found'
    );
    expect(noGpuMessage('No NVIDIA GPU found')).toBe('No NVIDIA GPU found');
    expect(noGpuMessage(null)).toBe('No NVIDIA GPU found');
  });
});

describe('statusText', () => {
  it('shows one GPU as in nvidia-smi', () => {
    const sample = makeSample(3, 100, 1);
    sample.simulated = false;
    sample.devices[0].util_pct = 87;
    sample.devices[0].mem_used_bytes = 33.5e9;
    sample.devices[0].mem_total_bytes = H200;
    expect(statusText('live', info(false), sample).text).toBe(
      'GPU 0: 87% · 31.2/140 GiB'
    );
  });

  it('summarises several GPUs and says they are simulated', () => {
    const sample = makeSample(3, 100, 2);
    sample.devices[0].util_pct = 40;
    sample.devices[1].util_pct = 60;
    sample.devices.forEach(d => {
      d.mem_used_bytes = 2 ** 30;
      d.mem_total_bytes = 80 * 2 ** 30;
    });
    const { text, title } = statusText('live', info(true), sample);
    expect(text).toBe('2 GPUs · busiest GPU 1: 60% · 2.0/160 GiB (simulated)');
    expect(title).toContain('GPU 1 Simulated GPU: 60% · 1.0/80.0 GiB');
  });

  it('names a lost GPU', () => {
    const sample = makeSample(3, 100, 2);
    sample.devices[1].state = 'lost';
    expect(statusText('live', info(true), sample).text).toContain('GPU 1 lost');
  });

  it('names a GPU that does not respond', () => {
    const sample = makeSample(1, 0, 2);
    sample.devices[0].state = 'not_responding';
    sample.devices[0].stale_s = 12.4;
    const text = statusText('live', info(true), sample);
    expect(text.text).toContain('GPU 0 not responding');
    expect(text.title).toContain('GPU 0');
  });

  it('says when there is no GPU or no server extension', () => {
    const sample = makeSample(3, 100, 0);
    sample.reason = 'NVML Shared Library Not Found';
    const noGpu = statusText('live', info(false), sample);
    expect(noGpu.text).toBe('No GPU');
    expect(noGpu.title).toContain('NVML Shared Library Not Found');
    expect(noGpu.title).toContain('no NVIDIA driver');
    expect(noGpu.title).toContain('--JupyterGpu.backend=simulated');
    expect(statusText('disabled', null, null).text).toBe('GPU: extension off');
  });

  it('says NVML has not answered yet, not that there is no GPU', () => {
    const sample = makeSample(3, 100, 0);
    sample.simulated = false;
    sample.nvml_wait_s = 12.4;
    sample.reason = 'NVML has not answered for 12 s: …';
    const waiting = statusText('live', info(false), sample);
    expect(waiting.text).toBe('GPU: waiting for NVML');
    expect(waiting.title).toContain('NVML has not answered for 12 s');
    expect(waiting.title).toContain('without a restart');
    expect(waiting.title).not.toContain('No NVIDIA GPU');
    sample.simulated = true;
    expect(nvmlWaitMessage(sample)).toMatch(
      /^Simulated fault \(hang:init\): NVML has not answered for 12 s/
    );
  });
});

describe('unavailableHelp', () => {
  it("explains NVML's reasons in words", () => {
    expect(unavailableHelp('Not Supported')).toBe(
      'Not Supported: this GPU or its driver does not report it (NVML), so there is nothing to chart.'
    );
    expect(unavailableHelp('Not Supported (simulated)')).toMatch(
      /^Not Supported \(simulated\): this GPU or its driver does not report it/
    );
    expect(unavailableHelp('Insufficient Permissions')).toMatch(
      /may not read it/
    );
    expect(unavailableHelp('Unknown Error')).toBe('Unknown Error (NVML).');
  });
});

describe('cacheTrend', () => {
  const sample = (seq: number, size: number | null) => {
    const s = makeSample(seq, 1000 + seq);
    s.compile_cache =
      size === null ? null : { ...s.compile_cache!, size_bytes: size };
    return s;
  };

  it('never counts a cache that was not scanned yet as 0', () => {
    const buffer = new SampleBuffer(600);
    const unscanned = makeSample(1, 1001);
    unscanned.compile_cache = {
      size_bytes: 0,
      file_count: 0,
      scanned_ts: null
    };
    buffer.add([unscanned, sample(2, 149 * 2 ** 20)]);
    // Not "+149 MiB in 1 s": the first sample's 0 is "unknown".
    expect(cacheTrend(buffer)).toBe('torch.compile cache: 149 MiB');
  });

  it('says the change between the first and last known sizes', () => {
    const buffer = new SampleBuffer(600);
    expect(cacheTrend(buffer)).toBe('torch.compile cache: not scanned yet');
    buffer.add([sample(1, null), sample(2, null)]);
    expect(cacheTrend(buffer)).toBe('torch.compile cache: not scanned yet');
    buffer.add([sample(3, 2 ** 20)]);
    expect(cacheTrend(buffer)).toBe('torch.compile cache: 1.0 MiB');
    // Unknown sizes at both ends are skipped: from 1 MiB at 1003 s to 13 MiB at 1300 s.
    buffer.add([
      sample(100, null),
      sample(300, 13 * 2 ** 20),
      sample(301, null)
    ]);
    expect(cacheTrend(buffer)).toBe('torch.compile cache: +12.0 MiB in 5 min');
  });
});

describe('processLabel', () => {
  const proc = (extra: Partial<IGpuProcess>): IGpuProcess => ({
    pid: 7,
    name: 'python',
    used_mem_bytes: 1,
    kernel_id: null,
    notebook: null,
    ...extra
  });

  it('names a process by its notebook, then its kernel, then the summary it stands for', () => {
    const kernel = { kernel_id: '0123456789abcdef' };
    expect(
      processLabel(proc({ ...kernel, notebook: 'a/b/train.ipynb' }), 'x')
    ).toBe('train');
    expect(processLabel(proc(kernel), 'x')).toBe('kernel 01234567');
    expect(processLabel(proc({ pid: null }), 'x')).toBe(
      "other users' processes"
    );
    expect(
      processLabel(
        proc({
          pid: null,
          scope: 'unattributable',
          reason:
            'Not attributable from inside this container: NVML lists host pids'
        }),
        'x'
      )
    ).toBe('Not attributable from inside this container');
    // A process of this user that no kernel here started: what the caller calls it.
    expect(processLabel(proc({}), 'pid 7')).toBe('pid 7');
  });
});
