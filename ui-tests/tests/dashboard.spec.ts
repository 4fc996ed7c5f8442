/**
 * The GPU dashboard and the monitor's manners, against real Jupyter servers that the tests
 * start: the simulated backend with two hours of seeded past (labelled simulated: the server's
 * `simulated_seed_history_s`), and one with a GPU lost on its clock that is then restarted.
 * Every check reads what is drawn: the charts' scales as uPlot drew them, the hover line's
 * time against the server's samples, the bands, the notifications.
 */
import { expect, Locator, Page, test } from '@playwright/test';
import {
  newNotebook,
  openLab,
  openPanel,
  PANEL,
  runCell,
  STATUS_ITEM,
  updateDurations
} from './lab';
import { TestServer } from './servers';
import { ports } from '../servers.json';

const STREAM = /jupyter-gpu\/api\/v1\/stream/;
const DASHBOARD = '#jupyter-gpu-dashboard';
const SEEDED_S = 7200;
const LOST_AFTER_S = 25;

const main = new TestServer(ports.dashboard, 'dashboard');
const restart = new TestServer(ports.restart, 'restart');

test.beforeAll(async () => {
  test.setTimeout(120000);
  await main.start([
    '--JupyterGpu.backend=simulated',
    '--JupyterGpu.simulated_devices=2',
    `--JupyterGpu.simulated_seed_history_s=${SEEDED_S}`
  ]);
  // The first page a server serves is slow on a busy machine: not in a test's time.
  await fetch(`http://127.0.0.1:${ports.dashboard}/lab`);
});

test.afterAll(async () => {
  await main.stop();
  await restart.stop();
});

/** Open the dashboard from the sidebar's Dashboard button, as a person would. */
async function openDashboard(page: Page): Promise<Locator> {
  // Not before JupyterLab has restored its layout (that would drop what opens now).
  await page.evaluate(async () => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the app global is untyped
    await (window as any).jupyterapp.restored;
  });
  // The sidebar may be open already (the server's workspace keeps the layout of earlier tests).
  const panel = page.locator(PANEL);
  if (!(await panel.isVisible())) {
    await openPanel(page);
  }
  await panel.getByRole('button', { name: 'Dashboard' }).click();
  const dashboard = page.locator(DASHBOARD);
  await expect(dashboard).toBeVisible({ timeout: 15000 });
  await expect(dashboard).toHaveAttribute('role', 'region');
  await expect(dashboard).toHaveAttribute('aria-label', 'GPU dashboard');
  return dashboard;
}

/** A row's chart by what it shows (`Memory used`, `Utilization (%)`, …). */
function chart(dashboard: Locator, gpu: number, title: string): Locator {
  return dashboard.locator(
    `.jp-gpu-dash-chart[aria-label="GPU ${gpu} ${title}"]`
  );
}

/** The share of a chart's canvas columns with a pixel of the theme colour `variable`. */
async function lineCoverage(
  chartNode: Locator,
  variable: string
): Promise<number> {
  return chartNode.evaluate((node, name) => {
    const canvas = node.querySelector('canvas');
    const ctx = canvas?.getContext('2d');
    const probe = document.createElement('canvas').getContext('2d');
    if (!canvas || !ctx || !probe) {
      return 0;
    }
    probe.fillStyle = getComputedStyle(document.body)
      .getPropertyValue(name)
      .trim();
    const hex = String(probe.fillStyle); // the canvas gives it back as #rrggbb
    const [r, g, b] = [1, 3, 5].map(i => parseInt(hex.slice(i, i + 2), 16));
    const { width, height } = canvas;
    const data = ctx.getImageData(0, 0, width, height).data;
    let columns = 0;
    for (let x = 0; x < width; x++) {
      for (let y = 0; y < height; y++) {
        const k = (y * width + x) * 4;
        if (
          Math.abs(data[k] - r) < 24 &&
          Math.abs(data[k + 1] - g) < 24 &&
          Math.abs(data[k + 2] - b) < 24 &&
          data[k + 3] > 200
        ) {
          columns++;
          break;
        }
      }
    }
    return columns / width;
  }, variable);
}

/** The labels of a chart's time (`x`) or value (`y`) axis, as drawn. */
async function ticks(chartNode: Locator, axis: 'x' | 'y'): Promise<string[]> {
  const text = await chartNode.getAttribute(`data-${axis}-ticks`);
  return text ? text.split(' | ') : [];
}

/** The point of a chart's plot area at server time `ts` (and half its height). */
async function pointAt(chartNode: Locator, ts: number) {
  const over = await chartNode.locator('.u-over').boundingBox();
  const xMin = Number(await chartNode.getAttribute('data-x-min'));
  const xMax = Number(await chartNode.getAttribute('data-x-max'));
  if (!over) {
    throw new Error('the chart has no plot area');
  }
  return {
    x: over.x + ((ts - xMin) / (xMax - xMin)) * over.width,
    y: over.y + over.height / 2
  };
}

/** Local time as the dashboard writes it. */
async function clock(page: Page, ts: number): Promise<string> {
  return page.evaluate(
    t =>
      new Date(t * 1000).toLocaleTimeString(undefined, {
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
        hour12: false
      }),
    ts
  );
}

test('a row per GPU, scales at the memory total and power limit, hover shows the sample’s time', async ({
  page
}) => {
  await openLab(page);
  // The command palette lists it as "GPU dashboard".
  expect(
    await page.evaluate(() =>
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the app global is untyped
      (window as any).jupyterapp.commands.label('jupyter-gpu:dashboard')
    )
  ).toBe('GPU dashboard');
  const devices = await (
    await page.request.get('jupyter-gpu/api/v1/devices')
  ).json();
  const dashboard = await openDashboard(page);
  await expect(dashboard.locator('.jp-gpu-dash-row')).toHaveCount(2);
  await expect(
    dashboard.getByRole('button', { name: '5 min' })
  ).toHaveAttribute('aria-pressed', 'true');
  for (const gpu of [0, 1]) {
    // A row's charts are drawn once in view; its power chart may be on its second line (two
    // by two), below the window.
    await dashboard
      .locator('.jp-gpu-dash-row')
      .nth(gpu)
      .locator('.jp-gpu-dash-figure')
      .nth(2)
      .scrollIntoViewIfNeeded();
    const mem = chart(dashboard, gpu, 'Memory used');
    // The memory chart's y scale, as uPlot drew it, tops out at the GPU's total.
    await expect(mem).toHaveAttribute(
      'data-y-max',
      String(devices.devices[gpu].mem_total_bytes)
    );
    await expect(chart(dashboard, gpu, 'Power (W)')).toHaveAttribute(
      'data-y-max',
      String(devices.devices[gpu].power_limit_w)
    );
    await expect(
      dashboard
        .locator('.jp-gpu-dash-row')
        .nth(gpu)
        .locator('.jp-gpu-dash-scale')
        .first()
    ).toHaveText('0 to 140 GiB');
    // Round memory ticks below the total, not thirds of it (46.6, 93.1 GiB).
    expect(await ticks(mem, 'y')).toEqual(['0 GiB', '50 GiB', '100 GiB']);
  }
  // Five minutes: a tick per minute on the clock (at this width), not one.
  const times = await ticks(chart(dashboard, 0, 'Utilization (%)'), 'x');
  expect(times.length, times.join(' ')).toBeGreaterThanOrEqual(4);
  for (const t of times) {
    expect(t).toMatch(/^\d\d:\d\d$/);
  }
  // Hover: the time of the sample under the cursor, and every series' value (paused, so that
  // new samples do not move the chart under the cursor between two reads).
  await dashboard.getByRole('button', { name: 'Pause' }).click();
  const util = chart(dashboard, 0, 'Utilization (%)');
  // The live lines are drawn (the dashboard draws them itself, not through uPlot's series):
  // each line's colour is in a good share of its chart's columns (0 when they are not drawn;
  // about half of them just after the server started, the y axis and the data's edge aside).
  expect(await lineCoverage(util, '--jp-brand-color1')).toBeGreaterThan(0.2);
  expect(await lineCoverage(util, '--jp-success-color1')).toBeGreaterThan(0.2);
  expect(
    await lineCoverage(chart(dashboard, 0, 'Power (W)'), '--jp-warn-color1')
  ).toBeGreaterThan(0.2);
  const xMax = Number(await util.getAttribute('data-x-max'));
  await page.mouse.move(
    ...(Object.values(await pointAt(util, xMax - 120)) as [number, number])
  );
  const time = dashboard
    .locator('.jp-gpu-dash-row')
    .first()
    .locator('.jp-gpu-dash-hover time');
  await expect(time).not.toHaveText(/^now/);
  const iso = await time.getAttribute('datetime');
  const hovered = Date.parse(iso ?? '') / 1000;
  const history = await (
    await page.request.get('jupyter-gpu/api/v1/history')
  ).json();
  const sample = history.samples.find(
    (s: { ts: number }) => Math.abs(s.ts - hovered) < 0.002
  );
  expect(sample, `no sample at ${iso}`).toBeTruthy();
  expect(Math.abs(hovered - (xMax - 120))).toBeLessThan(3);
  await expect(time).toHaveText(await clock(page, sample.ts));
  const values = dashboard
    .locator('.jp-gpu-dash-row')
    .first()
    .locator('.jp-gpu-dash-values');
  await expect(values).toHaveText(
    new RegExp(
      `^Util ${Math.round(sample.devices[0].util_pct)}% · SM active (\\d+%|–) .*· Mem [\\d.]+/140 GiB · Power \\d+ W · Temp \\d+ °C$`
    )
  );
  // The other row follows the same cursor.
  await expect(
    dashboard
      .locator('.jp-gpu-dash-row')
      .nth(1)
      .locator('.jp-gpu-dash-hover time')
  ).toHaveAttribute('datetime', iso ?? '');

  // The sidebar's cards (open since the dashboard was opened from there) say their scale,
  // and the time on hover too.
  const panel = page.locator(PANEL);
  await expect(panel).toBeVisible();
  const card = panel.locator('.jp-gpu-card[data-gpu-index="0"]');
  await expect(
    card.locator('.jp-gpu-tile[data-metric="mem"] .jp-gpu-chart-scale')
  ).toHaveText('140 GiB');
  await expect(
    card.locator('.jp-gpu-tile[data-metric="power"] .jp-gpu-chart-scale')
  ).toHaveText('700 W');
  const spark = card.locator('.jp-gpu-tile[data-metric="util"] .jp-gpu-chart');
  const box = await spark.boundingBox();
  await page.mouse.move(box!.x + box!.width * 0.6, box!.y + box!.height / 2);
  const cardTime = card.locator('.jp-gpu-card-hover time');
  await expect(cardTime).toBeVisible();
  // The attribute and the text at one moment: the chart moves under the mouse every second, so
  // the hovered sample (and both) change between two separate reads (a 1-in-n failure in CI).
  const shown = await cardTime.evaluate(el => ({
    datetime: el.getAttribute('datetime') ?? '',
    text: el.textContent ?? ''
  }));
  const cardTs = Date.parse(shown.datetime) / 1000;
  expect(shown.text).toBe(await clock(page, cardTs));
  expect(
    history.samples.some(
      (s: { ts: number }) => Math.abs(s.ts - cardTs) < 0.002
    ) || cardTs > history.samples[history.samples.length - 1].ts
  ).toBe(true);
  // "GPUs", not "GPUS"; the host name is explained.
  await expect(panel.locator('.jp-gpu-title')).toHaveText('GPUs');
  expect(
    await panel
      .locator('.jp-gpu-title')
      .evaluate(e => getComputedStyle(e).textTransform)
  ).toBe('none');
  expect(
    await panel.locator('.jp-gpu-subtitle').getAttribute('title')
  ).toContain('The Jupyter server runs on the host');
});

test('1 h and 24 h read the seeded past; drag zooms; pause holds the charts', async ({
  page
}) => {
  await openLab(page);
  const dashboard = await openDashboard(page);
  const root = page.locator(DASHBOARD);
  await dashboard.getByRole('button', { name: '1 h' }).click();
  await expect(root).toHaveAttribute('data-range', '1h');
  await expect(root).toHaveAttribute('data-resolution-s', '10');
  const util = chart(dashboard, 0, 'Utilization (%)');
  await expect(async () => {
    // An hour of 10 s rows, though the server keeps only 10 min at full resolution.
    expect(
      Number(await root.getAttribute('data-points'))
    ).toBeGreaterThanOrEqual(350);
    const span =
      Number(await util.getAttribute('data-x-max')) -
      Number(await util.getAttribute('data-x-min'));
    expect(Math.abs(span - 3600)).toBeLessThan(2);
  }).toPass({ timeout: 10000 });
  // An hour: several round clock times (steps of 5, 10 or 15 min).
  const hourTicks = await ticks(util, 'x');
  expect(hourTicks.length, hourTicks.join(' ')).toBeGreaterThanOrEqual(3);
  for (const t of hourTicks) {
    expect(t).toMatch(/^\d\d:[0-5][05]$/);
  }
  // The row at the left edge of the hour has data: hover it.
  const xMin = Number(await util.getAttribute('data-x-min'));
  const p = await pointAt(util, xMin + 30);
  await page.mouse.move(p.x, p.y);
  const values = dashboard
    .locator('.jp-gpu-dash-row')
    .first()
    .locator('.jp-gpu-dash-values');
  await expect(values).toHaveText(/^Util \d+%/);

  // Drag across the middle: zoomed in, then back with the button.
  const over = (await util.locator('.u-over').boundingBox())!;
  await page.mouse.move(over.x + over.width * 0.4, over.y + 20);
  await page.mouse.down();
  await page.mouse.move(over.x + over.width * 0.6, over.y + 20, { steps: 5 });
  await page.mouse.up();
  await expect(async () => {
    const span =
      Number(await util.getAttribute('data-x-max')) -
      Number(await util.getAttribute('data-x-min'));
    expect(span).toBeLessThan(1000);
    expect(span).toBeGreaterThan(400);
  }).toPass({ timeout: 5000 });
  await dashboard.getByRole('button', { name: 'Whole range' }).click();
  await expect(async () => {
    const span =
      Number(await util.getAttribute('data-x-max')) -
      Number(await util.getAttribute('data-x-min'));
    expect(Math.abs(span - 3600)).toBeLessThan(2);
  }).toPass({ timeout: 5000 });

  await dashboard.getByRole('button', { name: '24 h' }).click();
  await expect(root).toHaveAttribute('data-range', '24h');
  await expect(root).toHaveAttribute('data-resolution-s', '90');
  await expect(async () => {
    // Two seeded hours at 90 s rows.
    expect(
      Number(await root.getAttribute('data-points'))
    ).toBeGreaterThanOrEqual(SEEDED_S / 90 - 2);
  }).toPass({ timeout: 10000 });
  // A day: whole hours.
  await expect(async () => {
    const dayTicks = await ticks(util, 'x');
    expect(dayTicks.length, dayTicks.join(' ')).toBeGreaterThanOrEqual(3);
    for (const t of dayTicks) {
      expect(t).toMatch(/^\d\d:00$/);
    }
  }).toPass({ timeout: 5000 });

  // Pause: the live range stops moving.
  await dashboard.getByRole('button', { name: '5 min' }).click();
  await dashboard.getByRole('button', { name: 'Pause' }).click();
  await expect(
    dashboard.getByRole('button', { name: 'Resume' })
  ).toHaveAttribute('aria-pressed', 'true');
  const live = chart(dashboard, 0, 'Memory used');
  const frozen = await live.getAttribute('data-x-max');
  await page.waitForTimeout(2500);
  expect(await live.getAttribute('data-x-max')).toBe(frozen);
  await dashboard.getByRole('button', { name: 'Resume' }).click();
  await expect(live).not.toHaveAttribute('data-x-max', frozen ?? '', {
    timeout: 5000
  });
});

test('a cell run is a band on the charts; its hover names the cell and its numbers per GPU', async ({
  page
}) => {
  test.setTimeout(180000);
  await openLab(page);
  // The kernel is up and idle before the cell runs; runCell returns when the kernel replied.
  const notebook = await newNotebook(page);
  const started = Date.now() / 1000;
  await runCell(notebook, 0, 'import time; time.sleep(8)');
  await expect(notebook.locator('.jp-InputArea-prompt').first()).toHaveText(
    '[1]:'
  );
  const ended = Date.now() / 1000;
  const dashboard = await openDashboard(page);
  const util = chart(dashboard, 0, 'Utilization (%)');
  await expect(util).toHaveAttribute('data-bands', '1', { timeout: 10000 });
  // Zoom on the run so the band is wide, then hover its middle.
  const before = await pointAt(util, started - 20);
  const after = await pointAt(util, ended + 20);
  await page.mouse.move(before.x, before.y);
  await page.mouse.down();
  await page.mouse.move(after.x, after.y, { steps: 5 });
  await page.mouse.up();
  const middle = await pointAt(util, (started + ended) / 2);
  await page.mouse.move(middle.x, middle.y);
  const band = dashboard
    .locator('.jp-gpu-dash-row')
    .first()
    .locator('.jp-gpu-dash-band');
  await expect(band).toHaveText(
    /^Untitled\d*\.ipynb In \[1\]: import time; time\.sleep\(8\) — GPU 0: mean util \d+%, peak mem [\d.]+\/140 GiB; GPU 1: mean util \d+%, peak mem [\d.]+\/140 GiB$/
  );
  // The sidebar (open since the dashboard was opened from there) draws it too, and names it
  // on hover.
  const panel = page.locator(PANEL);
  const spark = panel
    .locator(
      '.jp-gpu-card[data-gpu-index="0"] .jp-gpu-tile[data-metric="util"] .jp-gpu-chart'
    )
    .first();
  const xMax = Date.now() / 1000;
  const windowS = Number(
    await page.locator(PANEL).getAttribute('data-window-s')
  );
  const box = (await spark.locator('.u-over').boundingBox())!;
  const mid = (started + ended) / 2;
  await page.mouse.move(
    box.x + box.width * (1 - (xMax - mid) / windowS),
    box.y + box.height / 2
  );
  await expect(
    panel.locator('.jp-gpu-card[data-gpu-index="0"] .jp-gpu-card-hover')
  ).toContainText('time.sleep(8)');

  if (process.env.UPDATE_SCREENSHOTS) {
    // The dashboard with the cell's band, light and dark, for docs/ and the README.
    await dashboard.getByRole('button', { name: 'Whole range' }).click();
    await page.mouse.move(0, 0);
    for (const [theme, file] of [
      ['JupyterLab Light', 'screenshot-dashboard.png'],
      ['JupyterLab Dark', 'screenshot-dashboard-dark.png']
    ]) {
      await page.evaluate(async name => {
        // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the app global is untyped
        await (window as any).jupyterapp.commands.execute(
          'apputils:change-theme',
          { theme: name }
        );
      }, theme);
      await page.waitForTimeout(2500);
      await page.screenshot({ path: `../docs/${file}` });
    }
    await page.evaluate(async () => {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the app global is untyped
      await (window as any).jupyterapp.commands.execute(
        'apputils:change-theme',
        {
          theme: 'JupyterLab Light'
        }
      );
    });
  }
});

test('an alert is said once; after a server restart the devices are read again', async ({
  page
}) => {
  test.setTimeout(150000);
  await restart.start([
    '--JupyterGpu.backend=simulated',
    '--JupyterGpu.simulated_devices=2',
    `--JupyterGpu.simulated_faults=lost:1@${LOST_AFTER_S}`
  ]);
  await page.goto(`http://127.0.0.1:${ports.restart}/lab`);
  await page
    .locator('#jupyterlab-splash')
    .waitFor({ state: 'detached', timeout: 30000 });
  await expect(page.locator(STATUS_ITEM)).toBeVisible();
  const toast = page.locator('.Toastify__toast', { hasText: 'GPU 1 is lost' });
  await expect(toast).toHaveCount(1, { timeout: (LOST_AFTER_S + 20) * 1000 });
  // Said once: not again on each of the next samples.
  await page.waitForTimeout(6000);
  await expect(toast).toHaveCount(1);

  const panel = await openPanel(page);
  await expect(panel.locator('.jp-gpu-card[data-gpu-index]')).toHaveCount(2);
  await restart.stop();
  await restart.start([
    '--JupyterGpu.backend=simulated',
    '--JupyterGpu.simulated_devices=3'
  ]);
  // The monitor reconnects and reads the devices again: now three.
  await expect(panel.locator('.jp-gpu-card[data-gpu-index]')).toHaveCount(3, {
    timeout: 60000
  });
  await expect(panel.locator('.jp-gpu-status')).toHaveText('live', {
    timeout: 30000
  });
  await expect(page.locator(STATUS_ITEM)).toHaveText(/^3 GPUs · /);
});

test('a proxy that accepts the stream and sends nothing costs one timeout, then steady polling', async ({
  page
}) => {
  test.setTimeout(90000);
  let sockets = 0;
  // Accept every stream socket and forward nothing (no connectToServer).
  await page.routeWebSocket(STREAM, () => {
    sockets++;
  });
  await openLab(page);
  const opened = Date.now();
  const panel = await openPanel(page);
  await expect(panel.locator('.jp-gpu-status')).toHaveText('polling', {
    timeout: 20000
  });
  // One open timeout (10 s), not two.
  expect(Date.now() - opened).toBeLessThan(15000);
  expect(sockets).toBe(1);
  // Steady polling: the charts get new samples every second or two, never a 10 s freeze.
  // (Each new sample redraws the panel: count its updates, second by second.)
  const counts: number[] = [];
  for (let i = 0; i < 20; i++) {
    counts.push((await updateDurations(page)).length);
    await page.waitForTimeout(1000);
  }
  const stalls = counts.slice(2).filter((c, i) => c === counts[i]);
  expect(
    stalls,
    `updates so far, each second: ${counts.join(', ')}`
  ).toHaveLength(0);
  await expect(panel.locator('.jp-gpu-status')).toHaveText('polling');
});
