import { DEFAULT_SETTINGS, readSettings } from '../settings';
import schema from '../../schema/plugin.json';

describe('readSettings', () => {
  it('fills defaults and clamps to the schema bounds', () => {
    expect(readSettings({})).toEqual(DEFAULT_SETTINGS);
    const read = readSettings({
      refreshIntervalMs: 10,
      historyWindowS: 1e6,
      charts: { power: false, bogus: true },
      showStatusBar: false
    });
    expect(read.refreshIntervalMs).toBe(250);
    expect(read.historyWindowS).toBe(3600);
    expect(read.charts.power).toBe(false);
    expect(read.charts.utilization).toBe(true);
    expect(read.showStatusBar).toBe(false);
  });

  it('agrees with the JSON schema', () => {
    const props = schema.properties;
    expect(props.refreshIntervalMs.default).toBe(
      DEFAULT_SETTINGS.refreshIntervalMs
    );
    expect(props.historyWindowS.default).toBe(DEFAULT_SETTINGS.historyWindowS);
    expect(props.charts.default).toEqual(DEFAULT_SETTINGS.charts);
    expect(Object.keys(props.charts.properties).sort()).toEqual(
      Object.keys(DEFAULT_SETTINGS.charts).sort()
    );
    expect(
      readSettings({ refreshIntervalMs: props.refreshIntervalMs.minimum - 1 })
        .refreshIntervalMs
    ).toBe(props.refreshIntervalMs.minimum);
  });
});
