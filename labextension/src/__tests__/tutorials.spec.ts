import { ServerConnection } from '@jupyterlab/services';
import { copyTutorials, TUTORIALS_FOLDER } from '../tutorialsApi';

interface ICall {
  url: string;
  method: string | undefined;
  body: string;
}

function settingsAnswering(status: number, body: unknown, calls: ICall[]) {
  const fetch = async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = input as Request;
    calls.push({
      url: request.url ?? String(input),
      method: request.method ?? init?.method,
      body: request.text ? await request.text() : String(init?.body)
    });
    return new Response(JSON.stringify(body), {
      status,
      headers: { 'Content-Type': 'application/json' }
    });
  };
  return ServerConnection.makeSettings({
    baseUrl: 'http://localhost:8888/user/ada/',
    fetch: fetch as typeof globalThis.fetch,
    Request: globalThis.Request,
    Headers: globalThis.Headers
  });
}

describe('copyTutorials', () => {
  it('posts the folder under the base URL and returns what was copied', async () => {
    const calls: ICall[] = [];
    const report = {
      path: TUTORIALS_FOLDER,
      copied: ['00-start-here.ipynb'],
      unchanged: [],
      kept: ['01-torch-compile.ipynb']
    };
    const got = await copyTutorials(settingsAnswering(201, report, calls));
    expect(got).toEqual(report);
    expect(calls).toHaveLength(1);
    expect(calls[0].url.split('?')[0]).toBe(
      'http://localhost:8888/user/ada/jupyter-gpu/api/v1/tutorials'
    );
    expect(calls[0].method).toBe('POST');
    expect(JSON.parse(calls[0].body)).toEqual({ path: TUTORIALS_FOLDER });
  });

  it("says the server's reason when it refuses", async () => {
    const calls: ICall[] = [];
    await expect(
      copyTutorials(
        settingsAnswering(403, { message: 'Forbidden' }, calls),
        'x'
      )
    ).rejects.toThrow('Forbidden');
  });
});
