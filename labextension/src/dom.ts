/**
 * DOM writes that happen only when something changed. Setting an attribute, `hidden` or text
 * to the value it already has is not free: the browser still records the mutation and
 * invalidates styles that depend on it. A panel update writes a few hundred of these; most are
 * unchanged from one second to the next. Reading them back (attributes, text) reads no layout.
 */

/** A new element with a class and, optionally, text. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/**
 * Set text only when it changed. An element that holds one text node gets that node's `data`
 * changed in place: a character-data change, where `textContent` would replace the node.
 */
export function setText(node: HTMLElement, text: string): void {
  const only = node.firstChild;
  if (
    text !== '' &&
    only !== null &&
    only === node.lastChild &&
    only.nodeType === Node.TEXT_NODE
  ) {
    const textNode = only as Text;
    if (textNode.data !== text) {
      textNode.data = text;
    }
  } else if (node.textContent !== text) {
    node.textContent = text;
  }
}

/** Hide or show only when that changes. */
export function setHidden(node: HTMLElement, hidden: boolean): void {
  if (node.hidden !== hidden) {
    node.hidden = hidden;
  }
}

/** Set a `data-*` attribute (`key` in camelCase) only when it changed. */
export function setData(node: HTMLElement, key: string, value: string): void {
  if (node.dataset[key] !== value) {
    node.dataset[key] = value;
  }
}

/** Set the tooltip only when it changed. */
export function setTitle(node: HTMLElement, title: string): void {
  if (node.title !== title) {
    node.title = title;
  }
}

/** A command-line option such as `--JupyterGpu.backend=simulated` (a sentence's `.` after it is not). */
const OPTION = /(--[A-Za-z][\w.]*=[\w:,-]+(?:\.[\w:,-]+)*)/;

/**
 * Set text in which command-line options are `<code>` that never breaks (a line broke
 * `--JupyterGpu.backend=simulated` after its `--`); only when the text changed.
 */
export function setTextWithOptions(node: HTMLElement, text: string): void {
  if (node.textContent === text && node.childElementCount > 0) {
    return;
  }
  const parts = text.split(OPTION);
  if (parts.length === 1) {
    setText(node, text);
    return;
  }
  node.replaceChildren(
    ...parts.map((part, i) => (i % 2 === 1 ? optionCode(part) : part))
  );
}

/**
 * `--JupyterGpu.backend=simulated` as code in two unbreakable pieces, `--JupyterGpu.` and
 * `backend=simulated`: a panel too narrow for the whole may break it there, nowhere else.
 */
function optionCode(option: string): HTMLElement {
  const code = el('code', 'jp-gpu-option');
  const cut = option.lastIndexOf('.', option.indexOf('=')) + 1;
  if (cut <= 0) {
    code.append(el('span', 'jp-gpu-option-part', option));
  } else {
    code.append(
      el('span', 'jp-gpu-option-part', option.slice(0, cut)),
      document.createElement('wbr'),
      el('span', 'jp-gpu-option-part', option.slice(cut))
    );
  }
  return code;
}
