/**
 * What every card of the panel shares: the render context, drawing its tiles.
 */
import { SampleBuffer } from '../buffer';
import { CellMarkers } from '../markers';
import type { GpuMonitorModel } from '../model';
import { IChartSettings } from '../settings';
import { Tile } from '../tile';
import { ISample } from '../types';

/** What a card asks the model about stale readings (freshness.ts). */
export type IReadings = Pick<
  GpuMonitorModel,
  'freshness' | 'lastKnown' | 'readAgeS' | 'lastLive'
>;

/** What every card needs for one render. */
export interface IRenderContext {
  buffer: SampleBuffer;
  latest: ISample;
  charts: IChartSettings;
  /** The charts' shared time axis (Unix seconds). */
  xMin: number;
  xMax: number;
  /** The server's sampling interval (s). */
  intervalS: number;
  simulated: boolean;
  /** Two charts per GPU (power and temperature as numbers in the header). */
  compact: boolean;
  /** Cell runs, drawn as bands. */
  markers: CellMarkers;
  /** Which readings are stale, their last known values and age. */
  readings: IReadings;
  /** Now, on the server's clock (a running cell's band ends here). */
  now: number;
  /** The cursor is over the charts at this time (`null`: it left). */
  onHoverTime: (ts: number | null) => void;
}

/** The cell runs within the charts' time axis, as `[start, end, failed]`. */
export function bandsOf(ctx: IRenderContext): [number, number, boolean][] {
  return ctx.markers
    .overlapping(ctx.xMin, ctx.xMax, ctx.now)
    .map(m => [m.start, m.end ?? ctx.now, m.success === false]);
}

/** Draw a tile's chart: the buffer's column `key` over the charts' shared time axis. */
export function drawTile(tile: Tile, key: string, ctx: IRenderContext): void {
  const { buffer } = ctx;
  tile.chart.bands = bandsOf(ctx);
  tile.chart.update(
    buffer.ts,
    buffer.column(key),
    ctx.xMin,
    ctx.xMax,
    ctx.intervalS
  );
}

/** Draw the visible tiles' charts again (the theme changed); each knows its own width. */
export function redrawTiles(tiles: Tile[]): void {
  for (const tile of tiles) {
    if (tile.visible) {
      tile.chart.redraw();
    }
  }
}
