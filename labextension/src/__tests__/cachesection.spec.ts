// The cache rows' "Clear…" button on the fake DOM; the clear itself (confirmation, the
// server's checks) is covered by ui-tests/tests/data.spec.ts.
import { CacheSection } from '../cachesection';
import { ICacheDir, ISample } from '../types';
import { FakeElement, installFakeDom } from './fakedom';

function sample(dir: Partial<ICacheDir>): ISample {
  return {
    seq: 1,
    ts: 1000,
    backend: 'none',
    simulated: false,
    reason: null,
    host: null,
    devices: [],
    compile_cache: {
      size_bytes: dir.size_bytes ?? 0,
      file_count: dir.file_count ?? 0,
      scanned_ts: 999,
      dirs: [
        {
          kind: 'inductor',
          path: '/tmp/torchinductor_me',
          exists: true,
          size_bytes: 0,
          file_count: 0,
          id: '0123456789ab',
          source: 'server',
          clearable: true,
          refusal: null,
          ...dir
        }
      ]
    }
  } as ISample;
}

describe('CacheSection', () => {
  let restore: () => void;
  beforeEach(() => (restore = installFakeDom()));
  afterEach(() => restore());

  const button = (section: CacheSection) =>
    (section.node as unknown as FakeElement).find('jp-gpu-cache-clear');

  it('offers to clear a cache that holds files', () => {
    const section = new CacheSection({
      confirm: async () => false,
      clear: async () => Promise.reject(new Error('not called'))
    });
    section.update(sample({ size_bytes: 5120, file_count: 2 }));
    expect(button(section).disabled).toBe(false);
    expect(button(section).title).toBe(
      'Delete what is inside /tmp/torchinductor_me'
    );
  });

  it('greys "Clear…" on an empty cache and says why in its tooltip', () => {
    const section = new CacheSection({
      confirm: async () => false,
      clear: async () => Promise.reject(new Error('not called'))
    });
    section.update(sample({ size_bytes: 0, file_count: 0 }));
    expect(button(section).disabled).toBe(true);
    expect(button(section).title).toBe(
      'Nothing to clear: /tmp/torchinductor_me holds no files (0 B).'
    );
    // Files appear (torch compiled something): the same row offers to clear them.
    section.update(sample({ size_bytes: 0, file_count: 1 }));
    expect(button(section).disabled).toBe(false);
  });
});
