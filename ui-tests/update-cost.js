/**
 * The GPU monitor's cost per update against a running JupyterLab, for before/after
 * comparisons (figures in benchmarks/RESULTS.md). Opens the panel in Debian's chromium, then
 * reads the `jupyter-gpu:update` measures over a few windows, and times the same render
 * repeated back to back in the page.
 *
 *   jupyter lab --config=ui-tests/jupyter_server_test_config.py --port=8933 \
 *       --IdentityProvider.token= --JupyterGpu.backend=simulated \
 *       --JupyterGpu.simulated_devices=8 &      # let it run for the history window (5 min)
 *   node ui-tests/update-cost.js http://127.0.0.1:8933/ [windows=3] [seconds=30]
 *
 * Prints one line per window (updates, median, p90, max, 1-minute load average) and the
 * totals. To compare with an older version, build it elsewhere (`jlpm build` in a copy) and
 * swap its jupyter_gpu/labextension in between runs: the page loads what is on disk.
 */
const os = require('os');
const { chromium } = require('playwright');

const [base = 'http://127.0.0.1:8933/', windowsArg = '3', secondsArg = '30'] =
  process.argv.slice(2);
const windows = Number(windowsArg);
const seconds = Number(secondsArg);

const quantile = (sorted, q) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const line = d =>
  `n=${d.length} median ${quantile(d, 0.5).toFixed(2)} ms, p90 ${quantile(d, 0.9).toFixed(2)} ms, ` +
  `max ${d[d.length - 1].toFixed(2)} ms, mean ${(d.reduce((a, b) => a + b, 0) / d.length).toFixed(2)} ms`;

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu']
  });
  const page = await browser.newPage({
    viewport: { width: 1280, height: 800 }
  });
  await page.goto(new URL('lab', base).href);
  await page
    .locator('#jupyterlab-splash')
    .waitFor({ state: 'detached', timeout: 30000 });
  await page.locator('.jp-SideBar [data-id="jupyter-gpu-panel"]').click();
  await page.waitForTimeout(4000); // charts created, first layout done
  const samples = await page
    .locator('#jupyter-gpu-panel')
    .getAttribute('data-samples');
  console.log(`${samples} samples per chart, chromium ${browser.version()}`);
  const all = [];
  for (let w = 0; w < windows; w++) {
    await page.evaluate(() => performance.clearMeasures('jupyter-gpu:update'));
    await page.waitForTimeout(seconds * 1000);
    const d = (
      await page.evaluate(() =>
        performance.getEntriesByName('jupyter-gpu:update').map(e => e.duration)
      )
    ).sort((a, b) => a - b);
    all.push(...d);
    console.log(
      `window ${w + 1}: ${line(d)}, load ${os.loadavg()[0].toFixed(2)}`
    );
  }
  all.sort((a, b) => a - b);
  console.log(`all: ${line(all)}`);
  // The same render again and again (warm, no new data, no layout in between).
  const loop = await page.evaluate(() => {
    const panel = [...window.jupyterapp.shell.widgets('left')].find(
      w => w.id === 'jupyter-gpu-panel'
    );
    const d = [];
    for (let i = 0; i < 200; i++) {
      const t = performance.now();
      panel._render(); // private: the benchmark calls it directly
      d.push(performance.now() - t);
    }
    return d.sort((a, b) => a - b);
  });
  console.log(`back to back: ${line(loop)}`);
  await browser.close();
}

main().catch(err => {
  console.error(err);
  process.exit(1);
});
