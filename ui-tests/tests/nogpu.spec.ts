/**
 * The monitor on a machine without a GPU (the default backend, `auto`), behind a token as a
 * real server is; and the state a person sees when the server extension is not enabled.
 */
import { expect, test } from '@playwright/test';
import {
  allowNarrowSidebar,
  layoutProblems,
  openLab,
  openPanel,
  PANEL,
  setPanelWidth,
  STATUS_ITEM
} from './lab';
import { token } from '../servers.json';

test('says why there is no GPU and still shows the host', async ({ page }) => {
  await openLab(page, `?token=${token}`);
  await allowNarrowSidebar(page);
  const panel = await openPanel(page);
  const notice = panel.locator('.jp-gpu-notice');
  await expect(notice).toHaveAttribute('data-kind', 'no-gpu');
  await expect(notice.locator('.jp-gpu-retry')).toBeHidden();
  // e.g. "No NVIDIA GPU found: NVML Shared Library Not Found. This machine has no NVIDIA
  // driver (...). To see the monitor without a GPU, start JupyterLab with
  // --JupyterGpu.backend=simulated (...). Host metrics are still shown."
  await expect(notice.locator('.jp-gpu-notice-text')).toHaveText(
    /^No NVIDIA GPU found(: .+)?\. .+--JupyterGpu\.backend=simulated.+ Host metrics are still shown\.$/
  );
  await expect(panel.locator('.jp-gpu-card[data-gpu-index]')).toHaveCount(0);
  const host = panel.locator('.jp-gpu-host-card');
  await expect(
    host.locator('[data-metric="cpu"] .jp-gpu-tile-value')
  ).toHaveText(/^\d+(\.\d)?%$/);
  await expect(
    host.locator('[data-metric="host-mem"] .jp-gpu-tile-value')
  ).toHaveText(/^[\d.]+\/[\d.]+ GiB$/);
  await expect(panel.locator('.jp-gpu-status')).toHaveText('live');
  await expect(page.locator(STATUS_ITEM)).toHaveText('No GPU');
  if (process.env.UPDATE_SCREENSHOTS) {
    await page.waitForTimeout(4000);
    await page.screenshot({
      path: '../docs/screenshot-no-gpu.png',
      clip: { x: 0, y: 0, width: 640, height: 420 }
    });
  }
  // The host card alone in a narrow sidebar: every label whole, nothing overlapping.
  await setPanelWidth(page, 220);
  expect(await layoutProblems(page)).toEqual([]);
});

test('says when the server extension is not enabled', async ({ page }) => {
  // What a server without the extension answers: 404 on every API route.
  await page.route('**/jupyter-gpu/api/v1/**', route =>
    route.fulfill({
      status: 404,
      contentType: 'text/html',
      body: '<h1>404: Not Found</h1>'
    })
  );
  await openLab(page, `?token=${token}`);
  const panel = await openPanel(page);
  await expect(panel.locator('.jp-gpu-notice')).toHaveAttribute(
    'data-kind',
    'disabled'
  );
  await expect(panel.locator('.jp-gpu-notice')).toContainText(
    'The jupyter-gpu server extension is not enabled'
  );
  await expect(panel.locator('.jp-gpu-status')).toHaveText('off');
  await expect(page.locator(STATUS_ITEM)).toHaveText('GPU: extension off');
  await expect(page.locator(PANEL)).toHaveAttribute('data-status', 'disabled');
});
