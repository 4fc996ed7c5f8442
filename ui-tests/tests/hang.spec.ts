/**
 * A GPU whose NVML reads hang (`JupyterGpu.simulated_faults=hang:1`, a hung driver): its card
 * says "not responding for N s" with N growing, while the other GPU keeps updating and the
 * panel stays live.
 */
import { expect, test } from '@playwright/test';
import { cardValues, openLab, openPanel, STATUS_ITEM } from './lab';

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
