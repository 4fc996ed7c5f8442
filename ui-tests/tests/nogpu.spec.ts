/**
 * The monitor on a machine without a GPU (the default backend, `auto`), behind a token as a
 * real server is; and the state a person sees when the server extension is not enabled.
 */
import { expect, test } from '@playwright/test';
import {
  allowNarrowSidebar,
  boxProblems,
  command,
  layoutProblems,
  openLab,
  openPanel,
  PANEL,
  setPanelWidth,
  STATUS_ITEM,
  wrappedNames
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
  // At the default width: the option on one line (it broke after its "--"), every box in
  // the panel, the host's charts full width; no process table without a GPU.
  await setPanelWidth(page, 250);
  expect(
    await boxProblems(page, PANEL, {
      charts: { selector: '.jp-gpu-chart', minShare: 0.8 }
    })
  ).toEqual([]);
  expect(await wrappedNames(page, PANEL, 'code.jp-gpu-option')).toEqual([]);
  await expect(notice.locator('code.jp-gpu-option')).toHaveText(
    '--JupyterGpu.backend=simulated'
  );
  await expect(panel.locator('.jp-gpu-proctable')).toBeHidden();
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

test('the dashboard without a GPU says why and what to do, with no dead buttons', async ({
  page
}) => {
  await openLab(page, `?token=${token}`);
  const devices = await (
    await page.request.get('jupyter-gpu/api/v1/devices')
  ).json();
  expect(devices.gpu_available).toBe(false);
  await command(page, 'jupyter-gpu:dashboard');
  const dashboard = page.locator('#jupyter-gpu-dashboard');
  const empty = dashboard.locator('.jp-gpu-dash-empty');
  await expect(empty).toBeVisible();
  await expect(empty.locator('.jp-gpu-dash-empty-title')).toHaveText(
    'No GPU to show'
  );
  // Why: the API's reason, in its words and plain ones.
  await expect(empty.locator('.jp-gpu-dash-empty-why')).toContainText(
    devices.reason
  );
  // What to do: the driver, and the simulated backend (its option whole, on one line).
  const todo = empty.locator('.jp-gpu-dash-empty-todo li');
  await expect(todo).toHaveCount(2);
  await expect(todo.first()).toContainText('nvidia-smi');
  await expect(todo.last().locator('code.jp-gpu-option')).toHaveText(
    '--JupyterGpu.backend=simulated'
  );
  // No controls that would act on nothing: no range, pause or zoom buttons, no rows.
  await expect(dashboard.getByRole('button')).toHaveCount(0);
  await expect(dashboard.locator('.jp-gpu-dash-row')).toHaveCount(0);
  for (const width of [1280, 800]) {
    await page.setViewportSize({ width, height: 800 });
    expect(
      await boxProblems(page, '#jupyter-gpu-dashboard'),
      `${width} px`
    ).toEqual([]);
    expect(
      await wrappedNames(page, '#jupyter-gpu-dashboard', 'code.jp-gpu-option')
    ).toEqual([]);
  }
  if (process.env.UPDATE_SCREENSHOTS) {
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.waitForTimeout(1000);
    await page.screenshot({
      path: '../docs/screenshot-dashboard-no-gpu.png',
      clip: { x: 0, y: 0, width: 1280, height: 440 }
    });
  }
});
