/**
 * NVML that does not answer when the server starts (`JupyterGpu.simulated_faults=hang:init@0-60`,
 * as a hung `nvmlInit`): the panel says so, with the seconds counting up, and shows the host;
 * the status bar and the dashboard say the same; when NVML answers, the GPUs come in without
 * a reload. And a tab over the server's limit of stream clients (`max_stream_clients=1`):
 * it says why it has no live stream, instead of reconnecting again and again.
 */
import { expect, test } from '@playwright/test';
import { command, openLab, openPanel, STATUS_ITEM } from './lab';
import { TestServer } from './servers';
import { ports } from '../servers.json';

test.describe('NVML that hangs at start-up', () => {
  const ANSWERS_AFTER_S = 60;
  const server = new TestServer(ports.starthang, 'starthang');
  test.use({ baseURL: `http://127.0.0.1:${ports.starthang}/` });
  test.beforeAll(async () => {
    await server.start([
      '--JupyterGpu.backend=simulated',
      '--JupyterGpu.simulated_devices=2',
      `--JupyterGpu.simulated_faults=hang:init@0-${ANSWERS_AFTER_S}`,
      '--JupyterGpu.read_deadline_s=1'
    ]);
  });
  test.afterAll(async () => {
    await server.stop();
  });

  test('says NVML has not answered, shows the host, then the GPUs', async ({
    page
  }) => {
    test.setTimeout(180000);
    await openLab(page);
    const panel = await openPanel(page);
    await expect(panel.locator('.jp-gpu-status')).toHaveText('live');
    const notice = panel.locator('.jp-gpu-notice');
    await expect(notice).toHaveAttribute('data-kind', 'waiting');
    const text = notice.locator('.jp-gpu-notice-text');
    await expect(text).toHaveText(
      /^Simulated fault \(hang:init\): NVML has not answered for \d+ s: .+ The GPUs appear here when it answers, without a restart\. Host metrics are still shown\.$/
    );
    const seconds = async () =>
      Number(/for (\d+) s/.exec((await text.textContent()) ?? '')?.[1]);
    const first = await seconds();
    await expect(async () => {
      expect(await seconds()).toBeGreaterThan(first); // how long, counting up
    }).toPass({ timeout: 15000 });
    await expect(notice.locator('.jp-gpu-retry')).toBeHidden();
    // The host's readings meanwhile; no GPU card yet.
    const host = panel.locator('.jp-gpu-host-card');
    await expect(
      host.locator('[data-metric="cpu"] .jp-gpu-tile-value')
    ).toHaveText(/^\d+(\.\d)?%$/);
    await expect(panel.locator('.jp-gpu-card[data-gpu-index]')).toHaveCount(0);
    await expect(page.locator(STATUS_ITEM)).toHaveText('GPU: waiting for NVML');
    await expect(page.locator(STATUS_ITEM)).toHaveAttribute(
      'data-state',
      'warn'
    );
    await command(page, 'jupyter-gpu:dashboard');
    const empty = page.locator('.jp-gpu-dash-empty');
    await expect(empty.locator('.jp-gpu-dash-empty-title')).toHaveText(
      'Waiting for NVML'
    );
    await expect(empty.locator('.jp-gpu-dash-empty-why')).toHaveText(
      /NVML has not answered for \d+ s/
    );
    if (process.env.UPDATE_SCREENSHOTS) {
      await page.screenshot({
        path: '../docs/screenshot-nvml-wait.png',
        clip: { x: 0, y: 0, width: 1280, height: 520 }
      });
    }

    // NVML answers: the GPUs come in, named, in the panel and the dashboard; no reload.
    const cards = panel.locator('.jp-gpu-card[data-gpu-index]');
    await expect(cards).toHaveCount(2, { timeout: ANSWERS_AFTER_S * 1000 });
    await expect(notice).toHaveAttribute('data-kind', 'simulated');
    await expect(cards.first().locator('.jp-gpu-card-name')).toHaveText(
      'Simulated NVIDIA H200'
    );
    await expect(page.locator(STATUS_ITEM)).toHaveText(/^2 GPUs · /);
    await expect(empty).toBeHidden();
    await expect(page.locator('.jp-gpu-dash-row')).toHaveCount(2);
  });
});

test.describe('a tab over the limit of stream clients', () => {
  const server = new TestServer(ports.refused, 'refused');
  test.use({ baseURL: `http://127.0.0.1:${ports.refused}/` });
  test.beforeAll(async () => {
    await server.start([
      '--JupyterGpu.backend=simulated',
      '--JupyterGpu.simulated_devices=1',
      '--JupyterGpu.max_stream_clients=1'
    ]);
  });
  test.afterAll(async () => {
    await server.stop();
  });

  test('says why it has no live stream, and does not retry in a loop', async ({
    page,
    context
  }) => {
    test.setTimeout(120000);
    await openLab(page);
    const first = await openPanel(page);
    await expect(first.locator('.jp-gpu-status')).toHaveText('live');

    const second = await context.newPage();
    const sockets: string[] = [];
    second.on('websocket', ws => {
      if (ws.url().includes('jupyter-gpu/api/v1/stream')) {
        sockets.push(ws.url());
      }
    });
    await openLab(second);
    const panel = await openPanel(second);
    await expect(panel.locator('.jp-gpu-status')).toHaveText('refused');
    const notice = panel.locator('.jp-gpu-notice');
    await expect(notice).toHaveAttribute('data-kind', 'error');
    await expect(notice.locator('.jp-gpu-notice-text')).toHaveText(
      /^The server refused the live stream: this server streams to 1 client at most \(JupyterGpu\.max_stream_clients\)\. .+trying again every minute\.$/
    );
    await expect(notice.locator('.jp-gpu-retry')).toBeVisible();
    // The history came over HTTP: the card has its numbers.
    await expect(
      panel
        .locator('.jp-gpu-card[data-gpu-index="0"] .jp-gpu-tile-value')
        .first()
    ).toHaveText(/^\d+(\.\d)?%$/);
    const tried = sockets.length;
    expect(tried).toBeGreaterThanOrEqual(1);
    await second.waitForTimeout(10000); // a tight loop would have asked again and again
    expect(sockets.length).toBe(tried);
    // The first tab leaves: Retry now gets the second one a live stream.
    await page.close();
    await notice.locator('.jp-gpu-retry').click();
    await expect(panel.locator('.jp-gpu-status')).toHaveText('live', {
      timeout: 20000
    });
    await expect(notice).not.toHaveAttribute('data-kind', 'error');
  });
});
