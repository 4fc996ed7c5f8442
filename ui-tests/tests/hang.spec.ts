/**
 * A GPU whose NVML reads hang (`JupyterGpu.simulated_faults=hang:1`, a hung driver): its card
 * says "not responding for N s" with N growing, while the other GPU keeps updating and the
 * panel stays live. And one that hangs after it has answered for a while (a server started
 * here, `hang:1@12`): its last known values stay, greyed, with "last read N s ago", in the
 * sidebar and the dashboard; never shown as live.
 */
import { expect, Locator, test } from '@playwright/test';
import {
  cardValues,
  command,
  openLab,
  openPanel,
  PANEL,
  STATUS_ITEM
} from './lab';
import { TestServer } from './servers';
import { ports } from '../servers.json';

test('a hung GPU is not responding while the other updates', async ({
  page
}) => {
  test.setTimeout(90000);
  await openLab(page);
  const panel = await openPanel(page);
  await expect(panel.locator('.jp-gpu-status')).toHaveText('live');
  const gpu0 = panel.locator('.jp-gpu-card[data-gpu-index="0"]');
  const gpu1 = panel.locator('.jp-gpu-card[data-gpu-index="1"]');
  await expect(gpu1).toHaveAttribute('data-state', 'not_responding');
  const message = gpu1.locator('.jp-gpu-card-message');
  await expect(message).toHaveText(/^GPU 1 not responding for \d+ s: /);
  const seconds = async () =>
    Number(/for (\d+) s/.exec((await message.textContent()) ?? '')?.[1]);
  const first = await seconds();
  await expect(async () => {
    expect(await seconds()).toBeGreaterThan(first); // how long, counting up
  }).toPass({ timeout: 15000 });

  // GPU 0 carries on: its numbers keep changing, its card has no message.
  await expect(gpu0).toHaveAttribute('data-state', 'ok');
  await expect(gpu0.locator('.jp-gpu-card-message')).toBeHidden();
  const before = await cardValues(gpu0);
  await expect(async () => {
    expect(await cardValues(gpu0)).not.toEqual(before);
  }).toPass({ timeout: 15000 });
  await expect(page.locator(STATUS_ITEM)).toContainText('GPU 1 not responding');
  // The samples are fresh: no "data is N s old".
  await expect(panel.locator('.jp-gpu-age')).toBeHidden();
});

test.describe('a GPU that hangs after answering', () => {
  const HANG_AFTER_S = 12;
  const server = new TestServer(ports.stale, 'stale');
  test.use({ baseURL: `http://127.0.0.1:${ports.stale}/` });
  test.beforeAll(async () => {
    await server.start([
      '--JupyterGpu.backend=simulated',
      '--JupyterGpu.simulated_devices=2',
      `--JupyterGpu.simulated_faults=hang:1@${HANG_AFTER_S}`,
      '--JupyterGpu.read_deadline_s=0.5'
    ]);
  });
  test.afterAll(async () => {
    await server.stop();
  });

  /** The color and style a value is drawn in. */
  const looks = (value: Locator) =>
    value.evaluate(el => {
      const style = getComputedStyle(el);
      return `${style.color} ${style.fontStyle}`;
    });

  test('a hung simulated GPU greys its values and shows their age', async ({
    page
  }) => {
    test.setTimeout(120000);
    await openLab(page);
    const panel = await openPanel(page);
    await expect(panel.locator('.jp-gpu-status')).toHaveText('live');
    const gpu0 = panel.locator('.jp-gpu-card[data-gpu-index="0"]');
    const gpu1 = panel.locator('.jp-gpu-card[data-gpu-index="1"]');
    // Stale: not responding (past its read deadline), or its groups marked stale by the
    // server. Either way the card says how old its values are.
    const age = gpu1.locator('.jp-gpu-card-age');
    await expect(age).toHaveText(/^last read \d+ s ago$/, { timeout: 60000 });
    const seconds = async () =>
      Number(/(\d+) s ago/.exec((await age.textContent()) ?? '')?.[1]);
    const first = await seconds();
    await expect(async () => {
      expect(await seconds()).toBeGreaterThan(first); // the age counts up
    }).toPass({ timeout: 15000 });
    if ((await gpu1.getAttribute('data-state')) === 'not_responding') {
      await expect(gpu1.locator('.jp-gpu-card-message')).toHaveText(
        /^GPU 1 not responding for \d+ s/
      );
    }

    // Its last known values, not dashes, each greyed; its charts too.
    const values = gpu1.locator('.jp-gpu-tile-value');
    await expect(values).toHaveText([
      /^\d+(\.\d)?%$/,
      /^\d+(\.\d+)?\/140 GiB$/,
      /^\d+ W$/,
      /^\d+ °C$/
    ]);
    await expect(gpu1.locator('.jp-gpu-tile.jp-gpu-mod-stale')).toHaveCount(4);
    const live = gpu0.locator('.jp-gpu-tile-value').first();
    const stale = values.first();
    expect(await looks(stale)).toMatch(/italic$/);
    expect(await looks(stale)).not.toBe(await looks(live));
    expect(
      Number(
        await gpu1
          .locator('.jp-gpu-chart')
          .first()
          .evaluate(el => getComputedStyle(el).opacity)
      )
    ).toBeLessThan(1);
    // The frozen values do not move while the GPU is hung.
    const frozen = await cardValues(gpu1);
    await page.waitForTimeout(2500);
    expect(await cardValues(gpu1)).toEqual(frozen);
    // Its GPM line (SM activity) is stale too: the last values, greyed, with their age.
    const activity = gpu1.locator('.jp-gpu-activity');
    await expect(activity).toHaveText(
      /^SM active \d+% · tensor \d+% · DRAM \d+% · last read \d+ s ago$/
    );
    await expect(activity).toHaveClass(/jp-gpu-mod-stale/);

    // GPU 0 is live: nothing greyed, no age.
    await expect(gpu0.locator('.jp-gpu-mod-stale')).toHaveCount(0);
    await expect(gpu0.locator('.jp-gpu-card-age')).toBeHidden();

    if (process.env.UPDATE_SCREENSHOTS) {
      // The shortest window (30 s): the charts show the moment GPU 1 stopped.
      await command(page, 'settingeditor:open', { query: 'GPU monitor' });
      const field = page.locator(
        '.jp-SettingsPanel input[id$="historyWindowS"]'
      );
      await field.fill('30');
      await field.press('Tab');
      await expect(panel).toHaveAttribute('data-window-s', '30', {
        timeout: 10000
      });
      await page
        .locator('.lm-DockPanel-tabBar .lm-TabBar-tab', { hasText: 'Settings' })
        .locator('.lm-TabBar-tabCloseIcon')
        .click();
      await gpu1.scrollIntoViewIfNeeded();
      await page.mouse.move(700, 500);
      await page.screenshot({
        path: '../docs/screenshot-stale.png',
        clip: { x: 0, y: 0, width: 560, height: 760 }
      });
    }

    // The dashboard says the same on GPU 1's row.
    await command(page, 'jupyter-gpu:dashboard');
    const row = page.locator('.jp-gpu-dash-row[aria-label="GPU 1"]');
    const staleValues = row.locator('.jp-gpu-dash-stale');
    await expect(staleValues).toHaveText(
      /^Util \d+(\.\d)?%.* · Temp \d+ °C · last read \d+ s ago$/
    );
    expect(await looks(staleValues)).toMatch(/italic$/);
    await expect(
      page.locator('.jp-gpu-dash-row[aria-label="GPU 0"] .jp-gpu-dash-stale')
    ).toBeHidden();
    await expect(page.locator(PANEL)).toBeVisible();
  });
});
