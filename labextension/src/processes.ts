/**
 * Which notebook holds which GPU memory: one compact list per card, grouped by notebook
 * (a notebook's kernel may run several processes), biggest first.
 */
import { setHidden, setText } from './dom';
import { formatBytes, processLabel, unavailableHelp } from './format';
import { trans } from './i18n';
import { IGpuProcess } from './types';

/** How many rows a card shows before "+N more". */
const MAX_ROWS = 3;

interface IRow {
  label: string;
  title: string;
  bytes: number;
  notebook: string | null;
}

/** What a tooltip says about one process, or about a row that stands for several. */
function describe(p: IGpuProcess): string {
  if (p.pid !== null) {
    return trans.__('pid %1 %2', p.pid, p.name ?? '').trim();
  }
  const count = p.process_count ?? 1;
  if (p.scope === 'unattributable') {
    return (
      p.reason ??
      trans._n(
        '%1 process not visible from this server',
        '%1 processes not visible from this server',
        count
      )
    );
  }
  return trans._n(
    '%1 process of other users (hidden by the server: only their memory is shown)',
    '%1 processes of other users (hidden by the server: only their memory is shown)',
    count
  );
}

/** Group processes by notebook (or kernel); processes of other users or servers together. */
export function groupProcesses(processes: readonly IGpuProcess[]): IRow[] {
  const rows = new Map<string, IRow>();
  for (const p of processes) {
    const key =
      p.notebook ??
      (p.kernel_id
        ? `kernel:${p.kernel_id}`
        : p.scope === 'unattributable'
          ? 'unattributable'
          : 'other');
    let row = rows.get(key);
    if (!row) {
      const label = processLabel(p, trans.__('other processes'));
      row = { label, title: '', bytes: 0, notebook: p.notebook };
      rows.set(key, row);
    }
    row.bytes += p.used_mem_bytes ?? 0;
    const what = describe(p);
    const mem =
      p.used_mem_bytes === null
        ? trans.__('memory unknown')
        : formatBytes(p.used_mem_bytes);
    row.title += `${row.title ? '\n' : ''}${what}: ${mem}`;
  }
  for (const row of rows.values()) {
    const head = row.notebook ?? row.label;
    row.title = `${head}\n${row.title}`;
  }
  return [...rows.values()].sort((a, b) => b.bytes - a.bytes);
}

export class ProcessList {
  constructor(openNotebook: ((path: string) => void) | null) {
    this._open = openNotebook;
    this.node = document.createElement('ul');
    this.node.className = 'jp-gpu-procs';
  }

  readonly node: HTMLUListElement;

  /**
   * Show `processes` on a GPU of `totalBytes`, or why they cannot be listed (`unavailable`,
   * e.g. NVML's "Not Supported"); does nothing when none of it changed.
   */
  update(
    processes: readonly IGpuProcess[] | null | undefined,
    totalBytes: number | null,
    unavailable: string | null = null,
    simulated = false
  ): void {
    // A cheap fingerprint first: the list is grouped and rebuilt only when it changes.
    let key = `${totalBytes}\0${unavailable}\0${simulated}`;
    for (const p of processes ?? []) {
      key += `\0${p.pid}\0${p.used_mem_bytes}\0${p.name}\0${p.kernel_id}\0${p.notebook}\0${p.scope}\0${p.process_count}`;
    }
    if (key === this._key) {
      return;
    }
    this._key = key;
    this.node.replaceChildren();
    if (unavailable !== null && !processes?.length) {
      const note = document.createElement('li');
      note.className = 'jp-gpu-procs-note';
      note.textContent = trans.__('Processes: %1', unavailable);
      note.title = unavailableHelp(unavailable);
      this.node.append(note);
      return;
    }
    const rows = groupProcesses(processes ?? []);
    if (!rows.length) {
      const empty = document.createElement('li');
      empty.className = 'jp-gpu-procs-empty';
      empty.textContent = trans.__('No processes');
      this.node.append(empty);
      return;
    }
    for (const row of rows.slice(0, MAX_ROWS)) {
      this.node.append(this._row(row, totalBytes, simulated));
    }
    if (rows.length > MAX_ROWS) {
      const more = document.createElement('li');
      more.className = 'jp-gpu-procs-more';
      const rest = rows.slice(MAX_ROWS);
      const bytes = rest.reduce((sum, r) => sum + r.bytes, 0);
      more.textContent = trans.__(
        '+%1 more (%2)',
        rest.length,
        formatBytes(bytes)
      );
      more.title = rest.map(r => r.title).join('\n\n');
      this.node.append(more);
    }
  }

  set visible(visible: boolean) {
    setHidden(this.node, !visible);
  }

  private _row(
    row: IRow,
    totalBytes: number | null,
    simulated: boolean
  ): HTMLLIElement {
    const item = document.createElement('li');
    // The simulated backend puts made-up memory on real kernels: never let it pass as real.
    item.title = simulated
      ? `${row.title}\n${trans.__("Simulated memory (the simulated backend), not this kernel's own.")}`
      : row.title;
    const name = document.createElement(
      row.notebook && this._open ? 'button' : 'span'
    );
    name.className = 'jp-gpu-proc-name';
    setText(name, row.label);
    const notebook = row.notebook;
    if (notebook && this._open) {
      const open = this._open;
      name.addEventListener('click', () => open(notebook));
      name.setAttribute('aria-label', trans.__('Open %1', notebook));
    }
    const bar = document.createElement('span');
    bar.className = 'jp-gpu-proc-bar';
    const share = totalBytes ? Math.min(1, row.bytes / totalBytes) : 0;
    bar.style.setProperty('--jp-gpu-share', share.toFixed(3));
    const mem = document.createElement('span');
    mem.className = 'jp-gpu-proc-mem';
    // Every simulated number says so, here too (the share bar goes under the row to make room).
    mem.textContent = simulated
      ? trans.__('%1 (simulated)', formatBytes(row.bytes))
      : formatBytes(row.bytes);
    if (simulated) {
      mem.classList.add('jp-gpu-proc-simulated');
    }
    item.append(name, mem, bar);
    return item;
  }

  private _open: ((path: string) => void) | null;
  private _key = '';
}
