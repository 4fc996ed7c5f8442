/**
 * The process table's and the cache section's actions in JupyterLab: a confirmation dialog,
 * then the normal Jupyter APIs (the kernel manager for shutdown, the kernel REST API for
 * interrupt, the document manager to open a notebook, our API for a cache clear).
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { KernelAPI } from '@jupyterlab/services';
import { trans } from './i18n';
import { IProcessActions } from './proctable';

/** Ask before doing something that cannot be undone; true if the person agreed. */
export async function confirm(
  title: string,
  body: string,
  accept: string
): Promise<boolean> {
  const result = await showDialog({
    title,
    body,
    buttons: [
      Dialog.cancelButton({ label: trans.__('Cancel') }),
      Dialog.warnButton({ label: accept })
    ]
  });
  return result.button.accept;
}

export function kernelActions(app: JupyterFrontEnd): IProcessActions {
  const settings = app.serviceManager.serverSettings;
  return {
    openNotebook: (path: string) =>
      void app.commands.execute('docmanager:open', { path }),
    interruptKernel: async (kernelId: string, label: string) => {
      if (
        await confirm(
          trans.__('Interrupt kernel?'),
          trans.__(
            'Interrupt the running cell of %1? Its kernel and variables stay.',
            label
          ),
          trans.__('Interrupt')
        )
      ) {
        await KernelAPI.interruptKernel(kernelId, settings);
      }
    },
    shutdownKernel: async (kernelId: string, label: string) => {
      if (
        await confirm(
          trans.__('Shut down kernel?'),
          trans.__(
            'Shut down the kernel of %1? Its variables are lost and its GPU memory is freed.',
            label
          ),
          trans.__('Shut Down')
        )
      ) {
        await app.serviceManager.kernels.shutdown(kernelId);
      }
    }
  };
}
