/// <reference types="node" />
// The frontend's modules import one another one way, as tests/unit/test_layers.py holds the
// Python package to its plan. The views (the sidebar's cards/, the dashboard/) stand on the
// modules at the root of src/ and never on each other: what both need (a GPU's identity, the
// clock's format, a chart's gaps and bands) lives at the root. A root module reaches a view
// only where it is an entry point that puts the view on screen. No module imports itself back
// through others (no circle), whatever the floor.
import { readdirSync, readFileSync, statSync } from 'fs';
import { dirname, join, normalize, relative, sep } from 'path';

const SRC = join(__dirname, '..');

/** The other view folders each view folder may import (none: views stand side by side). */
const VIEWS_MAY_IMPORT: { [folder: string]: string[] } = {
  cards: [],
  dashboard: []
};

/** The root modules that put a view on screen, with the view folders each may import. */
const ENTRIES: { [module: string]: string[] } = {
  'index.ts': ['dashboard'],
  'panel.ts': ['cards']
};

/** Every module of src/ (path relative to it, `/`-separated), tests left out. */
function modules(dir = SRC): string[] {
  const found: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (name !== '__tests__') {
        found.push(...modules(path));
      }
    } else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) {
      found.push(relative(SRC, path).split(sep).join('/'));
    }
  }
  return found.sort();
}

/**
 * The relative specifiers that `text` imports or re-exports: `import … from './x'` over
 * several lines, `import type`, `export { … } from`, `import './x'`. Packages are left out.
 */
function importedSpecifiers(text: string): string[] {
  const pattern =
    /^\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\s+from\s+)?['"](\.[^'"]*)['"]/gm;
  return [...text.matchAll(pattern)].map(m => m[1]);
}

/** The module that `specifier`, imported from `module`, names (`./cards` is its index.ts). */
function resolve(
  module: string,
  specifier: string,
  known: Set<string>
): string {
  const base = normalize(join(dirname(module), specifier))
    .split(sep)
    .join('/');
  for (const candidate of [`${base}.ts`, `${base}/index.ts`]) {
    if (known.has(candidate)) {
      return candidate;
    }
  }
  return base; // not a module of src/ (a JSON file, a style): no floor of its own
}

/** Module -> the modules of src/ it imports. */
function importGraph(): Map<string, string[]> {
  const all = modules();
  const known = new Set(all);
  const graph = new Map<string, string[]>();
  for (const module of all) {
    const text = readFileSync(join(SRC, module), 'utf-8');
    graph.set(
      module,
      importedSpecifiers(text)
        .map(s => resolve(module, s, known))
        .filter(m => known.has(m))
    );
  }
  return graph;
}

/** The view folder a module is in, or `null` for a module at the root of src/. */
function folderOf(module: string): string | null {
  const parts = module.split('/');
  return parts.length > 1 ? parts[0] : null;
}

describe('the frontend’s layers', () => {
  it('declares every view folder', () => {
    const folders = new Set(
      modules()
        .map(folderOf)
        .filter(f => f !== null)
    );
    // A new folder is a new view: say here which folders it may import.
    expect([...folders].sort()).toEqual(Object.keys(VIEWS_MAY_IMPORT).sort());
  });

  it('has no view import another view, and no root module import a view but its entry', () => {
    const reachingUp: string[] = [];
    for (const [module, imported] of importGraph()) {
      const from = folderOf(module);
      const allowed =
        from === null
          ? (ENTRIES[module] ?? [])
          : [from, ...VIEWS_MAY_IMPORT[from]];
      for (const target of imported) {
        const to = folderOf(target);
        if (to !== null && !allowed.includes(to)) {
          reachingUp.push(`${module} -> ${target}`);
        }
      }
    }
    expect(reachingUp).toEqual([]);
  });

  it('has no circle between modules', () => {
    const graph = importGraph();
    const done = new Set<string>();
    const circles: string[] = [];
    const visit = (module: string, path: string[]) => {
      if (path.includes(module)) {
        circles.push(
          [...path.slice(path.indexOf(module)), module].join(' -> ')
        );
        return;
      }
      if (done.has(module)) {
        return;
      }
      for (const next of graph.get(module) ?? []) {
        visit(next, [...path, module]);
      }
      done.add(module);
    };
    for (const module of graph.keys()) {
      visit(module, []);
    }
    expect(circles).toEqual([]);
  });

  it('sees the imports it looks for', () => {
    const sample = [
      "import uPlot from 'uplot';",
      "import { a } from './a';",
      'import {',
      '  b,',
      '  c',
      "} from '../dashboard/b';",
      "import type { D } from './d';",
      "export { E } from './cards/e';",
      "export type { F } from './f';",
      "import './style.css';",
      "// a comment that says from './not-an-import'"
    ].join('\n');
    expect(importedSpecifiers(sample)).toEqual([
      './a',
      '../dashboard/b',
      './d',
      './cards/e',
      './f',
      './style.css'
    ]);
  });
});
