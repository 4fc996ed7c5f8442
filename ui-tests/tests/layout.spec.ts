/**
 * The panel from a narrow sidebar to a wide one, in the light theme: no label, value or chart
 * overlaps another or is cut short, in full cards, compact cards and the host card. Against
 * the simulated backend with 2 devices (the `simulated` project's server).
 */
import { expect, Page, test } from '@playwright/test';
import {
  allowNarrowSidebar,
  command,
  layoutProblems,
  openLab,
  openPanel,
  PANEL,
  setPanelWidth
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
  // Narrow: one row per metric; wide: the tiles side by side (two or more per row).
  await setPanelWidth(page, 220);
  const tiles = cards.first().locator('.jp-gpu-tile');
  const [util, mem] = [
    await tiles.nth(0).boundingBox(),
    await tiles.nth(1).boundingBox()
  ];
  expect(mem!.y).toBeGreaterThan(util!.y + util!.height - 1);
  await setPanelWidth(page, 440);
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
