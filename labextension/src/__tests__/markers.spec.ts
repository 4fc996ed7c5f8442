import { CellMarkers, firstLine, meanUtil, peakMem } from '../markers';
import { makeSample } from './fakeserver';

describe('CellMarkers', () => {
  it('keeps a run from scheduled to executed, with its GPUs’ numbers', () => {
    const markers = new CellMarkers();
    const m = markers.scheduled('a/train.ipynb', 'c1', '\n  x = 1\ny = 2', 100);
    expect(m.firstLine).toBe('x = 1');
    // Samples before, during and after the run: only those during count.
    markers.addSamples([
      makeSample(1, 99),
      makeSample(2, 101),
      makeSample(3, 102)
    ]);
    markers.executed('a/train.ipynb', 'c1', 7, true, 102.5);
    markers.addSamples([makeSample(4, 103)]);
    expect(m.end).toBe(102.5);
    expect(m.executionCount).toBe(7);
    const s2 = makeSample(2, 101).devices[0];
    const s3 = makeSample(3, 102).devices[0];
    expect(meanUtil(m, 0)).toBeCloseTo(
      ((s2.util_pct ?? 0) + (s3.util_pct ?? 0)) / 2
    );
    expect(peakMem(m, 0)).toBe(
      Math.max(s2.mem_used_bytes ?? 0, s3.mem_used_bytes ?? 0)
    );
    expect(meanUtil(m, 5)).toBeNull();
  });

  it('finds the run under a time, and those in a range', () => {
    const markers = new CellMarkers();
    markers.scheduled('n.ipynb', 'a', 'a()', 10);
    markers.executed('n.ipynb', 'a', 1, true, 20);
    markers.scheduled('n.ipynb', 'b', 'b()', 30);
    expect(markers.at(15, 100)?.cellId).toBe('a');
    expect(markers.at(25, 100)).toBeNull();
    expect(markers.at(50, 100)?.cellId).toBe('b'); // still running: up to now
    expect(markers.overlapping(0, 12, 100).map(m => m.cellId)).toEqual(['a']);
    expect(markers.overlapping(0, 100, 100)).toHaveLength(2);
  });

  it('ends a run scheduled again before it finished, and bounds what it keeps', () => {
    const markers = new CellMarkers(3, 1000);
    const first = markers.scheduled('n.ipynb', 'a', 'a()', 10);
    markers.scheduled('n.ipynb', 'a', 'a()', 12);
    expect(first.end).toBe(12);
    for (let i = 0; i < 5; i++) {
      markers.scheduled('n.ipynb', `c${i}`, '', 20 + i);
    }
    expect(markers.markers).toHaveLength(3);
    for (let i = 2; i < 5; i++) {
      markers.executed('n.ipynb', `c${i}`, i, true, 30);
    }
    // More than `keepS` later: the finished runs are dropped.
    markers.scheduled('n.ipynb', 'late', '', 5000);
    expect(markers.markers.map(m => m.cellId)).toEqual(['late']);
    expect(markers.executed('n.ipynb', 'unknown', 1, true, 1)).toBeNull();
  });

  it('shortens a long first line', () => {
    expect(firstLine('x'.repeat(200))).toHaveLength(80);
    expect(firstLine('')).toBe('');
  });
});
