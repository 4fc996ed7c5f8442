/**
 * A group of readings switched on reaches every view with no code of its own in the browser:
 * NVLink throughput (`JupyterGpu.nvlink_metrics`, declared once in the server's catalog and
 * in readings.generated.ts) on the simulated GPUs, whose jobs all-reduce over NVLink while
 * they train. The sidebar's cards have an NVLink line, the dashboard's rows an NVLink chart,
 * and Prometheus the DCGM series.
 */
import { expect, test } from '@playwright/test';
import { openLab, openPanel, PANEL } from './lab';
import { TestServer } from './servers';
import { ports } from '../servers.json';

const server = new TestServer(ports.nvlink, 'nvlink');
const RATE = String.raw`[\d.]+ (B|KiB|MiB|GiB)/s`;

test.beforeAll(async () => {
  test.setTimeout(120000);
  await server.start([
    '--JupyterGpu.backend=simulated',
    '--JupyterGpu.simulated_devices=2',
    '--JupyterGpu.nvlink_metrics=True',
    '--JupyterGpu.nvlink_interval_s=0.5'
  ]);
});

test.afterAll(async () => {
  await server.stop();
});

test('NVLink throughput in the sidebar, the dashboard and Prometheus', async ({
  page
}) => {
  await openLab(page);
  const panel = await openPanel(page);
  const card = panel.locator('.jp-gpu-card[data-gpu-index="0"]');
  const line = card.locator('.jp-gpu-activity[data-group="nvlink"]');
  await expect(line).toHaveText(
    new RegExp(`^NVLink tx ${RATE} · rx ${RATE}$`),
    {
      timeout: 20000
    }
  );
  expect(await line.getAttribute('title')).toMatch(/^NVLink data throughput/);
  // The GPM line is still its own.
  await expect(card.locator('.jp-gpu-activity[data-group="gpm"]')).toHaveText(
    /^SM active \d+%/
  );

  await panel.getByRole('button', { name: 'Dashboard' }).click();
  const row = page.locator('#jupyter-gpu-dashboard .jp-gpu-dash-row').first();
  const captions = row.locator('.jp-gpu-dash-caption-title');
  await expect(captions).toHaveText(
    [
      'Utilization (%)',
      'Memory used',
      'Power (W)',
      'Temperature (°C)',
      'NVLink (bytes/s)'
    ],
    { timeout: 20000 }
  );
  await expect(row.locator('.jp-gpu-dash-values')).toHaveText(
    new RegExp(`· Temp \\d+ °C · NVLink tx ${RATE} · NVLink rx ${RATE}$`)
  );

  const metrics = await (
    await fetch(`http://127.0.0.1:${ports.nvlink}/jupyter-gpu/api/v1/metrics`)
  ).text();
  expect(metrics).toMatch(/^DCGM_FI_PROF_NVLINK_TX_BYTES\{.*gpu="0".*\} \S+$/m);
  expect(metrics).toMatch(/^DCGM_FI_PROF_NVLINK_RX_BYTES\{.*gpu="1".*\} \S+$/m);
});
