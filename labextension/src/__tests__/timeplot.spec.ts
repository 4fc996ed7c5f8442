// The gaps and bands that both time charts draw (the sidebar's sparklines, the dashboard's
// charts), from one helper (issue 35): a gap where samples are further apart than the limit,
// the cell runs cut to the visible range, at least 2 px wide, in the warning colour if failed.
import uPlot from 'uplot';
import { addTimeGaps, CellBand, drawCellBands } from '../timeplot';

/** A plot 10 px a second from t=0, its canvas context recording each band it fills. */
function fakePlot(xs: number[] = []) {
  const fills: string[] = [];
  const ctx = {
    fillStyle: '',
    fillRect: (x: number, y: number, w: number, h: number) =>
      fills.push(`${ctx.fillStyle} ${x},${y},${w},${h}`)
  };
  const u = {
    data: [xs],
    valToPos: (v: number) => v * 10,
    ctx,
    bbox: { left: 0, top: 4, width: 1000, height: 50 }
  } as unknown as uPlot;
  return { u, fills };
}

const PALETTE = {
  translucent: (variable: string, alpha: number) => `${variable}/${alpha}`
};

describe('addTimeGaps', () => {
  it('adds a gap, in pixels, between samples further apart than the limit', () => {
    const { u } = fakePlot([0, 1, 2, 2.5, 10, 11, 11.5, 20]);
    expect(addTimeGaps(u, 0, 7, [], 3)).toEqual([
      [25, 100],
      [115, 200]
    ]);
    // Exactly at the limit is no gap.
    expect(addTimeGaps(fakePlot([0, 3, 6]).u, 0, 2, [], 3)).toEqual([]);
  });

  it('looks only between idx0 and idx1, and keeps uPlot’s own gaps, sorted', () => {
    const { u } = fakePlot([0, 10, 11, 12, 30]);
    expect(addTimeGaps(u, 1, 3, [], 3)).toEqual([]);
    expect(addTimeGaps(u, 1, 4, [[105, 115]], 3)).toEqual([
      [105, 115],
      [120, 300]
    ]);
  });
});

describe('drawCellBands', () => {
  it('fills the runs in the visible range, cut to it, failed ones in the warning colour', () => {
    const { u, fills } = fakePlot();
    const bands: CellBand[] = [
      [-5, 2, false], // starts before the range: cut at 0
      [3, 4, true],
      [50, 60, false], // after the range: not drawn
      [8, 12, false] // ends after: cut at 10
    ];
    expect(drawCellBands(u, bands, [0, 10], PALETTE, 0.25)).toBe(3);
    expect(fills).toEqual([
      '--jp-brand-color2/0.25 0,4,20,50',
      '--jp-warn-color1/0.25 30,4,10,50',
      '--jp-brand-color2/0.25 80,4,20,50'
    ]);
  });

  it('draws a run shorter than a pixel 2 px wide, so that it shows', () => {
    const { u, fills } = fakePlot();
    expect(drawCellBands(u, [[5, 5.01, false]], [0, 10], PALETTE, 0.22)).toBe(
      1
    );
    expect(fills).toEqual(['--jp-brand-color2/0.22 50,4,2,50']);
  });
});
