/**
 * The monitor behind a real JupyterHub: log in as alice on the hub's login page, land in
 * alice's JupyterLab under /user/alice/, and see the GPU sidebar there. The hub (with
 * configurable-http-proxy, two users, a kernel each, one shared fake GPU) is started here by
 * tests/integration/hub/hubctl.py; bob's kernel must show to alice only as other users'
 * memory, never by name.
 */
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { expect, test } from '@playwright/test';
import { openPanel } from './lab';

interface IHubState {
  url: string;
  users: string[];
  password: string;
}

const ROOT = path.join(__dirname, '..', '..');
const STATE = path.join(__dirname, '..', 'test-results', 'hub-state.json');
let hub: ChildProcess | null = null;
let state: IHubState;

test.beforeAll(async () => {
  test.setTimeout(300000);
  const python =
    process.env.PYTHON || path.join(ROOT, '.venv', 'bin', 'python');
  fs.mkdirSync(path.dirname(STATE), { recursive: true });
  fs.rmSync(STATE, { force: true });
  const log = fs.openSync(STATE.replace('.json', '.log'), 'w');
  hub = spawn(python, ['-m', 'tests.integration.hub.hubctl', STATE], {
    cwd: ROOT,
    env: { ...process.env, PYTHONPATH: ROOT },
    stdio: ['ignore', log, log]
  });
  const deadline = Date.now() + 280000;
  while (!fs.existsSync(STATE)) {
    if (hub.exitCode !== null || Date.now() > deadline) {
      throw new Error(
        'the hub did not start: see ui-tests/test-results/hub-state.log'
      );
    }
    await new Promise(resolve => setTimeout(resolve, 500));
  }
  state = JSON.parse(fs.readFileSync(STATE, 'utf8'));
});

test.afterAll(async () => {
  if (hub && hub.exitCode === null) {
    const exited = new Promise(resolve => hub?.once('exit', resolve));
    hub.kill('SIGTERM');
    await Promise.race([
      exited,
      new Promise(resolve => setTimeout(resolve, 60000))
    ]);
  }
});

test('alice logs in on the hub and sees the GPU sidebar under /user/alice/', async ({
  page
}) => {
  test.setTimeout(180000);
  await page.goto(`${state.url}/hub/login`);
  await page.locator('#username_input').fill('alice');
  await page.locator('#password_input').fill(state.password);
  await page.locator('#login_submit').click();
  await page.waitForURL(/\/user\/alice\/lab/, { timeout: 120000 });
  await page
    .locator('#jupyterlab-splash')
    .waitFor({ state: 'detached', timeout: 60000 });
  // Every hub user here runs as root, so they share one JupyterLab workspace: the layout
  // may open the sidebar already.
  const panel = await openPanel(page);
  const card = panel.locator('.jp-gpu-card[data-gpu-index="0"]');
  await expect(card).toContainText('Fake NVIDIA H200', { timeout: 30000 });
  // Her own kernel by its notebook; bob's only as other users' memory.
  const procs = card.locator('.jp-gpu-procs');
  await expect(procs).toContainText('alice-train', { timeout: 30000 });
  await expect(procs).toContainText("other users' processes");
  await expect(procs).not.toContainText('bob');
  await expect(panel.locator('.jp-gpu-status')).toHaveText('live');
  // The API the page used lives under alice's prefix on the hub's proxy.
  expect(page.url()).toContain(`${state.url}/user/alice/lab`);
});
