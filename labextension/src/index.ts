/**
 * jupyter-gpu's JupyterLab plugin: one model (connection and history, provided to other
 * extensions as `IGpuMonitor`), the sidebar panel, the main-area dashboard and the status-bar
 * item that read it, cell markers from the notebooks' execution signals, alerts through
 * JupyterLab's notifications, and the user's settings.
 */
import {
  ILabShell,
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  ICommandPalette,
  IThemeManager,
  MainAreaWidget,
  Notification,
  WidgetTracker
} from '@jupyterlab/apputils';
import { NotebookActions } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ITranslator } from '@jupyterlab/translation';
import { Signal } from '@lumino/signaling';
import { Menu } from '@lumino/widgets';
import { AlertTracker } from './alerts';
import { GpuApiClient } from './api';
import { GpuDashboard } from './dashboard/dashboard';
import { setTrans, trans } from './i18n';
import { gpuIcon } from './icon';
import { GpuMonitorModel } from './model';
import { GpuPanel } from './panel';
import { DEFAULT_SETTINGS, effectiveWindowS, readSettings } from './settings';
import { GpuStatusItem } from './statusbar';
import tutorialsPlugin from './tutorials';
import { confirm, kernelActions } from './kernelactions';
import { IGpuMonitor } from './tokens';

export { IGpuMonitor } from './tokens';

const PLUGIN_ID = 'jupyter-gpu:plugin';
const OPEN_COMMAND = 'jupyter-gpu:open';
const DASHBOARD_COMMAND = 'jupyter-gpu:dashboard';

/** The dashboard always has the 5 min range in the live buffer. */
const DASHBOARD_LIVE_S = 300;

/** The structural parts of a notebook execution signal's payload this plugin reads. */
interface IExecution {
  notebook: { parent: unknown };
  cell: {
    model: {
      id: string;
      type: string;
      sharedModel: { getSource(): string };
      executionCount?: number | null;
    };
  };
  success?: boolean;
}

function notebookPath(execution: IExecution): string {
  const panel = execution.notebook.parent as {
    context?: { path?: string };
  } | null;
  return panel?.context?.path ?? trans.__('a notebook');
}

const plugin: JupyterFrontEndPlugin<IGpuMonitor> = {
  id: PLUGIN_ID,
  description:
    'A GPU monitor in the sidebar, a dashboard in the main area, and the status bar.',
  autoStart: true,
  provides: IGpuMonitor,
  optional: [
    ILabShell,
    ISettingRegistry,
    IStatusBar,
    IThemeManager,
    ICommandPalette,
    ILayoutRestorer,
    ITranslator
  ],
  activate: (
    app: JupyterFrontEnd,
    labShell: ILabShell | null,
    registry: ISettingRegistry | null,
    statusBar: IStatusBar | null,
    themes: IThemeManager | null,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    translator: ITranslator | null
  ): IGpuMonitor => {
    setTrans(translator?.load('jupyter_gpu') ?? null);
    const model = new GpuMonitorModel({
      transport: new GpuApiClient(app.serviceManager.serverSettings),
      refreshMs: DEFAULT_SETTINGS.refreshIntervalMs,
      windowS: DASHBOARD_LIVE_S
    });
    const client = new GpuApiClient(app.serviceManager.serverSettings);
    const panel = new GpuPanel({
      model,
      openNotebook: path =>
        void app.commands.execute('docmanager:open', { path }),
      processActions: kernelActions(app),
      cacheActions: { confirm, clear: id => client.clearCompileCache(id) },
      openDashboard: () => void app.commands.execute(DASHBOARD_COMMAND)
    });
    panel.title.icon = gpuIcon;
    app.shell.add(panel, 'left', { rank: 700 });
    restorer?.add(panel, panel.id);

    app.commands.addCommand(OPEN_COMMAND, {
      label: trans.__('Open the GPU monitor'),
      caption: trans.__(
        'Show GPU utilization, memory, power and temperature in the sidebar'
      ),
      icon: gpuIcon,
      execute: () => {
        if (labShell && !labShell.leftCollapsed && panel.isVisible) {
          return; // already open: a second click does not collapse it
        }
        app.shell.activateById(panel.id);
      }
    });
    palette?.addItem({ command: OPEN_COMMAND, category: 'GPU' });

    // The dashboard: one at a time, restored with the layout.
    const tracker = new WidgetTracker<MainAreaWidget<GpuDashboard>>({
      namespace: 'jupyter-gpu-dashboard'
    });
    let dashboard: MainAreaWidget<GpuDashboard> | null = null;
    app.commands.addCommand(DASHBOARD_COMMAND, {
      label: trans.__('GPU dashboard'),
      caption: trans.__(
        'One row per GPU with large charts: 5 min, 1 h or 24 h, cell runs as bands'
      ),
      icon: gpuIcon,
      execute: async args => {
        // Opened before the layout is restored, the restored layout would drop it; the
        // restorer itself (restoring: true) must not wait for what it is part of.
        if (!args.restoring) {
          await app.restored;
        }
        if (!dashboard || dashboard.isDisposed) {
          const content = new GpuDashboard(model);
          dashboard = new MainAreaWidget({ content });
          // MainAreaWidget names its content "main area content": say what it is.
          content.node.setAttribute('aria-label', trans.__('GPU dashboard'));
          dashboard.id = 'jupyter-gpu-dashboard-main';
          dashboard.title.label = trans.__('GPU dashboard');
          dashboard.title.icon = gpuIcon;
          dashboard.title.closable = true;
          themes?.themeChanged.connect(() => content.themeChanged());
          void tracker.add(dashboard);
        }
        if (!dashboard.isAttached) {
          app.shell.add(dashboard, 'main');
        }
        app.shell.activateById(dashboard.id);
      }
    });
    palette?.addItem({ command: DASHBOARD_COMMAND, category: 'GPU' });
    if (restorer) {
      void restorer.restore(tracker, {
        command: DASHBOARD_COMMAND,
        args: () => ({ restoring: true }),
        name: () => 'jupyter-gpu-dashboard'
      });
    }

    let settings = DEFAULT_SETTINGS;
    // The status bar shows or hides the item as the setting says; hidden, it stops asking
    // the model for data.
    const statusActiveChanged = new Signal<GpuMonitorModel, void>(model);
    if (statusBar) {
      const menu = new Menu({ commands: app.commands });
      menu.addItem({ command: OPEN_COMMAND });
      menu.addItem({ command: DASHBOARD_COMMAND });
      const statusItem = new GpuStatusItem(model, (x, y) => menu.open(x, y));
      statusBar.registerStatusItem('jupyter-gpu:status', {
        item: statusItem,
        align: 'left',
        rank: 3,
        isActive: () => settings.showStatusBar,
        activeStateChanged: statusActiveChanged
      });
    }

    themes?.themeChanged.connect(() => panel.themeChanged());

    // Cell markers from JupyterLab's own execution signals (no kernel change).
    NotebookActions.executionScheduled.connect((_, args) => {
      const execution = args as unknown as IExecution;
      const cell = execution.cell.model;
      if (settings.cellMarkers && cell.type === 'code') {
        model.cellScheduled(
          notebookPath(execution),
          cell.id,
          cell.sharedModel.getSource()
        );
      }
    });
    NotebookActions.executed.connect((_, args) => {
      const execution = args as unknown as IExecution;
      const cell = execution.cell.model;
      if (cell.type === 'code') {
        model.cellExecuted(
          notebookPath(execution),
          cell.id,
          cell.executionCount ?? null,
          execution.success !== false
        );
      }
    });

    // Alerts, each said once per event.
    const alerts = new AlertTracker();
    let lastChecked = -1;
    model.changed.connect(() => {
      const latest = model.latest;
      if (!latest || latest.seq === lastChecked) {
        return;
      }
      lastChecked = latest.seq;
      for (const alert of alerts.check(latest, settings.alerts)) {
        if (alert.level === 'error') {
          Notification.error(alert.message, { autoClose: false });
        } else {
          Notification.warning(alert.message, { autoClose: 15000 });
        }
      }
    });

    const applyWindow = () => {
      const sidebarS = effectiveWindowS(
        settings.historyWindowS,
        model.info?.config.history_s
      );
      panel.windowS = sidebarS;
      model.windowS = Math.max(sidebarS, DASHBOARD_LIVE_S);
      panel.node.dataset.windowS = String(sidebarS);
    };
    model.changed.connect(() => {
      if (model.info?.config.history_s !== undefined) {
        applyWindow();
      }
    });
    const apply = (composite: { [key: string]: unknown }) => {
      settings = readSettings(composite);
      model.refreshMs = settings.refreshIntervalMs;
      panel.settings = settings;
      applyWindow();
      statusActiveChanged.emit();
      panel.node.dataset.refreshMs = String(settings.refreshIntervalMs);
    };
    applyWindow();
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
    return model;
  }
};

export default [plugin, tutorialsPlugin];
