// Every string the tables and the host card show goes through the translator: with a
// translator that marks what it returns, nothing readable is left unmarked but the data itself
// (paths, names, numbers with their units).
import { SampleBuffer } from '../buffer';
import { CacheSection } from '../cachesection';
import { HostCard } from '../cards/host';
import { Palette } from '../chart';
import { setTrans } from '../i18n';
import { freshnessOf } from '../freshness';
import { CellMarkers } from '../markers';
import { ProcessList } from '../processes';
import { ProcessTable } from '../proctable';
import { DEFAULT_SETTINGS } from '../settings';
import { ISample } from '../types';
import { FakeElement, installFakeDom, shownStrings } from './fakedom';
import { makeSample } from './fakeserver';

const fill = (text: string, args: unknown[]) =>
  text.replace(/%(\d+)/g, (_w, n) => String(args[Number(n) - 1]));

/** A translation that brackets what it translates: `⟦…⟧`. */
const marking = {
  __: (msgid: string, ...args: unknown[]) => `⟦${fill(msgid, args)}⟧`,
  _n: (msgid: string, plural: string, n: number, ...args: unknown[]) =>
    `⟦${fill(n === 1 ? msgid : plural, [n, ...args])}⟧`
};

const DATA = [
  'work/train.ipynb',
  '/home/me/.cache/torch/inductor',
  '/tmp/k/triton',
  'inductor',
  'triton',
  'train',
  'python3',
  'not a cache dir'
];

/** What is left of `text` once the translated parts and the data are taken out. */
function untranslated(text: string): string {
  let rest = text.replace(/⟦[^⟦⟧]*(⟦[^⟦⟧]*⟧[^⟦⟧]*)*⟧/g, '');
  for (const d of DATA) {
    rest = rest.split(d).join('');
  }
  // Numbers with units, and separators, are data too.
  rest = rest.replace(/-?[\d.]+\s*(B|KiB|MiB|GiB|%|s|min|h)?\b/g, '');
  return /[A-Za-z]{2,}/.test(rest) ? text : '';
}

function leftovers(node: unknown): string[] {
  return shownStrings(node as FakeElement)
    .map(untranslated)
    .filter(Boolean);
}

/** A model whose readings are all live. */
const noneStale = {
  freshness: () => freshnessOf(undefined),
  lastKnown: () => null,
  readAgeS: () => null,
  lastLive: () => null
};

function sample(): ISample {
  const base = makeSample(1, 1000, 1);
  return {
    ...base,
    host: {
      cpu_pct: 12,
      cpu_count: 8,
      mem_used_bytes: 2e9,
      mem_total_bytes: 8e9,
      mem_limit_source: 'cgroup'
    },
    compile_cache: {
      size_bytes: 3e6,
      file_count: 3,
      scanned_ts: 990,
      low_space: true,
      dirs: [
        {
          kind: 'inductor',
          path: '/home/me/.cache/torch/inductor',
          exists: true,
          size_bytes: 3e6,
          file_count: 3,
          id: 'a',
          source: 'server',
          clearable: true,
          fs_free_bytes: 1e9,
          fs_total_bytes: 1e10
        },
        {
          kind: 'triton',
          path: '/tmp/k/triton',
          exists: true,
          size_bytes: 0,
          file_count: 0,
          id: 'b',
          source: 'kernel',
          clearable: false,
          refusal: 'not a cache dir'
        },
        {
          kind: 'triton',
          path: '/tmp/k/triton',
          exists: false,
          size_bytes: 0,
          file_count: 0,
          source: 'kernel'
        }
      ]
    },
    devices: [
      {
        ...base.devices[0],
        processes: [
          {
            pid: 11,
            name: 'python3',
            used_mem_bytes: 1e9,
            kernel_id: 'abcdef0123456789',
            notebook: 'work/train.ipynb',
            idle_s: 1800,
            idle_holder: true
          },
          {
            pid: 12,
            name: 'python3',
            used_mem_bytes: 2e9,
            kernel_id: 'bbcdef0123456789',
            notebook: null,
            idle_s: 0
          },
          {
            pid: 13,
            name: null,
            used_mem_bytes: null,
            kernel_id: null,
            notebook: null
          },
          {
            pid: null,
            name: null,
            used_mem_bytes: 5e8,
            kernel_id: null,
            notebook: null,
            scope: 'other_users',
            process_count: 2
          },
          {
            pid: 14,
            name: 'python3',
            used_mem_bytes: 1e8,
            kernel_id: null,
            notebook: null
          }
        ]
      }
    ]
  } as ISample;
}

describe('every shown string goes through the translator', () => {
  let uninstall: () => void;
  beforeEach(() => {
    uninstall = installFakeDom();
    setTrans(marking);
  });
  afterEach(() => {
    setTrans(null);
    uninstall();
  });

  it('finds an untranslated string (the check can fail)', () => {
    const node = new FakeElement('div');
    node.append('⟦Processes⟧', 'No GPU processes');
    expect(leftovers(node)).toEqual(['No GPU processes']);
  });

  it('the process table, with its actions', () => {
    const table = new ProcessTable({
      openNotebook: () => undefined,
      interruptKernel: async () => undefined,
      shutdownKernel: async () => undefined
    });
    table.update(sample());
    expect(leftovers(table.node)).toEqual([]);
    table.update(null);
    expect(leftovers(table.node)).toEqual([]);
  });

  it("a card's process list", () => {
    const list = new ProcessList(() => undefined);
    const s = sample();
    list.update(s.devices[0].processes, 80e9, null, true);
    expect(leftovers(list.node)).toEqual([]);
    list.update([], 80e9);
    expect(leftovers(list.node)).toEqual([]);
    list.update([], 80e9, 'Not Supported');
    expect(leftovers(list.node)).toEqual([]);
  });

  it('the cache table, scanned and not', () => {
    const section = new CacheSection({
      confirm: async () => true,
      clear: async () => ({
        id: 'a',
        kind: 'inductor',
        path: '/x',
        freed_bytes: 0,
        files_removed: 0,
        failed: []
      })
    });
    section.update(sample());
    expect(leftovers(section.node)).toEqual([]);
    const unscanned = sample();
    unscanned.compile_cache = null;
    section.update(unscanned);
    expect(leftovers(section.node)).toEqual([]);
  });

  it('the host card', () => {
    const card = new HostCard(new Palette());
    const buffer = new SampleBuffer(300);
    buffer.add([sample()]);
    card.render(
      {
        buffer,
        latest: sample(),
        charts: DEFAULT_SETTINGS.charts,
        xMin: 700,
        xMax: 1000,
        intervalS: 1,
        simulated: true,
        compact: false,
        markers: new CellMarkers(),
        readings: noneStale,
        now: 1000,
        onHoverTime: () => undefined
      },
      false
    );
    const shown = shownStrings(card.node as unknown as FakeElement);
    expect(shown.join('\n')).toContain('⟦Host⟧');
    expect(leftovers(card.node)).toEqual([]);
  });
});
