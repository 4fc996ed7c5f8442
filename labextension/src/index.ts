import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';

/**
 * Placeholder plugin: the sidebar GPU monitor replaces it (see the sidebar issue).
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-gpu:plugin',
  description: 'GPU monitor for JupyterLab.',
  autoStart: true,
  activate: (_app: JupyterFrontEnd) => {
    console.debug('jupyter-gpu extension is activated');
  }
};

export default plugin;
