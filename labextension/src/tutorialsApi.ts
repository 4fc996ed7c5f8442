/**
 * The client of `POST tutorials`: the server copies the tutorial notebooks into the user's
 * files (see tutorials.ts for the launcher item that calls it).
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { API_PATH } from './api';

/** The folder the tutorials go to, relative to the server's root. */
export const TUTORIALS_FOLDER = 'gpu-tutorials';
export const FIRST_NOTEBOOK = '00-start-here.ipynb';

/** What the server copied, by path relative to the folder. */
export interface ITutorialsCopied {
  path: string;
  copied: string[];
  unchanged: string[];
  kept: string[];
}

/**
 * Ask the server to copy the tutorials into `path`.
 *
 * @throws Error with the server's message when it refuses (403, 400, 409).
 */
export async function copyTutorials(
  settings: ServerConnection.ISettings,
  path: string = TUTORIALS_FOLDER
): Promise<ITutorialsCopied> {
  const url = URLExt.join(settings.baseUrl, API_PATH, 'tutorials');
  const response = await ServerConnection.makeRequest(
    url,
    { method: 'POST', body: JSON.stringify({ path }) },
    settings
  );
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const body = (await response.json()) as { message?: string };
      if (body.message) {
        message = body.message;
      }
    } catch {
      // not JSON: keep the status line
    }
    throw new Error(message);
  }
  return (await response.json()) as ITutorialsCopied;
}
