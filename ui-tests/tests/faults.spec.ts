/**
 * GPUs that fail while the monitor is open, on a real Jupyter server whose simulated backend
 * has faults scheduled (`JupyterGpu.simulated_faults`): GPU 1 is lost 20 s after the server
 * starts, and GPU 0 cannot report its power or its processes ("Not Supported", as NVML says on
 * some GPUs). The server is started here, not with the others, so that the loss happens while
 * the test watches.
 */
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { expect, test } from '@playwright/test';
import {
  allowNarrowSidebar,
  cardValues,
  command,
  layoutProblems,
  openLab,
  openPanel,
  setPanelWidth,
  STATUS_ITEM
} from './lab';
import { ports } from '../servers.json';

const LOST_AFTER_S = 20;
let server: ChildProcess | null = null;

test.beforeAll(async () => {
  const root = path.join(__dirname, '..');
  const jupyter =
    process.env.JUPYTER || path.join(root, '..', '.venv', 'bin', 'jupyter');
  fs.mkdirSync(path.join(root, 'test-results'), { recursive: true });
  const log = fs.openSync(
    path.join(root, 'test-results', 'faults-server.log'),
    'w'
  );
  server = spawn(
    jupyter,
    [
      'lab',
      `--config=${path.join(root, 'jupyter_server_test_config.py')}`,
      '--ServerApp.ip=127.0.0.1',
      `--port=${ports.faults}`,
      '--allow-root',
      '--IdentityProvider.token=',
      '--JupyterGpu.backend=simulated',
      '--JupyterGpu.simulated_devices=2',
      `--JupyterGpu.simulated_faults=lost:1@${LOST_AFTER_S}`,
      '--JupyterGpu.simulated_faults=unsupported:0:power_w',
      '--JupyterGpu.simulated_faults=unsupported:0:processes'
    ],
    { stdio: ['ignore', log, log] }
  );
  const url = `http://127.0.0.1:${ports.faults}/jupyter-gpu/api/v1/devices`;
  const deadline = Date.now() + 60000;
  for (;;) {
    try {
      if ((await fetch(url)).ok) {
        break;
      }
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline || server.exitCode !== null) {
      throw new Error(
        'the faults server did not start: see test-results/faults-server.log'
      );
    }
    await new Promise(resolve => setTimeout(resolve, 250));
  }
});

test.afterAll(async () => {
  const child = server;
  if (child && child.exitCode === null) {
    const exited = new Promise(resolve => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
});

test('a lost GPU and a reading the GPU cannot give', async ({ page }) => {
  test.setTimeout(90000);
  await openLab(page);
  await allowNarrowSidebar(page);
  const panel = await openPanel(page);
  await expect(panel.locator('.jp-gpu-status')).toHaveText('live');
  const gpu0 = panel.locator('.jp-gpu-card[data-gpu-index="0"]');
  const gpu1 = panel.locator('.jp-gpu-card[data-gpu-index="1"]');

  // Before the loss: both GPUs read.
  await expect(gpu1).toHaveAttribute('data-state', 'ok');
  expect((await cardValues(gpu1))[0]).toMatch(/^\d+(\.\d)?%$/);
  await expect(page.locator(STATUS_ITEM)).not.toContainText('lost');

  // GPU 0's power is "Not Supported": said, not drawn as a blank or a zero.
  const power = gpu0.locator('.jp-gpu-tile[data-metric="power"]');
  await expect(power.locator('.jp-gpu-tile-value')).toHaveText('n/a');
  await expect(power.locator('.jp-gpu-tile-note')).toHaveText(
    'Not Supported (simulated)'
  );
  await expect(power.locator('.jp-gpu-chart')).toBeHidden();
  expect(await power.getAttribute('title')).toMatch(
    /^Power: Not Supported \(simulated\): this GPU or its driver does not report it/
  );
  await expect(gpu0.locator('.jp-gpu-procs-note')).toHaveText(
    'Processes: Not Supported (simulated)'
  );
  await expect(gpu0.locator('.jp-gpu-procs-empty')).toHaveCount(0);
  // The other readings of GPU 0 still read and chart.
  await expect(
    gpu0.locator('[data-metric="util"] .jp-gpu-tile-value')
  ).toHaveText(/^\d+(\.\d)?%$/);
  await expect(gpu0.locator('[data-metric="temp"] canvas')).toBeVisible();
  // The explanation fits a narrow sidebar.
  await setPanelWidth(page, 220);
  expect(await layoutProblems(page)).toEqual([]);

  // The loss, while the panel is open: that card alone says so.
  await expect(gpu1).toHaveAttribute('data-state', 'lost', {
    timeout: (LOST_AFTER_S + 15) * 1000
  });
  await expect(gpu1.locator('.jp-gpu-card-message')).toHaveText(
    /^GPU 1 is lost: Simulated fault: this GPU is reported lost/
  );
  expect(await cardValues(gpu1)).toEqual(['–', '–', '–', '–']);
  await expect(gpu0).toHaveAttribute('data-state', 'ok');
  await expect(gpu0.locator('.jp-gpu-card-message')).toBeHidden();
  await expect(page.locator(STATUS_ITEM)).toHaveText(
    /^2 GPUs · busiest GPU 0: \d+% · [\d.]+\/140 GiB · GPU 1 lost \(simulated\)$/
  );
  await expect(page.locator(STATUS_ITEM)).toHaveAttribute('data-state', 'warn');
  await expect(panel.locator('.jp-gpu-status')).toHaveText('live');

  // GPU 0 carries on: its numbers keep changing after the loss.
  const before = await cardValues(gpu0);
  await expect(async () => {
    expect(await cardValues(gpu0)).not.toEqual(before);
  }).toPass({ timeout: 6000 });
  expect(await layoutProblems(page)).toEqual([]);
  if (process.env.UPDATE_SCREENSHOTS) {
    // The shortest window (30 s), so that the charts show the moment of the loss.
    await command(page, 'settingeditor:open', { query: 'GPU monitor' });
    const field = page.locator('.jp-SettingsPanel input[id$="historyWindowS"]');
    await field.fill('30');
    await field.press('Tab');
    await expect(panel).toHaveAttribute('data-window-s', '30', {
      timeout: 10000
    });
    await page
      .locator('.lm-DockPanel-tabBar .lm-TabBar-tab', { hasText: 'Settings' })
      .locator('.lm-TabBar-tabCloseIcon')
      .click();
    await setPanelWidth(page, 300);
    await page.mouse.move(700, 500);
    await page.waitForTimeout(1500);
    await page.screenshot({
      path: '../docs/screenshot-faults.png',
      clip: { x: 0, y: 0, width: 640, height: 760 }
    });
  }
});
