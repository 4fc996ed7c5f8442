/**
 * The real transport: the jupyter-gpu API v1 through JupyterLab's ServerConnection, which
 * brings the base URL (JupyterHub's `/user/<name>/` included), the token or the login cookie,
 * and the XSRF header.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import {
  ApiError,
  ICacheCleared,
  IDevicesInfo,
  IGpuTransport,
  IColumnsQuery,
  IHistory,
  IHistoryColumns,
  ISample,
  IStreamConnection,
  IStreamHandlers
} from './types';

/** The API's namespace, below the server's base URL. */
export const API_PATH = 'jupyter-gpu/api/v1';

export class GpuApiClient implements IGpuTransport {
  constructor(settings?: ServerConnection.ISettings) {
    this.settings = settings ?? ServerConnection.makeSettings();
  }

  readonly settings: ServerConnection.ISettings;

  devices(): Promise<IDevicesInfo> {
    return this._get<IDevicesInfo>('devices');
  }

  history(since?: number): Promise<IHistory> {
    const query =
      since === undefined ? '' : `?since=${encodeURIComponent(since)}`;
    return this._get<IHistory>(`history${query}`);
  }

  /**
   * `POST compile-cache/clear` for the cache of `id` (from a sample's `compile_cache.dirs`).
   * ServerConnection sends the XSRF token the server requires. Rejects with an `ApiError`.
   */
  clearCompileCache(id: string): Promise<ICacheCleared> {
    return this._get<ICacheCleared>('compile-cache/clear', {
      method: 'POST',
      body: JSON.stringify({ id })
    });
  }

  historyColumns(query: IColumnsQuery): Promise<IHistoryColumns> {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) {
      if (value !== undefined) {
        params.set(key, String(value));
      }
    }
    return this._get<IHistoryColumns>(`history?${params.toString()}`);
  }

  openStream(handlers: IStreamHandlers): IStreamConnection {
    const { settings } = this;
    let url = URLExt.join(settings.wsUrl, API_PATH, 'stream');
    // As JupyterLab's own sockets do: the token goes in the URL only where the page says so
    // (a browser sends the login cookie with the upgrade request).
    if (settings.appendToken && settings.token) {
      url += `?token=${encodeURIComponent(settings.token)}`;
    }
    const socket = new settings.WebSocket(url);
    let closed = false;
    socket.onmessage = (event: MessageEvent) => {
      const message = parseMessage(event.data);
      if (message) {
        handlers.onSample(message);
      }
    };
    // `error` is always followed by `close`; one callback is enough.
    socket.onclose = (event: CloseEvent) => {
      if (!closed) {
        closed = true;
        handlers.onClose(event.code, event.reason);
      }
    };
    return {
      close: () => {
        closed = true;
        socket.onmessage = socket.onclose = null;
        socket.close();
      }
    };
  }

  private async _get<T>(path: string, init: RequestInit = {}): Promise<T> {
    const url = URLExt.join(this.settings.baseUrl, API_PATH, path);
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(url, init, this.settings);
    } catch (err) {
      throw new ApiError(0, err instanceof Error ? err.message : String(err));
    }
    if (!response.ok) {
      let message = `${response.status} ${response.statusText}`;
      try {
        const body = await response.json();
        if (body && typeof body.message === 'string') {
          message = body.message;
        }
      } catch {
        // Not JSON (a proxy's error page, say): the status line says enough.
      }
      throw new ApiError(response.status, message);
    }
    return (await response.json()) as T;
  }
}

/** A stream message's sample, or `null` for anything else (future message types). */
export function parseMessage(data: unknown): ISample | null {
  if (typeof data !== 'string') {
    return null;
  }
  try {
    const message = JSON.parse(data);
    if (message && message.type === 'sample' && message.sample) {
      const sample = message.sample as ISample;
      if (typeof message.age_s === 'number') {
        sample.age_s = message.age_s; // how old it was when sent (as `snapshot` says it)
      }
      return sample;
    }
  } catch {
    console.warn('jupyter-gpu: ignored a stream message that is not JSON');
  }
  return null;
}
