/**
 * The launcher's "GPU tutorials" item: copy the tutorial notebooks into the user's files and
 * open the first one. The server's `POST tutorials` route does the copy through Jupyter's
 * contents manager (so it needs the same permission as saving a notebook), and never
 * overwrites a file the user already has: an edited notebook is kept, a deleted one comes back.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, showErrorMessage } from '@jupyterlab/apputils';
import { ILauncher } from '@jupyterlab/launcher';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import { gpuIcon } from './icon';
import {
  copyTutorials,
  FIRST_NOTEBOOK,
  TUTORIALS_FOLDER
} from './tutorialsApi';

export const COPY_TUTORIALS_COMMAND = 'jupyter-gpu:copy-tutorials';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-gpu:tutorials',
  description:
    'A launcher item that copies the GPU tutorial notebooks into your files.',
  autoStart: true,
  optional: [ILauncher, ICommandPalette, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    launcher: ILauncher | null,
    palette: ICommandPalette | null,
    translator: ITranslator | null
  ) => {
    const trans = (translator ?? nullTranslator).load('jupyter_gpu');
    app.commands.addCommand(COPY_TUTORIALS_COMMAND, {
      label: trans.__('GPU tutorials'),
      caption: trans.__(
        'Copy the GPU tutorial notebooks into %1/ (files you edited are kept) and open the first',
        TUTORIALS_FOLDER
      ),
      icon: gpuIcon,
      execute: async () => {
        try {
          const report = await copyTutorials(app.serviceManager.serverSettings);
          await app.commands.execute('filebrowser:go-to-path', {
            path: report.path,
            dontShowBrowser: true
          });
          await app.commands.execute('docmanager:open', {
            path: `${report.path}/${FIRST_NOTEBOOK}`
          });
        } catch (reason) {
          void showErrorMessage(
            trans.__('GPU tutorials'),
            trans.__('Could not copy the tutorials: %1', String(reason))
          );
        }
      }
    });
    launcher?.add({ command: COPY_TUTORIALS_COMMAND, category: 'Other' });
    palette?.addItem({ command: COPY_TUTORIALS_COMMAND, category: 'GPU' });
  }
};

export default plugin;
