import { JSONPath } from 'jsonpath-plus';

/**
 * kubectl-style JSONPath (`{.status.conditions[?(@.type=="Ready")].status}`) evaluated with jsonpath-plus.
 * kubectl's template syntax is one `{...}` expression whose path starts at the object; jsonpath-plus wants
 * `$...`. Keys with dots are written as kubectl does (`{.metadata.labels.app\.kubernetes\.io/name}`) or in
 * brackets (`{.metadata.labels['app.kubernetes.io/name']}`). Templates with text around the braces and
 * `range` are not supported (an assertion wants a value, not a rendering).
 */
export function toJsonPathPlus(expression: string): string {
  let text = expression.trim();
  if (text.startsWith('{') && text.endsWith('}')) text = text.slice(1, -1).trim();
  else if (text.includes('{')) throw new Error(`jsonpath ${JSON.stringify(expression)}: use a single {...} expression`);
  if (text.startsWith('$')) text = text.slice(1);
  if (text !== '' && !text.startsWith('.') && !text.startsWith('[')) text = `.${text}`;
  // kubectl escapes dots inside a key with a backslash: turn such a segment into ['a.b/c'].
  text = text.replace(
    /\.((?:[^.[\]\\]|\\.)*\\\.(?:[^.[\]\\]|\\.)*)/g,
    (_m, key: string) => `['${key.replace(/\\\./g, '.').replace(/'/g, "\\'")}']`,
  );
  return `$${text}`;
}

/** Every value the path selects (an empty array when it selects nothing). */
export function evaluateJsonPath(obj: unknown, expression: string): unknown[] {
  const path = toJsonPathPlus(expression);
  try {
    return JSONPath({ path, json: obj as object, wrap: true, eval: 'safe' }) as unknown[];
  } catch (err) {
    throw new Error(`jsonpath ${JSON.stringify(expression)}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** What kubectl -o jsonpath would print for one value: strings bare, everything else as JSON. */
export function renderValue(value: unknown): string {
  if (value === undefined) return '<none>';
  if (typeof value === 'string') return value;
  return JSON.stringify(value);
}
