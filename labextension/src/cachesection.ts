/**
 * The torch.compile caches, one line each: size (or "not scanned yet"), whose (the server's or
 * a kernel's own), the free space of its filesystem with a warning when low, and "Clear…".
 *
 * Clearing asks first (`confirm`), then posts the cache's id (never its path) through
 * `clear`; the server validates the directory again and says how much it freed.
 */
import { el, setText } from './dom';
import { formatBytes } from './format';
import { ICacheCleared, ICacheDir, ISample } from './types';

export interface ICacheActions {
  /** Ask before clearing; true to go ahead. */
  confirm(title: string, body: string, accept: string): Promise<boolean>;
  /** `POST compile-cache/clear` with this id. */
  clear(id: string): Promise<ICacheCleared>;
}

export function freeText(dir: ICacheDir): string {
  const free = dir.fs_free_bytes;
  const total = dir.fs_total_bytes;
  if (free === null || free === undefined || !total) {
    return '';
  }
  return `${formatBytes(free)} free of ${formatBytes(total)} (${Math.round((free / total) * 100)}%)`;
}

export class CacheSection {
  constructor(actions: ICacheActions | null) {
    this._actions = actions;
    this.node = el('div', 'jp-gpu-caches');
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', 'torch.compile caches');
    this._list = el('ul', 'jp-gpu-cache-list');
    this._result = el('div', 'jp-gpu-cache-result');
    this._result.setAttribute('role', 'status');
    this.node.append(
      el('div', 'jp-gpu-caches-title', 'torch.compile caches'),
      this._list,
      this._result
    );
  }

  readonly node: HTMLDivElement;

  update(sample: ISample | null): void {
    const cache = sample?.compile_cache ?? null;
    const scanned = cache?.scanned_ts ?? null;
    const dirs = cache?.dirs ?? [];
    let key = `${scanned}\0${cache?.low_space}`;
    for (const d of dirs) {
      key += `\0${d.id}\0${d.size_bytes}\0${d.exists}\0${d.clearable}\0${d.fs_free_bytes}`;
    }
    if (key === this._key) {
      return;
    }
    this._key = key;
    this.node.classList.toggle('jp-gpu-low-space', !!cache?.low_space);
    if (scanned === null) {
      this._list.replaceChildren(
        el('li', 'jp-gpu-cache-unscanned', 'not scanned yet')
      );
      return;
    }
    this._list.replaceChildren(
      ...dirs
        .filter(d => d.exists || d.source === 'kernel')
        .map(d => this._row(d))
    );
    if (!this._list.childElementCount) {
      this._list.append(el('li', 'jp-gpu-cache-none', 'no cache on disk yet'));
    }
  }

  private _row(dir: ICacheDir): HTMLLIElement {
    const li = el('li', 'jp-gpu-cache-dir');
    li.dataset.cacheKind = dir.kind;
    if (dir.id) {
      li.dataset.cacheId = dir.id;
    }
    const whose = dir.source === 'kernel' ? ' (a kernel’s own)' : '';
    const name = el('span', 'jp-gpu-cache-name', `${dir.kind}${whose}`);
    name.title = dir.path;
    const size = el(
      'span',
      'jp-gpu-cache-size',
      dir.exists ? formatBytes(dir.size_bytes) : 'none'
    );
    const free = el('span', 'jp-gpu-cache-free', freeText(dir));
    li.append(name, size, free);
    if (this._actions && dir.exists && dir.id) {
      const button = el('button', 'jp-gpu-cache-clear', 'Clear…');
      button.setAttribute(
        'aria-label',
        `Clear the ${dir.kind} cache ${dir.path}`
      );
      if (dir.clearable) {
        button.title = `Delete what is inside ${dir.path}`;
        button.addEventListener('click', () => void this._clear(dir, button));
      } else {
        button.disabled = true;
        button.title = `Cannot be cleared: ${dir.refusal ?? 'not a cache'}`;
      }
      li.append(button);
    }
    return li;
  }

  private async _clear(
    dir: ICacheDir,
    button: HTMLButtonElement
  ): Promise<void> {
    const actions = this._actions;
    if (!actions || !dir.id) {
      return;
    }
    const ok = await actions.confirm(
      'Clear the torch.compile cache?',
      `Delete everything inside ${dir.path} (${formatBytes(dir.size_bytes)})? ` +
        'torch.compile then compiles again from scratch the next time it runs.',
      'Clear'
    );
    if (!ok) {
      return;
    }
    button.disabled = true;
    try {
      const result = await actions.clear(dir.id);
      const failed = result.failed.length
        ? ` (${result.failed.length} entries could not be removed)`
        : '';
      setText(
        this._result,
        `Cleared ${result.path}: freed ${formatBytes(result.freed_bytes)} in ${result.files_removed} files${failed}.`
      );
    } catch (err) {
      setText(
        this._result,
        `Not cleared: ${err instanceof Error ? err.message : String(err)}`
      );
    } finally {
      button.disabled = false;
    }
  }

  private _actions: ICacheActions | null;
  private _list: HTMLUListElement;
  private _result: HTMLDivElement;
  private _key = '';
}
