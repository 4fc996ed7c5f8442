/**
 * The full table of GPU processes: GPU, pid, memory, notebook, idle time, and the kernel
 * actions (open the notebook, interrupt or shut down its kernel). One module with a small
 * render API, so the sidebar and the dashboard show the same table:
 *
 *     const table = new ProcessTable(actions);
 *     parent.append(table.node);
 *     table.update(model.latest);   // cheap when nothing changed
 *
 * Actions come from outside (`kernelactions.ts` in JupyterLab: confirmation dialogs and the
 * normal kernel API); without them the table only shows. In a narrow panel each row is a small
 * card (the notebook and its memory, then GPU, pid and idle time, then the actions: CSS
 * container queries on the table's own width), so that it never gets wider than the panel and
 * every row keeps its actions in reach. A GPU whose readings are stale lists the processes it
 * last reported, greyed. Idle holders (kernels idle for long
 * while holding GPU memory, flagged by the server) are marked; memory on a simulated server is
 * labelled simulated, since the simulated backend puts made-up memory on real kernels.
 */
import { el, setText } from './dom';
import { formatBytes, formatDuration, notebookLabel } from './format';
import { summaryLabel } from './processes';
import { trans } from './i18n';
import type { GpuMonitorModel } from './model';
import { IGpuProcess, ISample } from './types';

/** What the table's buttons do; each returns when done (or the person said no). */
export interface IProcessActions {
  openNotebook?(path: string): void;
  interruptKernel?(kernelId: string, label: string): Promise<void>;
  shutdownKernel?(kernelId: string, label: string): Promise<void>;
}

/** One row: a process on one GPU. */
export interface IProcessRow {
  gpu: number;
  process: IGpuProcess;
  /** From the last live reading of a GPU whose readings are stale now. */
  stale?: boolean;
}

/** What the table asks the model about a GPU whose readings are stale. */
export type IProcessReadings = Pick<GpuMonitorModel, 'freshness' | 'lastLive'>;

/**
 * Every process of every GPU, biggest memory first; for a GPU whose readings are stale (with
 * `readings`), the processes it last reported, marked `stale`.
 */
export function processRows(
  sample: ISample | null,
  readings?: IProcessReadings
): IProcessRow[] {
  const rows: IProcessRow[] = [];
  for (const device of sample?.devices ?? []) {
    const stale = readings?.freshness(device.index).fast.stale ?? false;
    const processes = stale
      ? readings?.lastLive(device.index)?.device.processes
      : device.processes;
    for (const process of processes ?? []) {
      rows.push({ gpu: device.index, process, stale });
    }
  }
  return rows.sort(
    (a, b) =>
      (b.process.used_mem_bytes ?? 0) - (a.process.used_mem_bytes ?? 0) ||
      a.gpu - b.gpu
  );
}

/** "idle 17 min", "busy", or "" for processes that are not this server's kernels. */
export function idleText(process: IGpuProcess): string {
  const idle = process.idle_s;
  if (idle === null || idle === undefined) {
    return '';
  }
  return idle === 0
    ? trans.__('busy')
    : trans.__('idle %1', formatDuration(idle));
}

/** The column headers (a function: the translator is set after this module loads). */
const headers = () => [
  trans.__('GPU'),
  trans.__('pid'),
  trans.__('memory'),
  trans.__('notebook'),
  trans.__('idle'),
  ''
];

export class ProcessTable {
  constructor(actions: IProcessActions = {}) {
    this._actions = actions;
    this.node = el('div', 'jp-gpu-proctable');
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', trans.__('GPU processes'));
    const title = el('div', 'jp-gpu-proctable-title', trans.__('Processes'));
    this._table = el('table', 'jp-gpu-proctable-table');
    const head = el('tr', '');
    for (const h of headers()) {
      head.append(el('th', '', h));
    }
    const thead = el('thead', '');
    thead.append(head);
    this._body = el('tbody', '');
    this._table.append(thead, this._body);
    this._empty = el(
      'div',
      'jp-gpu-proctable-empty',
      trans.__('No GPU processes')
    );
    this.node.append(title, this._table, this._empty);
  }

  readonly node: HTMLDivElement;

  /**
   * Show the processes of `sample` (those last read of a stale GPU, with `readings`); rebuilds
   * the rows only when one of them changed.
   */
  update(sample: ISample | null, readings?: IProcessReadings): void {
    const rows = processRows(sample, readings);
    const simulated = !!sample?.simulated;
    let key = simulated ? 's' : 'r';
    for (const { gpu, process: p, stale } of rows) {
      // The idle time as shown: past 90 s it changes once a minute, not every second.
      const idle = idleText(p);
      key += `\0${gpu}\0${p.pid}\0${p.used_mem_bytes}\0${p.kernel_id}\0${p.notebook}\0${idle}\0${p.idle_holder}\0${p.name}\0${stale}`;
    }
    if (key === this._key) {
      return;
    }
    this._key = key;
    this._empty.hidden = rows.length > 0;
    this._table.hidden = rows.length === 0;
    this._body.replaceChildren(...rows.map(r => this._row(r, simulated)));
  }

  private _row(row: IProcessRow, simulated: boolean): HTMLTableRowElement {
    const p = row.process;
    const tr = el('tr', 'jp-gpu-proc-row');
    tr.dataset.pid = String(p.pid);
    if (p.kernel_id) {
      tr.dataset.kernelId = p.kernel_id;
    }
    if (p.idle_holder) {
      tr.classList.add('jp-gpu-idle-holder');
    }
    if (row.stale) {
      tr.classList.add('jp-gpu-mod-stale');
      tr.title = trans.__(
        'GPU %1 has stopped reporting: its processes as it last read them.',
        row.gpu
      );
    }
    const memory =
      p.used_mem_bytes === null
        ? trans.__('unknown')
        : simulated
          ? trans.__('%1 (simulated)', formatBytes(p.used_mem_bytes))
          : formatBytes(p.used_mem_bytes);
    const memCell = el('td', 'jp-gpu-proc-memory', memory);
    if (simulated) {
      memCell.title = trans.__(
        'Simulated: the simulated backend puts made-up GPU memory on this server’s kernels.'
      );
    }
    const label = p.notebook
      ? notebookLabel(p.notebook)
      : p.kernel_id
        ? trans.__('kernel %1', p.kernel_id.slice(0, 8))
        : p.pid === null
          ? summaryLabel(p)
          : (p.name ?? trans.__('other process'));
    const nbCell = el('td', 'jp-gpu-proc-notebook');
    const open = this._actions.openNotebook;
    if (p.notebook && open) {
      const notebook = p.notebook;
      const button = el('button', 'jp-gpu-proc-open', label);
      button.title = trans.__('Open %1', notebook);
      button.addEventListener('click', () => open(notebook));
      nbCell.append(button);
    } else {
      setText(nbCell, label);
      nbCell.title = p.notebook ?? p.name ?? '';
    }
    const idleCell = el('td', 'jp-gpu-proc-idle', idleText(p));
    if (p.idle_holder) {
      const badge = el('span', 'jp-gpu-idle-badge', trans.__('idle holder'));
      badge.title = trans.__(
        'This kernel has been idle for long while holding GPU memory others could use.'
      );
      idleCell.append(' ', badge);
    }
    const actions = el('td', 'jp-gpu-proc-actions');
    const kernelId = p.kernel_id;
    if (kernelId) {
      const { interruptKernel, shutdownKernel } = this._actions;
      if (interruptKernel) {
        actions.append(
          this._button(
            trans.__('Interrupt'),
            trans.__('Interrupt the kernel of %1', label),
            () => interruptKernel(kernelId, label)
          )
        );
      }
      if (shutdownKernel) {
        actions.append(
          this._button(
            trans.__('Shut down'),
            trans.__(
              'Shut down the kernel of %1 (frees its GPU memory)',
              label
            ),
            () => shutdownKernel(kernelId, label)
          )
        );
      }
    }
    // As a card (a narrow panel), the GPU and the pid say what they are (CSS shows the label).
    const gpuCell = el('td', 'jp-gpu-proc-gpu', String(row.gpu));
    gpuCell.dataset.label = trans.__('GPU');
    // A row that stands for processes nobody here may name has no pid (not "null").
    const pidCell = el(
      'td',
      'jp-gpu-proc-pid',
      p.pid === null ? '–' : String(p.pid)
    );
    pidCell.dataset.label = trans.__('pid');
    tr.append(gpuCell, pidCell, memCell, nbCell, idleCell, actions);
    return tr;
  }

  private _button(
    text: string,
    label: string,
    run: () => Promise<void>
  ): HTMLButtonElement {
    const button = el('button', 'jp-gpu-proc-action', text);
    button.setAttribute('aria-label', label);
    button.title = label;
    button.addEventListener('click', () => {
      button.disabled = true;
      run()
        .catch(reason =>
          console.error('jupyter-gpu: kernel action failed', reason)
        )
        .finally(() => {
          button.disabled = false;
        });
    });
    return button;
  }

  private _actions: IProcessActions;
  private _table: HTMLTableElement;
  private _body: HTMLTableSectionElement;
  private _empty: HTMLDivElement;
  private _key = '';
}
