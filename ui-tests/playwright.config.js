/**
 * Browser tests of the jupyter-gpu monitor: Playwright driving Debian's chromium against real
 * Jupyter servers, one per project:
 *   simulated  the simulated backend with 2 devices, under a JupyterHub-style base URL
 *   layout     the same, a server of its own (its tests change the settings, as simulated's do)
 *   tune       the same, a server of its own: %tune runs a CPU kernel there
 *   nogpu      the default backend on a machine without a GPU, behind a token (a real login)
 *   faults     the simulated backend with faults on a schedule (started by the test itself)
 *   dashboard  the simulated backend with 2 h of seeded past, faults, a restart (started by
 *              the tests themselves)
 *   perf       the simulated backend with 8 devices at 1 Hz and 24 h of seeded past: the cost
 *              of one update, the dashboard's opening
 *   data       the simulated backend with prepared cache dirs (started by the test itself)
 *   nvmlstart  the simulated backend hung at start-up, and one that streams to one client
 *              (started by the tests themselves)
 *   nvlink     the simulated backend with NVLink throughput on (started by the test itself)
 */
const path = require('path');
const { ports, token, baseUrl } = require('./servers.json');

// CI's venv is <repo>/.venv (made by .ci/setup); JUPYTER overrides it.
const jupyter =
  process.env.JUPYTER || path.join(__dirname, '..', '.venv', 'bin', 'jupyter');
const config = path.join(__dirname, 'jupyter_server_test_config.py');

function server(port, base, args) {
  return {
    command: [
      jupyter,
      'lab',
      `--config=${config}`,
      '--ServerApp.ip=127.0.0.1',
      `--port=${port}`,
      `--ServerApp.base_url=${base}`,
      '--allow-root',
      ...args
    ].join(' '),
    url: `http://127.0.0.1:${port}${base}api`,
    reuseExistingServer: false,
    timeout: 120000,
    // SIGTERM, not Playwright's default SIGKILL: Jupyter exits cleanly, and the config's atexit
    // hooks remove the server's scratch folders (a killed server left them in /tmp).
    gracefulShutdown: { signal: 'SIGTERM', timeout: 5000 },
    stdout: 'ignore',
    stderr: process.env.UI_TESTS_SERVER_LOGS ? 'pipe' : 'ignore'
  };
}

module.exports = {
  testDir: './tests',
  outputDir: './test-results',
  timeout: 60000,
  // A web-first assertion waits for its condition until this deadline: on 2 busy cores (the
  // Python tests run beside these) a panel took more than Playwright's default 5 s to go live.
  expect: { timeout: 15000 },
  retries: 0,
  // Two files at a time (alone they keep 2 cores 72 % busy: 598 s of CPU in 416 s, 2026-12-07,
  // tests/README.md). So a file that changes its server's state (the settings, the kernels it
  // starts, a cache it clears, a restart) has a server of its own: no two files running at
  // once share one that way (tests/README.md). PERF_ASSERT=1 (the budgets, on a quiet machine)
  // runs one file at a time, so that no other file's page shares the cores.
  workers: process.env.PERF_ASSERT === '1' ? 1 : 2,
  reporter: [['list'], ['json', { outputFile: 'test-results/results.json' }]],
  use: {
    viewport: { width: 1280, height: 800 },
    launchOptions: {
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run'
      ]
    },
    trace: 'off',
    video: 'off',
    screenshot: 'only-on-failure'
  },
  projects: [
    {
      name: 'simulated',
      testMatch: /simulated\.spec\.ts/,
      use: { baseURL: `http://127.0.0.1:${ports.simulated}${baseUrl}` }
    },
    {
      name: 'layout',
      testMatch: /layout\.spec\.ts/,
      use: { baseURL: `http://127.0.0.1:${ports.layout}${baseUrl}` }
    },
    {
      // %tune runs a kernel on its own server: its cells and CPU load stay out of the others'.
      name: 'tune',
      testMatch: /tune\.spec\.ts/,
      use: { baseURL: `http://127.0.0.1:${ports.tune}${baseUrl}` }
    },
    {
      name: 'nogpu',
      testMatch: /nogpu\.spec\.ts/,
      use: { baseURL: `http://127.0.0.1:${ports.nogpu}/` }
    },
    {
      // Its server starts in the test (tests/faults.spec.ts): the faults run on its clock.
      name: 'faults',
      testMatch: /faults\.spec\.ts/,
      use: { baseURL: `http://127.0.0.1:${ports.faults}/` }
    },
    {
      // The hub (and its users' servers) starts in the test (tests/hub.spec.ts).
      name: 'hub',
      testMatch: /hub\.spec\.ts/
    },
    {
      // Its server starts in the test (tests/data.spec.ts), with cache dirs made for it.
      name: 'data',
      testMatch: /data\.spec\.ts/
    },
    {
      // Its servers start in the tests (tests/nvmlstart.spec.ts): NVML that hangs at start,
      // a limit of one stream client.
      name: 'nvmlstart',
      testMatch: /nvmlstart\.spec\.ts/
    },
    {
      name: 'hang',
      testMatch: /hang\.spec\.ts/,
      use: { baseURL: `http://127.0.0.1:${ports.hang}/` }
    },
    {
      // Its servers start in the tests (tests/dashboard.spec.ts): seeded history, faults on
      // their clock, a restart.
      name: 'dashboard',
      testMatch: /dashboard\.spec\.ts/,
      use: { baseURL: `http://127.0.0.1:${ports.dashboard}/` }
    },
    {
      // Its server starts in the test (tests/nvlink.spec.ts): NVLink throughput switched on.
      name: 'nvlink',
      testMatch: /nvlink\.spec\.ts/,
      use: { baseURL: `http://127.0.0.1:${ports.nvlink}/` }
    },
    {
      name: 'perf',
      testMatch: /perf\.spec\.ts/,
      use: { baseURL: `http://127.0.0.1:${ports.perf}/` }
    }
  ],
  // UI_TESTS_NO_SERVERS=1: only the projects that start their own servers (faults, hub).
  webServer: process.env.UI_TESTS_NO_SERVERS
    ? []
    : [
        server(ports.simulated, baseUrl, [
          '--IdentityProvider.token=',
          '--JupyterGpu.backend=simulated',
          '--JupyterGpu.simulated_devices=2'
        ]),
        server(ports.layout, baseUrl, [
          '--IdentityProvider.token=',
          '--JupyterGpu.backend=simulated',
          '--JupyterGpu.simulated_devices=2'
        ]),
        server(ports.tune, baseUrl, [
          '--IdentityProvider.token=',
          '--JupyterGpu.backend=simulated',
          '--JupyterGpu.simulated_devices=2'
        ]),
        server(ports.nogpu, '/', [
          `--IdentityProvider.token=${token}`,
          '--JupyterGpu.backend=auto'
        ]),
        // GPU 1's NVML reads hang from the start (a hung driver): it is "not responding".
        server(ports.hang, '/', [
          '--IdentityProvider.token=',
          '--JupyterGpu.backend=simulated',
          '--JupyterGpu.simulated_devices=2',
          '--JupyterGpu.simulated_faults=hang:1',
          '--JupyterGpu.read_deadline_s=0.5'
        ]),
        server(ports.perf, '/', [
          '--IdentityProvider.token=',
          '--JupyterGpu.backend=simulated',
          '--JupyterGpu.simulated_devices=8',
          '--JupyterGpu.interval_s=1',
          // 24 h of synthetic past (labelled simulated), for the dashboard's long ranges
          '--JupyterGpu.simulated_seed_history_s=86400'
        ])
      ]
};
