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
import { el, setHidden, setText, setTitle } from './dom';
import { formatBytes, formatDuration, processLabel } from './format';
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
   * Show the processes of `sample` (those last read of a stale GPU, with `readings`). A row
   * stays the same element while its process does (its memory and idle time change in place),
   * so a button is never replaced under the pointer or the keyboard's focus.
   */
  update(sample: ISample | null, readings?: IProcessReadings): void {
    const rows = processRows(sample, readings);
    const simulated = !!sample?.simulated;
    const next = new Map<string, IRowView>();
    const order: HTMLTableRowElement[] = [];
    for (const row of rows) {
      const p = row.process;
      let id = `${row.gpu}\0${p.pid}\0${p.kernel_id}\0${p.notebook}\0${p.name}\0${p.scope}\0${simulated}`;
      while (next.has(id)) {
        id += '+'; // two rows that look alike (summaries): each its own
      }
      const view = this._views.get(id) ?? this._row(row, simulated);
      this._fill(view, row, simulated);
      next.set(id, view);
      order.push(view.tr);
    }
    this._views = next;
    const shown = this._body.children;
    let same = shown.length === order.length;
    for (let i = 0; same && i < order.length; i++) {
      same = shown[i] === order[i];
    }
    if (!same) {
      this._body.replaceChildren(...order);
    }
    setHidden(this._empty, rows.length > 0);
    setHidden(this._table, rows.length === 0);
  }

  /** What of a row changes while its process lives: memory, idle time, the flags. */
  private _fill(view: IRowView, row: IProcessRow, simulated: boolean): void {
    const p = row.process;
    const idle = idleText(p);
    const key = `${p.used_mem_bytes}\0${idle}\0${p.idle_holder}\0${row.stale}`;
    if (key === view.key) {
      return;
    }
    view.key = key;
    const { tr, memCell, idleCell } = view;
    tr.classList.toggle('jp-gpu-idle-holder', !!p.idle_holder);
    tr.classList.toggle('jp-gpu-mod-stale', !!row.stale);
    setTitle(
      tr,
      row.stale
        ? trans.__(
            'GPU %1 has stopped reporting: its processes as it last read them.',
            row.gpu
          )
        : ''
    );
    setText(
      memCell,
      p.used_mem_bytes === null
        ? trans.__('unknown')
        : simulated
          ? trans.__('%1 (simulated)', formatBytes(p.used_mem_bytes))
          : formatBytes(p.used_mem_bytes)
    );
    idleCell.replaceChildren(idle);
    if (p.idle_holder) {
      const badge = el('span', 'jp-gpu-idle-badge', trans.__('idle holder'));
      badge.title = trans.__(
        'This kernel has been idle for long while holding GPU memory others could use.'
      );
      idleCell.append(' ', badge);
    }
  }

  /** A new row for a process: what stays while it lives (its cells, its actions). */
  private _row(row: IProcessRow, simulated: boolean): IRowView {
    const p = row.process;
    const tr = el('tr', 'jp-gpu-proc-row');
    tr.dataset.pid = String(p.pid);
    if (p.kernel_id) {
      tr.dataset.kernelId = p.kernel_id;
    }
    const memCell = el('td', 'jp-gpu-proc-memory');
    if (simulated) {
      memCell.title = trans.__(
        'Simulated: the simulated backend puts made-up GPU memory on this server’s kernels.'
      );
    }
    const label = processLabel(p, p.name ?? trans.__('other process'));
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
    const idleCell = el('td', 'jp-gpu-proc-idle');
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
    return { tr, memCell, idleCell, key: null };
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
  /** The rows shown, by their process. */
  private _views = new Map<string, IRowView>();
}

/** A row of the table and the cells that change while its process lives. */
interface IRowView {
  tr: HTMLTableRowElement;
  memCell: HTMLTableCellElement;
  idleCell: HTMLTableCellElement;
  /** What `_fill` last wrote (`null`: nothing yet). */
  key: string | null;
}
