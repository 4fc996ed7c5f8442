/**
 * The torch.compile caches, one line each: size (or "not scanned yet"), whose (the server's or
 * a kernel's own), the free space of its filesystem with a warning when low, and "Clear…"; a
 * folder the server will not clear has the button greyed and, beside it, why (the server's
 * sentence, which names what it found), in the row itself as well as in the tooltip. An
 * empty cache (no files: 0 B) has the button greyed too, its tooltip saying so.
 *
 * Clearing asks first (`confirm`), then posts the cache's id (never its path) through
 * `clear`; the server validates the directory again and says how much it freed.
 */
import { el, setText } from './dom';
import { formatBytes } from './format';
import { trans } from './i18n';
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
  return trans.__(
    '%1 free of %2 (%3%)',
    formatBytes(free),
    formatBytes(total),
    Math.round((free / total) * 100)
  );
}

export class CacheSection {
  constructor(actions: ICacheActions | null) {
    this._actions = actions;
    this.node = el('div', 'jp-gpu-caches');
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', trans.__('torch.compile caches'));
    this._list = el('ul', 'jp-gpu-cache-list');
    this._result = el('div', 'jp-gpu-cache-result');
    this._result.setAttribute('role', 'status');
    this.node.append(
      el('div', 'jp-gpu-caches-title', trans.__('torch.compile caches')),
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
      key += `\0${d.id}\0${d.size_bytes}\0${d.file_count}\0${d.exists}\0${d.clearable}\0${d.refusal}\0${d.fs_free_bytes}`;
    }
    if (key === this._key) {
      return;
    }
    this._key = key;
    this.node.classList.toggle('jp-gpu-low-space', !!cache?.low_space);
    if (scanned === null) {
      this._list.replaceChildren(
        el('li', 'jp-gpu-cache-unscanned', trans.__('not scanned yet'))
      );
      return;
    }
    this._list.replaceChildren(
      ...dirs
        .filter(d => d.exists || d.source === 'kernel')
        .map(d => this._row(d))
    );
    if (!this._list.childElementCount) {
      this._list.append(
        el('li', 'jp-gpu-cache-none', trans.__('no cache on disk yet'))
      );
    }
  }

  private _row(dir: ICacheDir): HTMLLIElement {
    const li = el('li', 'jp-gpu-cache-dir');
    li.dataset.cacheKind = dir.kind;
    if (dir.id) {
      li.dataset.cacheId = dir.id;
    }
    const name = el(
      'span',
      'jp-gpu-cache-name',
      dir.source === 'kernel'
        ? trans.__('%1 (a kernel’s own)', dir.kind)
        : dir.kind
    );
    name.title = dir.path;
    const size = el(
      'span',
      'jp-gpu-cache-size',
      dir.exists ? formatBytes(dir.size_bytes) : trans.__('none')
    );
    const free = el('span', 'jp-gpu-cache-free', freeText(dir));
    li.append(name, size, free);
    if (this._actions && dir.exists && dir.id) {
      const button = el('button', 'jp-gpu-cache-clear', trans.__('Clear…'));
      button.setAttribute(
        'aria-label',
        trans.__('Clear the %1 cache %2', dir.kind, dir.path)
      );
      if (dir.clearable && dir.file_count === 0) {
        // Nothing a clear would free: greyed, and the tooltip says why.
        button.disabled = true;
        button.title = trans.__(
          'Nothing to clear: %1 holds no files (0 B).',
          dir.path
        );
        li.append(button);
      } else if (dir.clearable) {
        button.title = trans.__('Delete what is inside %1', dir.path);
        button.addEventListener('click', () => void this._clear(dir, button));
        li.append(button);
      } else {
        button.disabled = true;
        const why = trans.__(
          'Cannot be cleared: %1',
          dir.refusal ?? trans.__('not a cache')
        );
        button.title = why;
        const refusal = el('span', 'jp-gpu-cache-refusal', why);
        refusal.id = `jp-gpu-cache-refusal-${dir.id}`;
        button.setAttribute('aria-describedby', refusal.id);
        li.append(button, refusal);
      }
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
      trans.__('Clear the torch.compile cache?'),
      trans.__(
        'Delete everything inside %1 (%2)? torch.compile then compiles again from scratch the next time it runs.',
        dir.path,
        formatBytes(dir.size_bytes)
      ),
      trans.__('Clear')
    );
    if (!ok) {
      return;
    }
    button.disabled = true;
    try {
      const result = await actions.clear(dir.id);
      const freed = formatBytes(result.freed_bytes);
      setText(
        this._result,
        result.failed.length
          ? trans.__(
              'Cleared %1: freed %2 in %3 files (%4 entries could not be removed).',
              result.path,
              freed,
              result.files_removed,
              result.failed.length
            )
          : trans.__(
              'Cleared %1: freed %2 in %3 files.',
              result.path,
              freed,
              result.files_removed
            )
      );
    } catch (err) {
      setText(
        this._result,
        trans.__(
          'Not cleared: %1',
          err instanceof Error ? err.message : String(err)
        )
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
