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
  await page
    .locator('#jupyterlab-splash')
    .waitFor({ state: 'detached', timeout: 30000 });
  await expect(page.locator(PANEL_TAB)).toBeVisible();
}

/** Click the monitor's icon in the left sidebar and wait for the panel. */
export async function openPanel(page: Page): Promise<Locator> {
  await page.locator(PANEL_TAB).click();
  const panel = page.locator(PANEL);
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
