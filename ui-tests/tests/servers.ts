/**
 * Jupyter servers that a test starts and stops itself (its faults run on its clock, or it
 * restarts the server): the test config of playwright.config.js, a port, extra options.
 */
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

const ROOT = path.join(__dirname, '..');

export class TestServer {
  constructor(
    readonly port: number,
    readonly name: string
  ) {}

  /** Start with `args` (JupyterGpu options) and wait until the API answers. */
  async start(args: string[]): Promise<void> {
    const jupyter =
      process.env.JUPYTER || path.join(ROOT, '..', '.venv', 'bin', 'jupyter');
    fs.mkdirSync(path.join(ROOT, 'test-results'), { recursive: true });
    const log = fs.openSync(
      path.join(ROOT, 'test-results', `${this.name}-server.log`),
      'a'
    );
    this._child = spawn(
      jupyter,
      [
        'lab',
        `--config=${path.join(ROOT, 'jupyter_server_test_config.py')}`,
        '--ServerApp.ip=127.0.0.1',
        `--port=${this.port}`,
        '--allow-root',
        '--IdentityProvider.token=',
        ...args
      ],
      { stdio: ['ignore', log, log] }
    );
    const url = `http://127.0.0.1:${this.port}/jupyter-gpu/api/v1/devices`;
    const deadline = Date.now() + 90000;
    for (;;) {
      try {
        if ((await fetch(url)).ok) {
          return;
        }
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline || this._child.exitCode !== null) {
        throw new Error(
          `the ${this.name} server did not start: see test-results/${this.name}-server.log`
        );
      }
      await new Promise(resolve => setTimeout(resolve, 250));
    }
  }

  /** Stop it (SIGTERM) and wait until it has exited. */
  async stop(): Promise<void> {
    const child = this._child;
    this._child = null;
    if (child && child.exitCode === null) {
      const exited = new Promise(resolve => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
  }

  private _child: ChildProcess | null = null;
}
