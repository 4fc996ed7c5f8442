import {
  drawLines,
  IPlotFrame,
  LineContext,
  sparseEnough,
  visibleRange
} from '../dashboard/lines';

/** A canvas context that records the calls that draw. */
function recorder() {
  const calls: string[] = [];
  let depth = 0;
  const ctx = {
    strokeStyle: '#000',
    lineWidth: 1,
    lineJoin: 'miter',
    lineCap: 'butt',
    save: () => {
      depth++;
      calls.push('save');
    },
    restore: () => {
      depth--;
      calls.push('restore');
    },
    beginPath: () => calls.push('begin'),
    rect: (x: number, y: number, w: number, h: number) =>
      calls.push(`rect ${x},${y},${w},${h}`),
    clip: () => calls.push('clip'),
    moveTo: (x: number, y: number) => calls.push(`M ${x},${y}`),
    lineTo: (x: number, y: number) => calls.push(`L ${x},${y}`),
    stroke: () => calls.push(`stroke ${ctx.strokeStyle}`)
  };
  return { ctx: ctx as unknown as LineContext, calls, depth: () => depth };
}

// 100 px wide from t=0 to t=10 (10 px a second), 100 px tall for 0 to 100.
const FRAME: IPlotFrame = {
  left: 0,
  top: 0,
  width: 100,
  height: 100,
  xMin: 0,
  xMax: 10,
  yMin: 0,
  yMax: 100
};

describe('the live lines', () => {
  it('draws each line as one path from its samples, inside the frame', () => {
    const { ctx, calls, depth } = recorder();
    const xs = [0, 5, 10];
    const pieces = drawLines(
      ctx,
      FRAME,
      xs,
      [0, 2],
      [
        { ys: [0, 50, 100], color: 'blue' },
        { ys: [10, 10, 10], color: 'green' }
      ],
      5,
      1.5
    );
    expect(pieces).toBe(2);
    expect(calls).toEqual([
      'save',
      'begin',
      'rect 0,0,100,100',
      'clip',
      'begin',
      'M 0,100',
      'L 50,50',
      'L 100,0',
      'stroke blue',
      'begin',
      'M 0,90',
      'L 50,90',
      'L 100,90',
      'stroke green',
      'restore'
    ]);
    expect(depth()).toBe(0); // the context's state is given back (uPlot caches its style)
  });

  it('lifts the pen at a missing value and where samples are further apart than the gap', () => {
    const { ctx, calls } = recorder();
    const xs = [0, 1, 2, 3, 8, 9];
    const pieces = drawLines(
      ctx,
      FRAME,
      xs,
      [0, 5],
      [{ ys: [10, 20, null, 40, 50, 60], color: 'red' }],
      3,
      1
    );
    // 0-1, then 3 alone (after the null), then 8-9 (5 s after 3: a gap)
    expect(pieces).toBe(3);
    expect(calls.filter(c => c.startsWith('M') || c.startsWith('L'))).toEqual([
      'M 0,90',
      'L 10,80',
      'M 30,60',
      'M 80,50',
      'L 90,40'
    ]);
  });

  it('draws only the samples of the range it is given, and nothing for an empty one', () => {
    const { ctx, calls } = recorder();
    drawLines(
      ctx,
      FRAME,
      [0, 5, 10],
      [1, 2],
      [{ ys: [0, 50, 100], color: 'a' }],
      10,
      1
    );
    expect(calls.filter(c => c.startsWith('M') || c.startsWith('L'))).toEqual([
      'M 50,50',
      'L 100,0'
    ]);
    const empty = recorder();
    expect(
      drawLines(empty.ctx, FRAME, [], [0, -1], [{ ys: [], color: 'a' }], 3, 1)
    ).toBe(0);
    expect(empty.calls).toEqual([]);
  });

  it('picks the samples in view and one either side', () => {
    const xs = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
    expect(visibleRange(xs, 2.5, 6.5)).toEqual([2, 7]);
    expect(visibleRange(xs, 3, 6)).toEqual([2, 6]);
    expect(visibleRange(xs, -5, 100)).toEqual([0, 9]);
    expect(visibleRange(xs, 20, 30)).toEqual([0, -1]);
    expect(visibleRange([], 0, 1)).toEqual([0, -1]);
  });

  it('leaves more than two samples per pixel to uPlot, which thins them', () => {
    expect(sparseEnough(300, 213)).toBe(true);
    expect(sparseEnough(427, 213)).toBe(false);
  });
});
