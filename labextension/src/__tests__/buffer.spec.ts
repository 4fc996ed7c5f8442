import { gpuKey, lowerBound, SampleBuffer } from '../buffer';
import { makeSample } from './fakeserver';

describe('SampleBuffer', () => {
  it('keeps samples in time order in columns', () => {
    const buffer = new SampleBuffer(60);
    buffer.add([makeSample(1, 100), makeSample(2, 101)]);
    expect(buffer.ts).toEqual([100, 101]);
    expect(buffer.column('host.cpu')).toEqual([1, 2]);
    expect(buffer.column(gpuKey(1, 'util_pct'))).toEqual([
      (7 + 13) % 100,
      (14 + 13) % 100
    ]);
  });

  it('trims to the window measured from the newest sample', () => {
    const buffer = new SampleBuffer(10);
    const samples = Array.from({ length: 30 }, (_, i) =>
      makeSample(i + 1, 100 + i)
    );
    buffer.add(samples);
    expect(buffer.ts[0]).toBe(119);
    expect(buffer.lastTs).toBe(129);
    expect(buffer.length).toBe(11);
    expect(buffer.column('host.cpu')).toHaveLength(11);
    buffer.windowS = 3;
    expect(buffer.ts).toEqual([126, 127, 128, 129]);
    expect(buffer.column(gpuKey(0, 'temperature_c'))).toHaveLength(4);
  });

  it('fills a gap in place and ignores samples it already has', () => {
    const buffer = new SampleBuffer(60);
    buffer.add([makeSample(1, 100), makeSample(4, 103)]);
    const column = buffer.column('host.cpu');
    expect(
      buffer.add([makeSample(2, 101), makeSample(3, 102), makeSample(4, 103)])
    ).toBe(2);
    expect(buffer.ts).toEqual([100, 101, 102, 103]);
    expect(column).toEqual([1, 2, 3, 4]); // the same array, updated in place
  });

  it('pads a device seen for the first time with nulls', () => {
    const buffer = new SampleBuffer(60);
    buffer.add([makeSample(1, 100, 1)]);
    buffer.add([makeSample(2, 101, 3)]);
    expect(buffer.column(gpuKey(2, 'util_pct'))).toEqual([
      null,
      (14 + 26) % 100
    ]);
    expect(buffer.column(gpuKey(0, 'util_pct'))).toEqual([7, 14]);
  });

  it('draws a lost device as a gap', () => {
    const buffer = new SampleBuffer(60);
    const lost = makeSample(2, 101);
    lost.devices[1] = {
      ...lost.devices[1],
      state: 'lost',
      error: 'GPU is lost'
    };
    buffer.add([makeSample(1, 100), lost]);
    expect(buffer.column(gpuKey(1, 'mem_used_bytes'))[1]).toBeNull();
    expect(buffer.column(gpuKey(0, 'mem_used_bytes'))[1]).toBe(2e9);
  });

  it('finds the lower bound', () => {
    expect(lowerBound([1, 3, 5], 0)).toBe(0);
    expect(lowerBound([1, 3, 5], 3)).toBe(1);
    expect(lowerBound([1, 3, 5], 4)).toBe(2);
    expect(lowerBound([1, 3, 5], 6)).toBe(3);
  });
});
