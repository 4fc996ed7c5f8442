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
