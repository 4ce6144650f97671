/**
 * Stored objects live as long as the cluster, so what they hold should be compact. Strings built with `+`,
 * template literals, `replace` and the like are V8 "rope" strings: a tree of pieces, 32 bytes a node, that
 * keeps every piece alive. A pod and its events, written by the kubelet and controllers in-process, held ~100
 * of them (about 3 KB a pod). Converting a rope to a number makes V8 flatten it in place (its first piece
 * becomes the flat text, the second the empty string, as the flatstr package does), and the next
 * young-generation GC then drops the rope node: what stays is one flat string.
 */

/** V8 builds a rope only for results of at least this many characters (ConsString::kMinLength). */
const MIN_ROPE_LENGTH = 13;

/** Where the numbers go: stored, so that the optimising compiler cannot drop the conversion as unused. */
let sink = 0;

/** Flattens one string in place (see above); short strings are never ropes. */
export function flattenString(text: string): void {
  if (text.length >= MIN_ROPE_LENGTH) sink = Number(text) || sink;
}

/**
 * Flattens every string of at least 13 characters in a JSON-like value (objects, arrays), in place. With
 * `stored`, the version it replaces: parts it shares with it (a status write keeps the stored spec, an update
 * the stored status) were flattened when that was stored, and are not walked again.
 */
export function flattenStrings(value: unknown, stored?: unknown): void {
  if (value === stored) return;
  if (Array.isArray(value)) {
    const before = Array.isArray(stored) ? stored : undefined;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (typeof item === 'string') flattenString(item);
      else if (typeof item === 'object' && item !== null) flattenStrings(item, before?.[i]);
    }
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  const before = typeof stored === 'object' && stored !== null && !Array.isArray(stored) ? (stored as Record<string, unknown>) : undefined;
  for (const key in value) {
    const item = (value as Record<string, unknown>)[key];
    if (typeof item === 'string') flattenString(item);
    else if (typeof item === 'object' && item !== null) flattenStrings(item, before?.[key]);
  }
}
