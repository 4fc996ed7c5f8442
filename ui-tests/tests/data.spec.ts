/**
 * The process table's kernel actions, the compile-cache "Clear…" action and its safety, and the
 * `%gpu --watch` widget, on a real Jupyter server started here (simulated backend, one GPU).
 *
 * The server's TORCHINDUCTOR_CACHE_DIR holds files named and placed as torch writes them (a
 * generated module `<key[1:3]>/<key>.py`, an FX graph `fxgraph/<2>/f<hash>/<hash>`), so it is
 * recognised and can be cleared; its TRITON_CACHE_DIR is itself a symlink to a folder outside:
 * refused, and the outside folder stays whole. (A link or a stray file inside a cache gets the
 * whole folder refused, with its path: the server's own tests, tests/integration, check those.)
 * Any idle kernel holding any memory counts as an idle holder here (idle_holder_minutes=0,
 * idle_holder_gib=0), so the flag shows at once.
 */
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { APIRequestContext, expect, Page, test } from '@playwright/test';
import { command, newNotebook, openPanel, PANEL_TAB, runCell } from './lab';
import { ports } from '../servers.json';

/** As lab.ts's openLab, with room for a busy machine (this server started moments ago). */
async function openLab(page: Page): Promise<void> {
  await page.goto('lab');
  await page
    .locator('#jupyterlab-splash')
    .waitFor({ state: 'detached', timeout: 60000 });
  await expect(page.locator(PANEL_TAB)).toBeVisible({ timeout: 30000 });
}

const PORT = ports.data; // its own: another file may run beside this one
const BASE = `http://127.0.0.1:${PORT}/`;
let server: ChildProcess | null = null;
let tmp = '';

function cachePaths() {
  return {
    inductor: path.join(tmp, 'torchinductor_uitest'),
    tritonLink: path.join(tmp, 'triton_link'),
    outside: path.join(tmp, 'precious')
  };
}

test.beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'jupyter-gpu-ui-data-'));
  const { inductor, tritonLink, outside } = cachePaths();
  // torch's keys: base32 (a-z, 2-7) of a SHA-256, 51 characters after a one-letter kind.
  const hash = (letter: string) => letter.repeat(51);
  const graphDir = path.join(inductor, 'fxgraph', 'ab', `f${hash('a')}`);
  fs.mkdirSync(graphDir, { recursive: true });
  fs.writeFileSync(path.join(graphDir, hash('b')), 'g'.repeat(4096));
  const codeKey = `cxy${'c'.repeat(49)}`; // lives in <key[1:3]>/
  fs.mkdirSync(path.join(inductor, 'xy'));
  fs.writeFileSync(
    path.join(inductor, 'xy', `${codeKey}.py`),
    'p'.repeat(1000)
  );
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(outside, 'thesis.tex'), 't'.repeat(5000));
  fs.symlinkSync(outside, tritonLink); // a cache dir that is itself a link

  const root = path.join(__dirname, '..');
  const jupyter =
    process.env.JUPYTER || path.join(root, '..', '.venv', 'bin', 'jupyter');
  fs.mkdirSync(path.join(root, 'test-results'), { recursive: true });
  const log = fs.openSync(
    path.join(root, 'test-results', 'data-server.log'),
    'w'
  );
  server = spawn(
    jupyter,
    [
      'lab',
      `--config=${path.join(root, 'jupyter_server_test_config.py')}`,
      '--ServerApp.ip=127.0.0.1',
      `--port=${PORT}`,
      '--allow-root',
      '--IdentityProvider.token=',
      '--JupyterGpu.backend=simulated',
      '--JupyterGpu.simulated_devices=1',
      '--JupyterGpu.cache_scan_interval_s=1',
      '--JupyterGpu.kernel_map_interval_s=0.5',
      '--JupyterGpu.idle_holder_minutes=0',
      '--JupyterGpu.idle_holder_gib=0'
    ],
    {
      stdio: ['ignore', log, log],
      env: {
        ...process.env,
        TORCHINDUCTOR_CACHE_DIR: inductor,
        TRITON_CACHE_DIR: tritonLink,
        // torch's default Inductor folder (TMPDIR/torchinductor_<user>) is listed beside a
        // configured one; here it is under the scratch folder, absent, so not the machine's.
        TMPDIR: tmp
      }
    }
  );
  const deadline = Date.now() + 90000;
  for (;;) {
    try {
      if ((await fetch(`${BASE}jupyter-gpu/api/v1/devices`)).ok) {
        break;
      }
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline || server.exitCode !== null) {
      throw new Error(
        'the data server did not start: see test-results/data-server.log'
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
  if (tmp) {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test.use({ baseURL: BASE });

/** The `_xsrf` cookie JupyterLab got, to send as X-XSRFToken (as ServerConnection does). */
async function xsrf(page: Page): Promise<string> {
  const cookies = await page.context().cookies();
  const cookie = cookies.find(c => c.name === '_xsrf');
  expect(cookie, 'JupyterLab sets an _xsrf cookie').toBeTruthy();
  return cookie!.value;
}

async function post(
  request: APIRequestContext,
  route: string,
  body: object,
  token: string | null
) {
  return request.post(`${BASE}${route}`, {
    data: JSON.stringify(body),
    headers: {
      'Content-Type': 'application/json',
      ...(token ? { 'X-XSRFToken': token } : {})
    }
  });
}

test('shuts down a kernel from the process table, after confirming', async ({
  page
}) => {
  await openLab(page);
  const token = await xsrf(page);
  const created = await post(
    page.request,
    'api/sessions',
    {
      path: 'holder.ipynb',
      type: 'notebook',
      name: '',
      kernel: { name: 'python3' }
    },
    token
  );
  expect(created.ok()).toBeTruthy();
  const kernelId = (await created.json()).kernel.id as string;
  const panel = await openPanel(page);
  const table = panel.getByRole('region', { name: 'GPU processes' });
  const row = table.locator(`tr[data-kernel-id="${kernelId}"]`);
  await expect(row).toBeVisible({ timeout: 30000 });
  await expect(row.locator('.jp-gpu-proc-notebook')).toHaveText('holder');
  await expect(row.locator('.jp-gpu-proc-memory')).toHaveText(
    /(MiB|GiB) \(simulated\)$/
  );
  await expect(row.locator('.jp-gpu-idle-badge')).toHaveText('idle holder');
  await expect(row.locator('.jp-gpu-proc-idle')).toHaveText(/^idle \d+ s/);

  // Cancel first: nothing happens.
  await row
    .getByRole('button', { name: /^Shut down the kernel of holder/ })
    .click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toContainText('Shut down the kernel of holder?');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await expect(dialog).toBeHidden();
  let kernels = await (await page.request.get(`${BASE}api/kernels`)).json();
  expect(kernels.map((k: { id: string }) => k.id)).toContain(kernelId);

  await row
    .getByRole('button', { name: /^Shut down the kernel of holder/ })
    .click();
  await dialog.getByRole('button', { name: 'Shut Down' }).click();
  await expect(row).toHaveCount(0, { timeout: 30000 });
  kernels = await (await page.request.get(`${BASE}api/kernels`)).json();
  expect(kernels.map((k: { id: string }) => k.id)).not.toContain(kernelId);
});

test('cache clear: refused without XSRF, for paths and for a symlink escape; clears with confirmation', async ({
  page
}) => {
  const { inductor, outside } = cachePaths();
  await openLab(page);
  const panel = await openPanel(page);
  const caches = panel.getByRole('region', { name: 'torch.compile caches' });
  const inductorRow = caches.locator('[data-cache-kind="inductor"]');
  const tritonRow = caches.locator('[data-cache-kind="triton"]');
  await expect(inductorRow).toBeVisible({ timeout: 30000 });
  await expect(inductorRow.locator('.jp-gpu-cache-size')).toHaveText('5.0 KiB');
  await expect(inductorRow.locator('.jp-gpu-cache-free')).toHaveText(/free of/);
  const inductorId = await inductorRow.getAttribute('data-cache-id');
  expect(inductorId).toMatch(/^[0-9a-f]{12}$/);

  // No XSRF token: jupyter_server refuses the POST before our handler runs.
  const noXsrf = await post(
    page.request,
    'jupyter-gpu/api/v1/compile-cache/clear',
    { id: inductorId },
    null
  );
  expect(noXsrf.status()).toBe(403);
  const token = await xsrf(page);
  // A path in the request is refused, whatever it names.
  const byPath = await post(
    page.request,
    'jupyter-gpu/api/v1/compile-cache/clear',
    { path: outside },
    token
  );
  expect(byPath.status()).toBe(400);
  // The Triton cache dir is a symlink out: its button is disabled, and the API says no.
  const tritonButton = tritonRow.getByRole('button', {
    name: /^Clear the triton cache/
  });
  await expect(tritonButton).toBeDisabled();
  await expect(tritonButton).toHaveAttribute('title', /symlink/);
  const tritonId = await tritonRow.getAttribute('data-cache-id');
  const escape = await post(
    page.request,
    'jupyter-gpu/api/v1/compile-cache/clear',
    { id: tritonId },
    token
  );
  expect(escape.status()).toBe(409);
  expect(
    fs.readFileSync(path.join(outside, 'thesis.tex'), 'utf8')
  ).toHaveLength(5000);

  // The real thing, through the button and its confirmation.
  await inductorRow
    .getByRole('button', { name: /^Clear the inductor cache/ })
    .click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toContainText('Clear the torch.compile cache?');
  await dialog.getByRole('button', { name: 'Clear' }).click();
  await expect(caches.getByRole('status')).toHaveText(
    /^Cleared .*torchinductor_uitest: freed 5\.0 KiB in 2 files\.$/
  );
  expect(fs.readdirSync(inductor)).toEqual([]);
  expect(
    fs.readFileSync(path.join(outside, 'thesis.tex'), 'utf8')
  ).toHaveLength(5000);
  await expect(inductorRow.locator('.jp-gpu-cache-size')).toHaveText('0 B', {
    timeout: 15000
  });
  // Empty now: nothing to clear, and the greyed button's tooltip says so.
  const emptied = inductorRow.getByRole('button', {
    name: /^Clear the inductor cache/
  });
  await expect(emptied).toBeDisabled();
  await expect(emptied).toHaveAttribute(
    'title',
    /^Nothing to clear: .* \(0 B\)\.$/
  );
});

test('the cache row says why a folder cannot be cleared, beside its greyed button', async ({
  page
}) => {
  await openLab(page);
  const panel = await openPanel(page);
  const caches = panel.getByRole('region', { name: 'torch.compile caches' });
  // TRITON_CACHE_DIR is a symlink out of it: the server refuses to clear it, and says why.
  const row = caches.locator('[data-cache-kind="triton"]');
  await expect(row).toBeVisible({ timeout: 30000 });
  const id = await row.getAttribute('data-cache-id');
  const snapshot = await (
    await page.request.get(`${BASE}jupyter-gpu/api/v1/snapshot`)
  ).json();
  const dir = snapshot.compile_cache.dirs.find(
    (d: { id: string }) => d.id === id
  );
  expect(dir.clearable).toBe(false);
  expect(dir.refusal).toBeTruthy();
  const button = row.getByRole('button', { name: /^Clear the triton cache/ });
  await expect(button).toBeDisabled();
  // The server's sentence, in the row itself (not only in the button's tooltip), read out
  // with the button.
  const reason = row.locator('.jp-gpu-cache-refusal');
  await expect(reason).toBeVisible();
  await expect(reason).toHaveText(`Cannot be cleared: ${dir.refusal}`);
  await expect(button).toHaveAttribute(
    'aria-describedby',
    (await reason.getAttribute('id'))!
  );
  // Beside the button (after it on its line, or under it), within the panel. The three boxes
  // are read again until they agree: the section is drawn anew after each cache scan (every
  // second here), and a box read between two draws is null (seen once beside the Python tests).
  await expect(async () => {
    const [b, r, p] = [
      await button.boundingBox(),
      await reason.boundingBox(),
      await panel.boundingBox()
    ];
    expect(
      b && r && p,
      'the button, its reason and the panel are drawn'
    ).toBeTruthy();
    expect(
      r!.x >= b!.x + b!.width - 0.5 || r!.y >= b!.y + b!.height - 0.5
    ).toBe(true);
    expect(r!.y).toBeLessThan(b!.y + b!.height + 40);
    expect(r!.x + r!.width).toBeLessThanOrEqual(p!.x + p!.width + 0.5);
  }).toPass({ timeout: 15000 });
  // A folder that can be cleared has no such line.
  await expect(
    caches.locator('[data-cache-kind="inductor"] .jp-gpu-cache-refusal')
  ).toHaveCount(0);
});

test('%gpu --watch updates its widget in the notebook output, and stops when cleared', async ({
  page
}) => {
  // A new kernel, ipywidgets and the first NVML read: on a loaded 2-core CI machine the
  // first output alone has taken most of the default minute.
  test.setTimeout(180000);
  await openLab(page);
  const notebook = await newNotebook(page);
  await runCell(
    notebook,
    0,
    '%load_ext jupyter_gpu\nw = %gpu --watch --interval 0.3 -o'
  );
  const widget = notebook.locator('.widget-html').first();
  await expect(widget).toContainText('Simulated NVIDIA H200 (simulated)', {
    timeout: 60000
  });
  await expect(widget).toContainText(/live, updated \d\d:\d\d:\d\d/);
  const first = await widget.innerText();
  await expect
    .poll(async () => widget.innerText(), { timeout: 15000 })
    .not.toBe(first); // the kernel thread keeps updating it
  // The server is simulated, so the kernel's %gpu is too (JUPYTER_GPU_BACKEND).
  await expect(widget).toContainText('SM ');

  // Clear that output: the widget's view goes away, and the watch stops by itself.
  await notebook.locator('.jp-Cell').first().click();
  await command(page, 'notebook:clear-cell-output');
  await expect(notebook.locator('.widget-html')).toHaveCount(0);
  await runCell(
    notebook,
    1,
    'import time; time.sleep(1.5); print("watch", w.running, w.stopped_because)'
  );
  await expect(notebook.locator('.jp-OutputArea-output').last()).toHaveText(
    'watch False its output was cleared',
    { timeout: 30000 }
  );
});
