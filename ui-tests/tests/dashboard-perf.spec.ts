/**
 * The dashboard's cost with 8 simulated GPUs and 24 h of (seeded, simulated) history: how long
 * it takes to open, to show 24 h, and the JavaScript of one live update
 * (`jupyter-gpu:dashboard-update` measures). Figures printed and written to
 * test-results/dashboard-perf.json.
 *
 * Asserted in every run: the typical update against the time between updates, both measured
 * here (medians of 7 to 11 ms were seen on the shared 2-core CI machine under load, against
 * 1 s between updates). The budgets (1 s to open, 1 s for 24 h, 4 ms per update) only where
 * PERF_ASSERT=1 is set (a quiet machine).
 */
import { expect, test } from '@playwright/test';
import * as fs from 'fs';
import * as os from 'os';
import { command, openLab, updateGaps } from './lab';

const OPEN_BUDGET_MS = 1000;
const UPDATE_BUDGET_MS = 4;
const SECONDS = 20;
/** An update's median share of the median time between updates, at most. */
const MAX_SHARE = 0.1;

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/** ms from now until `predicate` holds in the page (checked every frame). */
async function timeUntil(
  page: import('@playwright/test').Page,
  start: () => Promise<void>,
  predicate: () => boolean
): Promise<number> {
  const t0 = await page.evaluate(() => performance.now());
  await start();
  await page.waitForFunction(predicate, undefined, { timeout: 30000 });
  return (await page.evaluate(() => performance.now())) - t0;
}

test('8 GPUs, 24 h: opening and 24 h timed; an update under a tenth of the time between updates (budgets with PERF_ASSERT=1)', async ({
  page
}) => {
  test.setTimeout(180000);
  await openLab(page);
  await page.evaluate(async () => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the app global is untyped
    await (window as any).jupyterapp.restored;
  });
  const openMs = await timeUntil(
    page,
    () => command(page, 'jupyter-gpu:dashboard'),
    () =>
      document.querySelectorAll(
        '#jupyter-gpu-dashboard .jp-gpu-dash-row .jp-gpu-dash-chart[data-y-max]'
      ).length >= 4
  );
  const dashboard = page.locator('#jupyter-gpu-dashboard');
  await expect(dashboard.locator('.jp-gpu-dash-row')).toHaveCount(8);
  const dayMs = await timeUntil(
    page,
    () => dashboard.getByRole('button', { name: '24 h' }).click(),
    () => {
      const d = document.querySelector<HTMLElement>('#jupyter-gpu-dashboard');
      return d?.dataset.range === '24h' && Number(d.dataset.points) >= 900;
    }
  );
  const fetchMs = Number(await dashboard.getAttribute('data-fetch-ms'));
  await dashboard.getByRole('button', { name: '5 min' }).click();
  await page.waitForTimeout(3000);
  await page.evaluate(() =>
    performance.clearMeasures('jupyter-gpu:dashboard-update')
  );
  await page.waitForTimeout(SECONDS * 1000);
  const durations = (
    await page.evaluate(() =>
      performance
        .getEntriesByName('jupyter-gpu:dashboard-update')
        .map(e => e.duration)
    )
  ).sort((a, b) => a - b);
  const gaps = (await updateGaps(page, 'jupyter-gpu:dashboard-update')).sort(
    (a, b) => a - b
  );
  const result = {
    devices: 8,
    history_s: 86400,
    open_ms: Math.round(openMs),
    range_24h_ms: Math.round(dayMs),
    range_24h_fetch_ms: fetchMs,
    updates: durations.length,
    update_median_ms: +quantile(durations, 0.5).toFixed(2),
    between_updates_median_ms: +quantile(gaps, 0.5).toFixed(1),
    update_p90_ms: +quantile(durations, 0.9).toFixed(2),
    update_max_ms: +durations[durations.length - 1].toFixed(2),
    browser: page.context().browser()?.version(),
    load_avg_1m: +os.loadavg()[0].toFixed(2)
  };
  console.log(`dashboard cost: ${JSON.stringify(result)}`);
  fs.mkdirSync('test-results', { recursive: true });
  fs.writeFileSync(
    'test-results/dashboard-perf.json',
    JSON.stringify(result, null, 2)
  );
  expect(durations.length).toBeGreaterThanOrEqual(SECONDS - 3);
  expect(result.update_median_ms).toBeLessThan(
    MAX_SHARE * result.between_updates_median_ms
  );
  // The budgets are 1 s to open and 4 ms per update. Timing on the shared 2-core CI machine
  // measures preemption as much as our code (7 to 11 ms medians were seen there under load),
  // so the figures are printed and recorded in test-results/dashboard-perf.json, and
  // asserted only where PERF_ASSERT=1 is set (a quiet machine; PERF_SLACK scales the budgets).
  if (process.env.PERF_ASSERT === '1') {
    const slack = Number(process.env.PERF_SLACK ?? 1);
    expect(result.open_ms).toBeLessThan(OPEN_BUDGET_MS * slack);
    expect(result.range_24h_ms).toBeLessThan(OPEN_BUDGET_MS * slack);
    expect(result.update_median_ms).toBeLessThan(UPDATE_BUDGET_MS * slack);
  }
});

test('only the charts in view are drawn; one scrolled into view is drawn at once', async ({
  page
}) => {
  await openLab(page);
  await command(page, 'jupyter-gpu:dashboard');
  const charts = page.locator('#jupyter-gpu-dashboard .jp-gpu-dash-chart');
  await expect(charts).toHaveCount(32);
  await page.waitForTimeout(2000);
  // Which charts a live update redrew (their drawn time range moved), against which are in view.
  const seen = await page.evaluate(async () => {
    const nodes = [
      ...document.querySelectorAll<HTMLElement>(
        '#jupyter-gpu-dashboard .jp-gpu-dash-chart'
      )
    ];
    const before = nodes.map(n => n.dataset.xMax);
    await new Promise(resolve => setTimeout(resolve, 2500));
    const inView = (n: HTMLElement) => {
      const box = n.getBoundingClientRect();
      return box.bottom > 0 && box.top < window.innerHeight;
    };
    return nodes.map((n, i) => ({
      drawn: n.dataset.xMax !== before[i],
      inView: inView(n)
    }));
  });
  const inView = seen.filter(c => c.inView).length;
  expect(inView).toBeGreaterThan(0);
  expect(inView).toBeLessThan(32);
  expect(seen.map(c => c.drawn)).toEqual(seen.map(c => c.inView));
  // The last GPU's temperature chart, scrolled into view, shows the same time as the first's.
  const last = charts.last();
  await last.scrollIntoViewIfNeeded();
  await expect
    .poll(async () => {
      const first = Number(await charts.first().getAttribute('data-x-max'));
      return Math.abs(Number(await last.getAttribute('data-x-max')) - first);
    })
    .toBeLessThan(2);
});
