/**
 * Just enough of the DOM for the monitor's own element code (`dom.ts`, the tables, the host
 * card without drawing) to run under jest's node environment: elements with text, attributes,
 * `title`, `hidden`, `dataset`, `classList`, `style` and children. Nothing is laid out or drawn.
 */

class FakeText {
  constructor(public data: string) {}
  readonly nodeType = 3;
  get textContent(): string {
    return this.data;
  }
}

type Child = FakeElement | FakeText;

export class FakeElement {
  constructor(readonly tagName: string) {}
  readonly nodeType = 1;
  children: Child[] = [];
  attributes = new Map<string, string>();
  dataset: Record<string, string> = {};
  className = '';
  title = '';
  hidden = false;
  disabled = false;
  dateTime = '';
  style = { setProperty: (): void => undefined };
  classList = {
    add: (c: string): void => {
      this.className = `${this.className} ${c}`.trim();
    },
    toggle: (): void => undefined
  };
  get firstChild(): Child | null {
    return this.children[0] ?? null;
  }
  get lastChild(): Child | null {
    return this.children[this.children.length - 1] ?? null;
  }
  get childElementCount(): number {
    return this.children.filter(c => c instanceof FakeElement).length;
  }
  get textContent(): string {
    return this.children.map(c => c.textContent).join('');
  }
  set textContent(text: string) {
    this.children = text ? [new FakeText(text)] : [];
  }
  setAttribute(name: string, value: string): void {
    this.attributes.set(name, value);
  }
  getAttribute(name: string): string | null {
    return this.attributes.get(name) ?? null;
  }
  append(...nodes: (Child | string)[]): void {
    for (const n of nodes) {
      this.children.push(typeof n === 'string' ? new FakeText(n) : n);
    }
  }
  replaceChildren(...nodes: Child[]): void {
    this.children = [];
    this.append(...nodes);
  }
  addEventListener(): void {
    return;
  }
  remove(): void {
    return;
  }
}

/** Install the fake as the global `document` (and `Node`); returns a function that removes it. */
export function installFakeDom(): () => void {
  const g = globalThis as Record<string, unknown>;
  const saved = { document: g.document, Node: g.Node };
  g.document = {
    createElement: (tag: string) => new FakeElement(tag)
  };
  g.Node = { TEXT_NODE: 3, ELEMENT_NODE: 1 };
  return () => {
    g.document = saved.document;
    g.Node = saved.Node;
  };
}

/** Every string a person can see or hear in `root`: text, tooltips, aria-labels. */
export function shownStrings(root: FakeElement): string[] {
  const out: string[] = [];
  const walk = (node: FakeElement) => {
    if (node.hidden) {
      return;
    }
    for (const s of [node.title, node.getAttribute('aria-label') ?? '']) {
      if (s) {
        out.push(s);
      }
    }
    for (const child of node.children) {
      if (child instanceof FakeElement) {
        walk(child);
      } else if (child.data.trim()) {
        out.push(child.data);
      }
    }
  };
  walk(root);
  return out;
}
