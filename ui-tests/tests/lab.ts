/**
 * Helpers shared by the browser tests: open JupyterLab, open the monitor, read its numbers.
 */
import { expect, Locator, Page } from '@playwright/test';

export const PANEL = '#jupyter-gpu-panel';
export const PANEL_TAB = '.jp-SideBar [data-id="jupyter-gpu-panel"]';
export const STATUS_ITEM = '.jp-gpu-statusbar';

/** Open JupyterLab (relative to the project's base URL) and wait until it is ready. */
export async function openLab(page: Page, query = ''): Promise<void> {
  await page.goto(`lab${query}`);
  // The splash may not be in the page yet when this looks (a busy machine): wait for the
  // sidebar's tab itself, then for the splash to go.
  await expect(page.locator(PANEL_TAB)).toBeVisible({ timeout: 60000 });
  await page
    .locator('#jupyterlab-splash')
    .waitFor({ state: 'detached', timeout: 30000 });
}

/** Open the monitor from its icon in the left sidebar (unless open) and wait for it. */
export async function openPanel(page: Page): Promise<Locator> {
  const panel = page.locator(PANEL);
  // The layout is restored (ILayoutRestorer): the panel may be open already, and a click on
  // its tab would close it. Look only once the restore is over, or a restore that finishes
  // after the click would undo it.
  await page.evaluate(async () => {
    // (JupyterHub's single-user servers do not expose the app: there, no wait.)
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the app global is untyped
    await (window as any).jupyterapp?.restored;
  });
  if (!(await panel.isVisible())) {
    await page.locator(PANEL_TAB).click();
  }
  await expect(panel).toBeVisible();
  return panel;
}

/** Every value shown on a card (`87%`, `31.2/140 GiB`, …) in tile order. */
export async function cardValues(card: Locator): Promise<string[]> {
  return card.locator('.jp-gpu-tile-value').allTextContents();
}

/** The `jupyter-gpu:update` measures (ms) the panel recorded so far. */
export async function updateDurations(page: Page): Promise<number[]> {
  return page.evaluate(() =>
    performance.getEntriesByName('jupyter-gpu:update').map(e => e.duration)
  );
}

/**
 * The times (ms) between the starts of consecutive measures named `name` (by default the
 * panel's `jupyter-gpu:update`): how often the view is updated, measured in the page.
 */
export async function updateGaps(
  page: Page,
  name = 'jupyter-gpu:update'
): Promise<number[]> {
  const starts = await page.evaluate(
    name => performance.getEntriesByName(name).map(e => e.startTime),
    name
  );
  return starts.slice(1).map((start, i) => start - starts[i]);
}

/** Run a JupyterLab command in the page (as the command palette would). */
export async function command(
  page: Page,
  id: string,
  args: object = {}
): Promise<void> {
  await page.evaluate(
    async ([id, args]) => {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the app global is untyped
      await (window as any).jupyterapp.commands.execute(id, args);
    },
    [id, args] as const
  );
}

/**
 * Let the sidebar be narrower than JupyterLab's themes allow (`--jp-sidebar-min-width`,
 * 250 px), as a custom theme or a small window does. Call it before the panel opens: the
 * sidebar reads its minimum when it is laid out.
 */
export async function allowNarrowSidebar(page: Page): Promise<void> {
  await page.addStyleTag({
    content: ':root { --jp-sidebar-min-width: 180px !important; }'
  });
}

/** Drag the sidebar's edge, as a person would, until the panel is `width` CSS pixels wide. */
export async function setPanelWidth(page: Page, width: number): Promise<void> {
  const panel = page.locator(PANEL);
  const handle = page
    .locator('#jp-main-split-panel > .lm-SplitPanel-handle')
    .first();
  const from = await handle.boundingBox();
  const now = await panel.boundingBox();
  if (!from || !now) {
    throw new Error('the panel or the sidebar handle is not on screen');
  }
  const x = from.x + from.width / 2;
  const y = from.y + 300;
  await page.mouse.move(x, y);
  await page.mouse.down();
  await page.mouse.move(x + width - now.width, y, { steps: 4 });
  await page.mouse.up();
  await expect
    .poll(async () => Math.round((await panel.boundingBox())?.width ?? 0))
    .toBeGreaterThanOrEqual(width - 2);
  await expect
    .poll(async () => Math.round((await panel.boundingBox())?.width ?? 0))
    .toBeLessThanOrEqual(width + 2);
}

/**
 * What is wrong with the panel's layout now, in words (empty when nothing is): two pieces of
 * text or a chart overlapping, a label or value hidden, cut short or sticking out of its card,
 * a name cut short without a tooltip, a chart's canvas not as wide as its box.
 */
export async function layoutProblems(page: Page): Promise<string[]> {
  // Frames for the ResizeObserver's redraws and the container queries to settle.
  await page.evaluate(
    () =>
      new Promise(resolve =>
        requestAnimationFrame(() => requestAnimationFrame(resolve))
      )
  );
  return page.evaluate(() => {
    type Box = { left: number; right: number; top: number; bottom: number };
    const problems: string[] = [];
    /** Never shortened: labels, values, the GPU's index, badges, the header's numbers. */
    const whole =
      '.jp-gpu-tile-label, .jp-gpu-tile-value, .jp-gpu-card-index, .jp-gpu-badge, ' +
      '.jp-gpu-card-extra, .jp-gpu-title, .jp-gpu-status, .jp-gpu-proc-mem';
    /** May end in an ellipsis, with the whole text in a tooltip. */
    const shortened = '.jp-gpu-card-name, .jp-gpu-proc-name, .jp-gpu-subtitle';
    const boxed =
      '.jp-gpu-tile-swatch, .jp-gpu-chart, .jp-gpu-proc-bar, .jp-gpu-card-message, ' +
      '.jp-gpu-cache-trend, .jp-gpu-procs-empty, .jp-gpu-procs-more, .jp-gpu-tile-note, ' +
      '.jp-gpu-procs-note';
    const name = (el: Element) =>
      `${el.closest('[data-gpu-index]') ? `GPU ${(el.closest('[data-gpu-index]') as HTMLElement).dataset.gpuIndex}` : el.closest('.jp-gpu-host-card') ? 'host' : 'header'} ${el.className} "${(el.textContent ?? '').trim().slice(0, 24)}"`;
    const shown = (el: Element) => {
      const r = el.getBoundingClientRect();
      return r.width > 0 && r.height > 0 && el.getClientRects().length > 0;
    };
    /** Where the text is drawn (it may stick out of its box); the box when it clips. */
    const inkBox = (el: HTMLElement): Box => {
      const box = el.getBoundingClientRect();
      if (getComputedStyle(el).overflow !== 'visible') {
        return box;
      }
      const range = document.createRange();
      range.selectNodeContents(el);
      const text = range.getBoundingClientRect();
      return text.width > 0
        ? {
            left: Math.min(box.left, text.left),
            right: Math.max(box.right, text.right),
            top: Math.min(box.top, text.top),
            bottom: Math.max(box.bottom, text.bottom)
          }
        : box;
    };
    const overlap = (a: Box, b: Box) =>
      Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5 &&
      Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
    const panel = document.querySelector('#jupyter-gpu-panel');
    if (!panel) {
      return ['no panel'];
    }
    const groups = [
      ...panel.querySelectorAll('.jp-gpu-header, .jp-gpu-card')
    ] as HTMLElement[];
    for (const group of groups.filter(shown)) {
      const frame = group.getBoundingClientRect();
      const items = (
        [
          ...group.querySelectorAll(`${whole}, ${shortened}, ${boxed}`)
        ] as HTMLElement[]
      ).filter(shown);
      const boxes = items.map(inkBox);
      items.forEach((el, i) => {
        const b = boxes[i];
        if (
          b.left < frame.left - 0.5 ||
          b.right > frame.right + 0.5 ||
          b.top < frame.top - 0.5 ||
          b.bottom > frame.bottom + 0.5
        ) {
          problems.push(`${name(el)} sticks out of its card`);
        }
        if (el.matches(whole) && el.scrollWidth > el.clientWidth + 1) {
          problems.push(`${name(el)} is cut short`);
        }
        if (
          el.matches(shortened) &&
          el.scrollWidth > el.clientWidth + 1 &&
          !el.closest('[title]:not([title=""])')
        ) {
          problems.push(`${name(el)} is cut short without a tooltip`);
        }
        for (let j = 0; j < i; j++) {
          const other = items[j];
          if (other.contains(el) || el.contains(other)) {
            continue;
          }
          if (overlap(b, boxes[j])) {
            problems.push(`${name(el)} overlaps ${name(other)}`);
          }
        }
      });
      for (const tile of group.querySelectorAll('.jp-gpu-tile')) {
        for (const part of ['label', 'value']) {
          const el = tile.querySelector(`.jp-gpu-tile-${part}`);
          if (shown(tile) && (!el || !shown(el))) {
            problems.push(`${name(tile)}: its ${part} is hidden`);
          }
        }
      }
      for (const chart of group.querySelectorAll('.jp-gpu-chart')) {
        const canvas = chart.querySelector('canvas');
        if (!shown(chart) || !canvas) {
          continue;
        }
        const want = chart.clientWidth;
        const got = canvas.getBoundingClientRect().width;
        if (Math.abs(want - got) > 1.5) {
          problems.push(`${name(chart)}: canvas ${got} px in a ${want} px box`);
        }
      }
    }
    return problems;
  });
}

/**
 * Open a new notebook on a python3 kernel and wait until it can run code: its file loaded and
 * its kernel idle. Returns the notebook's panel.
 *
 * Wait on the panel that the command made, never on `app.shell.currentWidget` or on the
 * toolbar's execution indicator: the indicator says "idle" before any kernel exists, and until
 * the file has loaded the notebook shows a placeholder cell that the file's content then
 * replaces (on a busy machine, a source set there was lost and the cell ran empty).
 */
export async function newNotebook(page: Page): Promise<Locator> {
  const id = await page.evaluate(async () => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the app global is untyped
    const app = (window as any).jupyterapp;
    const panel = await app.commands.execute('notebook:create-new', {
      kernelName: 'python3'
    });
    await panel.context.ready;
    await panel.sessionContext.ready;
    return panel.id as string;
  });
  await expect
    .poll(
      () =>
        page.evaluate(id => {
          // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the app global is untyped
          const app = (window as any).jupyterapp;
          const panel = [...app.shell.widgets('main')].find(w => w.id === id);
          return panel?.sessionContext.session?.kernel?.status ?? 'no kernel';
        }, id),
      { timeout: 90000, message: "the new notebook's kernel is idle" }
    )
    .toBe('idle');
  return page.locator(`[id="${id}"]`);
}

/**
 * Put `source` in code cell `index` of `notebook` (a panel from `newNotebook`) and run it,
 * through that notebook's model and commands (keys typed into a cell that is still being made
 * are lost on a busy machine). Resolves when the kernel has replied.
 */
export async function runCell(
  notebook: Locator,
  index: number,
  source: string
): Promise<void> {
  const id = await notebook.getAttribute('id');
  const error = await notebook.page().evaluate(
    async ([id, index, source]) => {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the app global is untyped
      const app = (window as any).jupyterapp;
      const panel = [...app.shell.widgets('main')].find(w => w.id === id);
      if (!panel) {
        return `no notebook ${id} in the main area`;
      }
      await panel.context.ready;
      await panel.sessionContext.ready;
      const model = panel.content.model.sharedModel;
      while (model.cells.length <= index) {
        model.insertCell(model.cells.length, { cell_type: 'code', source: '' });
      }
      const cell = model.getCell(index);
      cell.setSource(source);
      app.shell.activateById(panel.id);
      panel.content.activeCellIndex = index;
      panel.content.deselectAll();
      // The command's `semanticWidget` names the notebook, whatever has the focus.
      await app.commands.execute('notebook:run-cell', {
        semanticWidget: panel.id
      });
      if (cell.getSource() !== source || cell.execution_count === null) {
        return `cell ${index} did not run its source (it holds ${JSON.stringify(cell.getSource())}, count ${cell.execution_count})`;
      }
      return '';
    },
    [id, index, source] as const
  );
  expect(error, 'runCell').toBe('');
}

/** What `boxProblems` checks besides the boxes themselves. */
export interface IBoxChecks {
  /** The charts (a selector) must each be at least this share of the view's width. */
  charts?: { selector: string; minShare: number };
}

/**
 * What is wrong with the boxes of a view (`root`: the sidebar panel, the dashboard) at this
 * size, in words (empty when nothing is):
 *   - an element, or the text drawn in it, sticking out past the view's left or right edge
 *     (where an ancestor clips, only what it lets show counts);
 *   - a table squeezed below its rows (a row outside the table's box, a table with rows 0 px
 *     high), or a box that clips content it has no room for (its scroll height above its
 *     height: a list cut at the bottom);
 *   - a sideways scroll: the view, anything inside it or the page wider than its box;
 *   - a chart narrower than `checks.charts.minShare` of the view's width, or its canvas not
 *     as wide as its box.
 * uPlot's own parts are left out (the chart's box stands for them).
 */
export async function boxProblems(
  page: Page,
  root: string,
  checks: IBoxChecks = {}
): Promise<string[]> {
  await page.evaluate(
    () =>
      new Promise(resolve =>
        requestAnimationFrame(() => requestAnimationFrame(resolve))
      )
  );
  return page.evaluate(
    ([root, checks]) => {
      const view = document.querySelector(root) as HTMLElement | null;
      if (!view) {
        return [`no ${root}`];
      }
      const problems: string[] = [];
      const frame = view.getBoundingClientRect();
      const name = (el: Element) =>
        `${el.tagName.toLowerCase()}.${String(el.className).split(' ').join('.')} "${(el.textContent ?? '').trim().slice(0, 30)}"`;
      const shown = (el: Element) => {
        const r = el.getBoundingClientRect();
        return r.width > 0 && r.height > 0 && el.getClientRects().length > 0;
      };
      const clips = (el: Element) => {
        const style = getComputedStyle(el);
        return style.overflowX !== 'visible' || style.overflowY !== 'visible';
      };
      /** The part of `box` that the ancestors up to the view let show (left, right). */
      const visible = (el: Element, left: number, right: number) => {
        for (
          let up = el.parentElement;
          up && up !== view;
          up = up.parentElement
        ) {
          if (clips(up)) {
            const r = up.getBoundingClientRect();
            left = Math.max(left, r.left);
            right = Math.min(right, r.right);
          }
        }
        return [left, right];
      };
      const outside = (left: number, right: number) =>
        right > left && (left < frame.left - 0.5 || right > frame.right + 0.5);
      const all = [...view.querySelectorAll('*')].filter(
        el => !el.closest('.uplot') || el.classList.contains('uplot')
      );
      for (const el of all) {
        // A box that clips content it has no room for: cut at the bottom, or collapsed to
        // 0 px (the process table once was, in a 900 px window). Boxes of 0 px count here.
        if (
          el.getClientRects().length &&
          el !== view &&
          getComputedStyle(el).overflowY !== 'visible' &&
          el.scrollHeight > el.clientHeight + 1
        ) {
          problems.push(
            `${name(el)} is squeezed: ${el.scrollHeight} px of content in ${el.clientHeight} px`
          );
        }
        if (!shown(el)) {
          continue;
        }
        const r = el.getBoundingClientRect();
        const [left, right] = visible(el, r.left, r.right);
        if (outside(left, right)) {
          problems.push(
            `${name(el)} sticks out of the view (${Math.round(left - frame.left)} to ${Math.round(right - frame.left)} px in ${Math.round(frame.width)})`
          );
        }
        // The text drawn in it (nowrap text can overflow a box that does not clip).
        for (const node of el.childNodes) {
          if (node.nodeType !== Node.TEXT_NODE || !node.textContent?.trim()) {
            continue;
          }
          const range = document.createRange();
          range.selectNodeContents(node);
          const t = range.getBoundingClientRect();
          const [tl, tr] = clips(el)
            ? visible(el, Math.max(t.left, r.left), Math.min(t.right, r.right))
            : visible(el, t.left, t.right);
          if (outside(tl, tr)) {
            problems.push(`the text of ${name(el)} sticks out of the view`);
          }
        }
        const style = getComputedStyle(el);
        if (
          (style.overflowX === 'auto' || style.overflowX === 'scroll') &&
          el.scrollWidth > el.clientWidth + 1
        ) {
          problems.push(
            `${name(el)} scrolls sideways (${el.scrollWidth} px in ${el.clientWidth})`
          );
        }
      }
      for (const table of view.querySelectorAll('table')) {
        if (table.hidden || !table.getClientRects().length) {
          continue;
        }
        const box = table.getBoundingClientRect();
        const rows = [...table.querySelectorAll('tbody tr')];
        if (rows.length && box.height < 1) {
          problems.push(`${name(table)} is 0 px high with ${rows.length} rows`);
        }
        // Clipped by a box inside the view (the view's own scroll is fine).
        let [top, bottom] = [box.top, box.bottom];
        for (
          let up = table.parentElement;
          up && up !== view;
          up = up.parentElement
        ) {
          if (getComputedStyle(up).overflowY !== 'visible') {
            const r = up.getBoundingClientRect();
            [top, bottom] = [Math.max(top, r.top), Math.min(bottom, r.bottom)];
          }
        }
        if (bottom - top < box.height - 0.5) {
          problems.push(
            `${name(table)} is squeezed: ${Math.max(0, Math.round(bottom - top))} of its ${Math.round(box.height)} px show`
          );
        }
        for (const row of rows) {
          const rb = row.getBoundingClientRect();
          if (rb.top < box.top - 0.5 || rb.bottom > box.bottom + 0.5) {
            problems.push(`${name(row)} lies outside its table`);
          }
          if (rb.right > box.right + 0.5 || rb.left < box.left - 0.5) {
            problems.push(`${name(row)} is wider than its table`);
          }
        }
      }
      if (view.scrollWidth > view.clientWidth + 1) {
        problems.push(
          `the view scrolls sideways (${view.scrollWidth} px in ${view.clientWidth})`
        );
      }
      const page = document.scrollingElement;
      if (page && page.scrollWidth > window.innerWidth + 1) {
        problems.push('the page scrolls sideways');
      }
      if (checks.charts) {
        const { selector, minShare } = checks.charts;
        const charts = [...view.querySelectorAll(selector)].filter(shown);
        if (!charts.length) {
          problems.push(`no ${selector} shown`);
        }
        for (const chart of charts) {
          const width = chart.getBoundingClientRect().width;
          if (width < minShare * view.clientWidth - 0.5) {
            problems.push(
              `${name(chart.closest('[data-metric]') ?? chart)}: its chart is ${Math.round(width)} px of ${view.clientWidth} (under ${minShare * 100} %)`
            );
          }
          const canvas = chart.querySelector('canvas');
          if (!canvas) {
            problems.push(`${name(chart)} has no canvas`);
          } else if (
            Math.abs(canvas.getBoundingClientRect().width - chart.clientWidth) >
            1.5
          ) {
            problems.push(`${name(chart)}: its canvas is not as wide as it`);
          }
        }
      }
      return problems;
    },
    [root, checks] as const
  );
}

/**
 * Start a kernel for each notebook path through JupyterLab's own session manager (no notebook
 * opens; the simulated GPUs report the kernels as their processes). Returns the session ids.
 */
export async function startKernels(
  page: Page,
  paths: string[]
): Promise<string[]> {
  return page.evaluate(async paths => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the app global is untyped
    const sessions = (window as any).jupyterapp.serviceManager.sessions;
    const ids: string[] = [];
    for (const path of paths) {
      const session = await sessions.startNew({
        path,
        name: path,
        type: 'notebook',
        kernel: { name: 'python3' }
      });
      ids.push(session.id as string);
    }
    return ids;
  }, paths);
}

/** Shut down the sessions `startKernels` made (and their kernels). */
export async function stopKernels(page: Page, ids: string[]): Promise<void> {
  await page.evaluate(async ids => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the app global is untyped
    const sessions = (window as any).jupyterapp.serviceManager.sessions;
    for (const id of ids) {
      await sessions.shutdown(id);
    }
  }, ids);
}

/**
 * Names that must stay on one line, in words when one does not: `selector`'s elements each one
 * line high, and, where cut short, with the whole text in a tooltip (theirs or an ancestor's).
 */
export async function wrappedNames(
  page: Page,
  root: string,
  selector: string
): Promise<string[]> {
  return page.evaluate(
    ([root, selector]) => {
      const out: string[] = [];
      for (const el of document
        .querySelector(root)
        ?.querySelectorAll(selector) ?? []) {
        const node = el as HTMLElement;
        if (!node.getClientRects().length || !node.textContent?.trim()) {
          continue;
        }
        const style = getComputedStyle(node);
        const line =
          parseFloat(style.lineHeight) || 1.3 * parseFloat(style.fontSize);
        const height = node.getBoundingClientRect().height;
        if (height > 1.5 * line) {
          out.push(`"${node.textContent}" wraps (${height} px, line ${line})`);
        }
        if (
          node.scrollWidth > node.clientWidth + 1 &&
          !node.closest('[title]:not([title=""])')
        ) {
          out.push(`"${node.textContent}" is cut short without a tooltip`);
        }
      }
      return out;
    },
    [root, selector] as const
  );
}
