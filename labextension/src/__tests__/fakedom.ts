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
      if (!this.classList.contains(c)) {
        this.className = `${this.className} ${c}`.trim();
      }
    },
    remove: (c: string): void => {
      this.className = this.className
        .split(/\s+/)
        .filter(name => name && name !== c)
        .join(' ');
    },
    contains: (c: string): boolean => this.className.split(/\s+/).includes(c),
    toggle: (c: string, force?: boolean): boolean => {
      const on = force ?? !this.classList.contains(c);
      if (on) {
        this.classList.add(c);
      } else {
        this.classList.remove(c);
      }
      return on;
    }
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
  get childNodes(): Child[] {
    return this.children;
  }
  /** The elements below this one (depth first) that have class `name`. */
  findAll(name: string): FakeElement[] {
    const out: FakeElement[] = [];
    for (const child of this.children) {
      if (child instanceof FakeElement) {
        if (child.classList.contains(name)) {
          out.push(child);
        }
        out.push(...child.findAll(name));
      }
    }
    return out;
  }
  /** The first element below this one with class `name` (throws when there is none). */
  find(name: string): FakeElement {
    const found = this.findAll(name)[0];
    if (!found) {
      throw new Error(`no .${name} in <${this.tagName}>`);
    }
    return found;
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
