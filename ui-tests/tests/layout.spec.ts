/**
 * The panel from a narrow sidebar to a wide one, in the light theme: no label, value or chart
 * overlaps another or is cut short, in full cards, compact cards and the host card; at the
 * sidebar's default width (250 px), 320 and 480 px, in a 700 and a 1000 px window, with two
 * kernels holding GPU memory: nothing sticks out past the panel, no table is squeezed below
 * its rows, nothing scrolls sideways, every chart is at least 80 % of the panel's width under
 * its value line (its scale beside the value, not over the line), names stay on one line and
 * every process row keeps its kernel actions in reach; at the default width the GPU's and the
 * notebooks' names are whole (their figures move to the next line instead), each with its
 * whole name in a tooltip. The dashboard at two window widths:
 * a GPU's four charts on one line or two by two, filling it, their legends level. Against the
 * simulated backend with 2 devices (the `simulated` project's server).
 */
import { expect, Locator, Page, test } from '@playwright/test';
import {
  allowNarrowSidebar,
  boxProblems,
  command,
  layoutProblems,
  openLab,
  openPanel,
  PANEL,
  setPanelWidth,
  startKernels,
  stopKernels,
  wrappedNames
} from './lab';

const WIDTHS = [220, 280, 340, 440, 720];

/** Set the card layout in the Settings Editor (as a person would); close it once it applies. */
async function setLayout(page: Page, layout: string): Promise<void> {
  await command(page, 'settingeditor:open', { query: 'GPU monitor' });
  const select = page.locator('.jp-SettingsPanel select[id$="layout"]');
  await select.selectOption(layout);
  await expect(page.locator(PANEL).locator('.jp-gpu-mod-compact')).toHaveCount(
    layout === 'compact' ? 2 : 0,
    { timeout: 10000 }
  );
  await page
    .locator('.lm-DockPanel-tabBar .lm-TabBar-tab', { hasText: 'Settings' })
    .locator('.lm-TabBar-tabCloseIcon')
    .click();
}

test('cards stay readable from a narrow sidebar to a wide one', async ({
  page
}) => {
  await openLab(page);
  expect(await page.evaluate(() => document.body.dataset.jpThemeLight)).toBe(
    'true'
  );
  await allowNarrowSidebar(page);
  const panel = await openPanel(page);
  await expect(panel.locator('.jp-gpu-status')).toHaveText('live');
  const cards = panel.locator('.jp-gpu-card[data-gpu-index]');
  await expect(cards).toHaveCount(2);
  await expect(cards.first().locator('canvas').first()).toBeVisible();

  const check = async (what: string) => {
    for (const width of WIDTHS) {
      await setPanelWidth(page, width);
      expect(await layoutProblems(page), `${what} at ${width} px`).toEqual([]);
    }
  };
  await check('full cards');
  // Up to 480 px (and beyond): one tile per row; in a 720 px sidebar two per row.
  await setPanelWidth(page, 220);
  const tiles = cards.first().locator('.jp-gpu-tile');
  const [util, mem] = [
    await tiles.nth(0).boundingBox(),
    await tiles.nth(1).boundingBox()
  ];
  expect(mem!.y).toBeGreaterThan(util!.y + util!.height - 1);
  await setPanelWidth(page, 720);
  const [wideUtil, wideMem] = [
    await tiles.nth(0).boundingBox(),
    await tiles.nth(1).boundingBox()
  ];
  expect(wideMem!.y).toBeCloseTo(wideUtil!.y, 0);

  await setLayout(page, 'compact');
  try {
    await check('compact cards');
  } finally {
    await setLayout(page, 'auto'); // the server's settings outlive this test
  }
});

test("at the sidebar's default width the GPU's and the notebooks' names are whole, and in their tooltips", async ({
  page
}) => {
  await openLab(page);
  const panel = await openPanel(page);
  await expect(panel.locator('.jp-gpu-status')).toHaveText('live');
  const sessions = await startKernels(page, ['00-start-here.ipynb']);
  try {
    await expect(
      panel.locator('.jp-gpu-proctable .jp-gpu-proc-notebook', {
        hasText: '00-start-here'
      })
    ).toBeVisible({ timeout: 30000 });
    await setPanelWidth(page, 250);
    const names = await panel.evaluate(node =>
      [
        ...node.querySelectorAll<HTMLElement>(
          '.jp-gpu-card[data-gpu-index] .jp-gpu-card-name, .jp-gpu-proc-name, .jp-gpu-proc-notebook'
        )
      ]
        .filter(n => n.getClientRects().length && n.textContent?.trim())
        .map(n => ({
          text: n.textContent!.trim(),
          cut: n.scrollWidth > n.clientWidth + 1,
          // Its own tooltip, its button's (a notebook to open) or its row's.
          tooltip:
            n.title ||
            n.querySelector<HTMLElement>('[title]')?.title ||
            n.closest<HTMLElement>('[title]:not([title=""])')?.title ||
            ''
        }))
    );
    const texts = names.map(n => n.text);
    expect(texts).toContain('Simulated NVIDIA H200');
    expect(texts.filter(t => t === '00-start-here')).toHaveLength(2); // card and table
    expect(names.filter(n => n.cut)).toEqual([]);
    for (const name of names) {
      expect(name.tooltip, name.text).toContain(name.text);
    }
  } finally {
    await stopKernels(page, sessions);
  }
});

const PANEL_WIDTHS = [250, 320, 480];
const DASHBOARD = '#jupyter-gpu-dashboard';

/** Whether `inner`'s box lies within `outer`'s, sideways. */
async function withinSideways(
  inner: Locator,
  outer: Locator
): Promise<boolean> {
  const [a, b] = [await inner.boundingBox(), await outer.boundingBox()];
  return !!a && !!b && a.x >= b.x - 0.5 && a.x + a.width <= b.x + b.width + 0.5;
}

for (const height of [700, 1000]) {
  test(`the sidebar at 250, 320 and 480 px in a ${height} px window: every box fits`, async ({
    page
  }) => {
    test.setTimeout(120000);
    await page.setViewportSize({ width: 1280, height });
    await openLab(page);
    const panel = await openPanel(page);
    await expect(panel.locator('.jp-gpu-status')).toHaveText('live');
    const sessions = await startKernels(page, [
      `a-notebook-whose-name-is-longer-than-any-sidebar-${height}.ipynb`,
      `short-${height}.ipynb`
    ]);
    try {
      const rows = panel.locator('.jp-gpu-proctable tr.jp-gpu-proc-row');
      await expect(rows).toHaveCount(2, { timeout: 30000 });
      // Every simulated number says so: the table's memory and each card's notebook rows.
      const mems = panel.locator(
        '.jp-gpu-proctable .jp-gpu-proc-memory, .jp-gpu-card .jp-gpu-procs .jp-gpu-proc-mem'
      );
      await expect
        .poll(async () => (await mems.allTextContents()).length)
        .toBeGreaterThanOrEqual(4);
      for (const text of await mems.allTextContents()) {
        expect(text).toMatch(/ \(simulated\)$/);
      }
      for (const width of PANEL_WIDTHS) {
        await setPanelWidth(page, width);
        const at = `${width} px wide, ${height} px high`;
        // A card draws its charts once it has been in view (panel.ts): scroll to each once,
        // as a person would, before its charts are measured.
        for (const card of await panel.locator('.jp-gpu-card').all()) {
          await card.scrollIntoViewIfNeeded();
          await expect
            .poll(() => card.locator('.jp-gpu-chart:not(:has(canvas))').count())
            .toBe(0);
        }
        expect(
          await boxProblems(page, PANEL, {
            charts: { selector: '.jp-gpu-chart', minShare: 0.8 }
          }),
          at
        ).toEqual([]);
        expect(await layoutProblems(page), at).toEqual([]);
        expect(
          await wrappedNames(
            page,
            PANEL,
            '.jp-gpu-card-name, .jp-gpu-subtitle, .jp-gpu-proc-name, .jp-gpu-proc-notebook'
          ),
          at
        ).toEqual([]);
        // Each chart under its value line, its scale beside the value: no label over a line.
        for (const tile of await panel.locator('.jp-gpu-tile').all()) {
          const head = await tile.locator('.jp-gpu-tile-head').boundingBox();
          const chart = await tile.locator('.jp-gpu-chart').boundingBox();
          const scale = await tile.locator('.jp-gpu-chart-scale').boundingBox();
          expect(chart!.y, at).toBeGreaterThanOrEqual(
            head!.y + head!.height - 0.5
          );
          if (scale) {
            expect(scale.y + scale.height, at).toBeLessThanOrEqual(
              chart!.y + 0.5
            );
          }
        }
        // Every process row keeps its kernel actions within the panel, visible once scrolled to.
        // A row is found by its pid, and each button's checks are retried as one: the rows are
        // ordered by memory, which the simulated GPUs move, so the first row can become the
        // second while it is scrolled to (a clean-clone CI failed so, "not attached to the DOM").
        const pids = await rows.evaluateAll(trs =>
          trs.map(tr => (tr as HTMLElement).dataset.pid ?? '')
        );
        expect(pids, at).toHaveLength(2);
        for (const pid of pids) {
          const row = panel.locator(`tr.jp-gpu-proc-row[data-pid="${pid}"]`);
          for (const name of [
            /^Interrupt the kernel of /,
            /^Shut down the kernel of /
          ]) {
            const button = row.getByRole('button', { name });
            await expect(async () => {
              await button.scrollIntoViewIfNeeded({ timeout: 2000 });
              await expect(button, at).toBeVisible({ timeout: 1000 });
              expect(await withinSideways(button, panel), at).toBe(true);
            }).toPass({ timeout: 15000 });
          }
        }
        // Narrow: the rows are small cards (no header row), the notebook first.
        await expect(panel.locator('.jp-gpu-proctable thead')).toBeHidden();
        if (
          process.env.UPDATE_SCREENSHOTS &&
          width === 250 &&
          height === 1000
        ) {
          // The process list as cards at the default width, under the GPU cards.
          await command(page, 'application:close-all');
          await panel.locator('.jp-gpu-proctable').scrollIntoViewIfNeeded();
          await page.mouse.move(700, 500);
          await page.waitForTimeout(1000);
          await page.screenshot({
            path: '../docs/screenshot-processes.png',
            clip: { x: 0, y: 0, width: 520, height: 1000 }
          });
        }
      }
    } finally {
      await stopKernels(page, sessions);
    }
  });
}

/**
 * A row's figures grouped by line (their top), left to right, with where their charts start:
 * measured at one moment (in one evaluation: a new sample between two reads must not count).
 */
async function figureLines(row: Locator) {
  const boxes = await row.evaluate(node =>
    [...node.querySelectorAll('.jp-gpu-dash-figure')].map(figure => {
      const box = figure.getBoundingClientRect();
      const chart = figure.querySelector('.jp-gpu-dash-chart');
      return {
        x: box.x,
        y: box.y,
        width: box.width,
        chartTop: chart ? chart.getBoundingClientRect().y : NaN
      };
    })
  );
  const lines: (typeof boxes)[] = [];
  for (const box of boxes.sort((a, b) => a.y - b.y || a.x - b.x)) {
    const line = lines.find(l => Math.abs(l[0].y - box.y) < 2);
    if (line) {
      line.push(box);
    } else {
      lines.push([box]);
    }
  }
  return lines;
}

for (const [width, perLine] of [
  [1600, 4],
  [1000, 2]
] as const) {
  test(`the dashboard in a ${width} px window: ${perLine === 4 ? "a GPU's four charts on one line" : 'two by two'}, filling it, legends level`, async ({
    page
  }) => {
    await page.setViewportSize({ width, height: 900 });
    await openLab(page);
    // The main area as wide as the window allows (the layout is restored: a sidebar may be
    // open from an earlier test).
    if (await page.locator('#jp-left-stack').isVisible()) {
      await command(page, 'application:toggle-left-area');
    }
    await command(page, 'jupyter-gpu:dashboard');
    const dashboard = page.locator(DASHBOARD);
    const rows = dashboard.locator('.jp-gpu-dash-row');
    await expect(rows).toHaveCount(2);
    const first = rows.first();
    await expect(first.locator('.jp-gpu-dash-chart canvas')).toHaveCount(4);
    const lines = await figureLines(first);
    expect(lines.map(l => l.length)).toEqual(perLine === 4 ? [4] : [2, 2]);
    // (Its x and width only: they do not move with a new sample.)
    const grid = (await first.locator('.jp-gpu-dash-charts').boundingBox())!;
    for (const line of lines) {
      // The line is filled: the figures share it evenly, edge to edge.
      const widths = line.map(b => b.width);
      expect(Math.max(...widths) - Math.min(...widths)).toBeLessThan(2);
      expect(line[0].x).toBeCloseTo(grid.x, 0);
      const last = line[line.length - 1];
      expect(
        Math.abs(last.x + last.width - (grid.x + grid.width))
      ).toBeLessThan(1);
      // Legends do not shift their chart: every chart of a line starts at the same height
      // (the utilization legend has five keys, the others one).
      const tops = line.map(b => b.chartTop);
      expect(Math.max(...tops) - Math.min(...tops)).toBeLessThan(1);
    }
    expect(await boxProblems(page, DASHBOARD)).toEqual([]);
    expect(await wrappedNames(page, DASHBOARD, '.jp-gpu-dash-name')).toEqual(
      []
    );
  });
}
