/**
 * jupyter-gpu's JupyterLab plugin: one model (connection and history), the sidebar panel and
 * the status-bar item that read it, and the user's settings.
 */
import {
  ILabShell,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, IThemeManager } from '@jupyterlab/apputils';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { Signal } from '@lumino/signaling';
import { IStatusBar } from '@jupyterlab/statusbar';
import { GpuApiClient } from './api';
import { gpuIcon } from './icon';
import { GpuMonitorModel } from './model';
import { GpuPanel } from './panel';
import { DEFAULT_SETTINGS, readSettings } from './settings';
import { GpuStatusItem } from './statusbar';
import tutorialsPlugin from './tutorials';
import { confirm, kernelActions } from './kernelactions';

const PLUGIN_ID = 'jupyter-gpu:plugin';
const OPEN_COMMAND = 'jupyter-gpu:open';

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'A GPU monitor in the sidebar and the status bar.',
  autoStart: true,
  optional: [
    ILabShell,
    ISettingRegistry,
    IStatusBar,
    IThemeManager,
    ICommandPalette
  ],
  activate: (
    app: JupyterFrontEnd,
    labShell: ILabShell | null,
    registry: ISettingRegistry | null,
    statusBar: IStatusBar | null,
    themes: IThemeManager | null,
    palette: ICommandPalette | null
  ) => {
    const model = new GpuMonitorModel({
      transport: new GpuApiClient(app.serviceManager.serverSettings),
      refreshMs: DEFAULT_SETTINGS.refreshIntervalMs,
      windowS: DEFAULT_SETTINGS.historyWindowS
    });
    const client = new GpuApiClient(app.serviceManager.serverSettings);
    const panel = new GpuPanel({
      model,
      openNotebook: path =>
        void app.commands.execute('docmanager:open', { path }),
      processActions: kernelActions(app),
      cacheActions: { confirm, clear: id => client.clearCompileCache(id) }
    });
    panel.title.icon = gpuIcon;
    app.shell.add(panel, 'left', { rank: 700 });

    app.commands.addCommand(OPEN_COMMAND, {
      label: 'Open the GPU monitor',
      caption:
        'Show GPU utilization, memory, power and temperature in the sidebar',
      icon: gpuIcon,
      execute: () => {
        if (labShell && !labShell.leftCollapsed && panel.isVisible) {
          return; // already open: a second click does not collapse it
        }
        app.shell.activateById(panel.id);
      }
    });
    palette?.addItem({ command: OPEN_COMMAND, category: 'GPU' });

    let settings = DEFAULT_SETTINGS;
    // The status bar shows or hides the item as the setting says; hidden, it stops asking
    // the model for data.
    const statusActiveChanged = new Signal<GpuMonitorModel, void>(model);
    if (statusBar) {
      const statusItem = new GpuStatusItem(model, () => {
        void app.commands.execute(OPEN_COMMAND);
      });
      statusBar.registerStatusItem('jupyter-gpu:status', {
        item: statusItem,
        align: 'left',
        rank: 3,
        isActive: () => settings.showStatusBar,
        activeStateChanged: statusActiveChanged
      });
    }

    themes?.themeChanged.connect(() => panel.themeChanged());

    const apply = (composite: { [key: string]: unknown }) => {
      settings = readSettings(composite);
      model.refreshMs = settings.refreshIntervalMs;
      model.windowS = settings.historyWindowS;
      panel.settings = settings;
      statusActiveChanged.emit();
      panel.node.dataset.refreshMs = String(settings.refreshIntervalMs);
      panel.node.dataset.windowS = String(settings.historyWindowS);
    };
    if (registry) {
      registry
        .load(PLUGIN_ID)
        .then(loaded => {
          apply(loaded.composite as { [key: string]: unknown });
          loaded.changed.connect(() =>
            apply(loaded.composite as { [key: string]: unknown })
          );
        })
        .catch(reason => {
          console.error(
            'jupyter-gpu: could not load its settings; using defaults.',
            reason
          );
        });
    }
  }
};

export default [plugin, tutorialsPlugin];
