/**
 * Every string the monitor shows goes through `trans` (JupyterLab's ITranslator, domain
 * `jupyter_gpu`). Until the plugin sets the translator, and in unit tests, `trans` returns the
 * English text with `%1`, `%2`… filled in, as JupyterLab's null translator does.
 *
 * This module imports nothing, so the pure modules that use it run without JupyterLab.
 */

/** The part of JupyterLab's `TranslationBundle` the monitor uses. */
export interface ITrans {
  __(msgid: string, ...args: unknown[]): string;
  _n(msgid: string, msgidPlural: string, n: number, ...args: unknown[]): string;
}

function fill(text: string, args: unknown[]): string {
  return text.replace(/%(\d+)/g, (whole, n) => {
    const i = Number(n) - 1;
    return i < args.length ? String(args[i]) : whole;
  });
}

const english: ITrans = {
  __: (msgid, ...args) => fill(msgid, args),
  _n: (msgid, plural, n, ...args) =>
    fill(n === 1 ? msgid : plural, [n, ...args])
};

/** The translation bundle in use (English until `setTrans`). */
export let trans: ITrans = english;

/** Use JupyterLab's bundle (from `ITranslator.load('jupyter_gpu')`). */
export function setTrans(bundle: ITrans | null): void {
  trans = bundle ?? english;
}
