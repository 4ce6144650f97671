import { freezeShared } from '../api/types.js';

/**
 * Stored objects live as long as the cluster, so what they hold should be compact. Two things make a written
 * object bigger than its content:
 *
 * - Strings built with `+`, template literals, `replace` and the like are V8 "rope" strings: a tree of pieces,
 *   32 bytes a node, that keeps every piece alive; a pod and its events, written by the kubelet and controllers
 *   in-process, held about a hundred of them. Converting a rope to a number makes V8 flatten it in place
 *   (its first piece becomes the flat text, the second the empty string, as the flatstr package does), and the
 *   next young-generation GC then drops the rope node: what stays is one flat string.
 * - Objects repeat parts of each other: every Pod of a template has the same containers and tolerations, the
 *   Pods of one node the same hostIPs, conditions written in the same second are alike, a Pod's events share
 *   their involvedObject and their node's source. Such parts are interned by content (below): identical ones are
 *   one frozen object. In a dense cluster that is about a third of a Pod's objects.
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
 * Interned nodes by content key. The key names each member and its value: a primitive by its text, an object by
 * the id of its interned node, so that a node can only be interned once all of its children are. Past a budget of
 * key characters the table starts afresh (nodes already shared stay shared, and keep their ids): sharing is an
 * optimisation, never a requirement, and nodes that never repeat (a pod's containerStatuses) pass through it.
 */
const interned = new Map<string, object>();
/** An interned node's id, on the node itself (a non-enumerable symbol: JSON, Object.keys and spreads skip it). */
const ID = Symbol('kube-sim.internedId');
/** Ids of nodes frozen by others (managedFields' shared leaf), which cannot be given the property. */
const frozenIds = new WeakMap<object, number>();
let nextId = 1;
let internedKeyChars = 0;
const INTERNED_KEY_CHARS_BUDGET = 4 * 1024 * 1024;
/** A node whose key is longer than this (a long annotation, a big ConfigMap) is not worth a table entry. */
const MAX_KEY_CHARS = 400;
/** A node holding a longer text than this is not interned (see primitive). */
const MAX_STRING_CHARS = 64;

/** The id of an interned (or otherwise frozen) node, else undefined. */
function idOf(node: object): number | undefined {
  const id = (node as { [ID]?: number })[ID];
  return id !== undefined ? id : frozenIds.get(node);
}

/** Whether `node` is one of the interned (shared, frozen) nodes: its content never changes. */
export function isInterned(node: object): boolean {
  return idOf(node) !== undefined;
}

/**
 * Makes a newly stored object compact, in place: flattens its strings and replaces the parts it has in common
 * with other stored objects by one shared, frozen copy. Only the object's own parts change: the root and its
 * metadata are never shared (the store stamps the resourceVersion on them); labels, annotations, ownerReferences
 * and managedFields entries may be. With `stored`, the version it replaces: parts it shares with it (a status
 * write keeps the stored spec, an update the stored status) were compacted when that was stored, and are not
 * walked again.
 *
 * Shared parts are frozen: stored objects are never changed in place (they are shared with informers and the
 * watch history already), and code that tried would now throw instead of changing many objects. deepCopy still
 * copies them, so a copy can be changed as before.
 */
export function compactObject(obj: Record<string, unknown>, stored?: Record<string, unknown>, share = true): void {
  if (share) compactMembers(obj, stored, false);
  else {
    flattenMembers(obj, stored);
    compactManagedFields(obj, stored);
  }
}

/**
 * Every kind's managedFields tries are interned, parts shared or not: whole tries repeat from object to object
 * (every ConfigMap a tool applies, every Deployment's status writer owns the same fields). Entries kept from the
 * stored version were compacted when it was stored, and are not touched.
 */
function compactManagedFields(obj: Record<string, unknown>, stored: Record<string, unknown> | undefined): void {
  const entries = isRecord(obj.metadata) ? obj.metadata.managedFields : undefined;
  if (!Array.isArray(entries)) return;
  const before = isRecord(stored?.metadata) ? stored.metadata.managedFields : undefined;
  if (entries === before) return;
  const kept = Array.isArray(before) ? new Set<unknown>(before) : undefined;
  for (const entry of entries) {
    if (!isRecord(entry) || kept?.has(entry) || Object.isFrozen(entry)) continue;
    const fields = entry.fieldsV1;
    if (!isRecord(fields)) continue;
    const next = internTrie(fields);
    if (next !== undefined && next !== fields) entry.fieldsV1 = next;
  }
}

/**
 * A managedFields trie (fieldsV1: objects all the way down, `{}` at its leaves) interned bottom-up. Its keys hold
 * only element names and children's ids, so they have no length limit: a Pod's `f:spec` node is long, and shared
 * by every Pod of its template. Undefined (its children interned, itself not) when it is not such a trie.
 */
function internTrie(node: Record<string, unknown>): Record<string, unknown> | undefined {
  if (Object.isFrozen(node)) {
    if (idOf(node) === undefined) frozenIds.set(node, nextId++);
    return node;
  }
  let key = '<';
  for (const name in node) {
    const child = node[name];
    if (!isRecord(child)) return undefined;
    const next = internTrie(child);
    if (next === undefined) return undefined;
    if (next !== child) node[name] = next;
    key += `${name.length}:${name}o${idOf(next)!};`;
  }
  // Marked as never changing, so that deep copies share it too (a status write copies the Pod's metadata).
  return internByKey(node, key, 'fieldsV1', -1, true) as Record<string, unknown>;
}

/** Flattens the strings of a node and of its parts that are not kept from the stored version (or frozen). */
function flattenMembers(node: object, stored: unknown): void {
  const before = typeof stored === 'object' && stored !== null ? (stored as Record<string, unknown>) : undefined;
  for (const key in node) {
    const item = (node as Record<string, unknown>)[key];
    if (typeof item === 'string') flattenString(item);
    else if (typeof item === 'object' && item !== null && item !== before?.[key] && !Object.isFrozen(item))
      flattenMembers(item, before?.[key]);
  }
}

/** What a node's members allow: not interning it, interning it by contentKey, or by its JSON (primitives only). */
enum Members {
  Own,
  Shared,
  Primitive,
}

/** Compacts the members of `node` in place; with `share`, says how `node` itself can be interned. */
function compactMembers(
  node: Record<string, unknown>,
  stored: Record<string, unknown> | undefined,
  share: boolean,
): Members {
  let members = share ? Members.Primitive : Members.Own;
  for (const key in node) {
    const item = node[key];
    if (typeof item === 'object' && item !== null) {
      const before = stored?.[key];
      if (key === 'metadata' && !share) {
        if (isRecord(item)) compactMembers(item, isRecord(before) ? before : undefined, false);
        continue;
      }
      const next = compactNode(item, before, key, -1);
      if (next !== item) node[key] = next;
      if (members !== Members.Own) members = Object.isFrozen(next) ? Members.Shared : Members.Own;
    } else if (members !== Members.Own) members = primitive(item, members);
    else if (typeof item === 'string') flattenString(item);
  }
  return members;
}

/**
 * Flattens a member that is not an object and says what it allows: JSON stands for a node's content only if it
 * writes every member as it is (not undefined members, nor NaN or Infinity, which it writes as null); a long text
 * is nearly always an object's own (an id, a message), not worth a key.
 */
function primitive(item: unknown, members: Members): Members {
  switch (typeof item) {
    case 'string':
      flattenString(item);
      return item.length > MAX_STRING_CHARS ? Members.Own : members;
    case 'number':
      return Number.isFinite(item) ? members : Members.Shared;
    case 'boolean':
      return members;
    case 'object': // null
      return members;
    default:
      return Members.Shared;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The interned nodes last stored at each place (a member name, or an array member's name and index), with their
 * member names. The objects written one after another are alike (a template's pods, the conditions of pods
 * started in the same second), so a node lately stored at a place is often the twin of the next one there: a
 * member-by-member comparison finds it without building and hashing a key, most of interning's cost. A few per
 * place, since writes of different stages interleave (a pod's binding, its kubelet's first and second status).
 * Bounded like the table; a stale entry only misses.
 */
const recentAt = new Map<string, Recent[]>();
const recentItemsAt = new Map<string, Recent[][]>();
const RECENT_PLACES_MAX = 10_000;
const RECENT_PER_PLACE = 4;
/** Array members past this index are not remembered (a long list's items rarely repeat by index). */
const RECENT_INDEX_MAX = 32;
interface Recent {
  node: object;
  /** Its member names in order (an array's: undefined). */
  names: string[] | undefined;
}

function recentFor(node: object): Recent {
  return { node, names: Array.isArray(node) ? undefined : Object.keys(node) };
}

/** Whether `value` (its members compacted) holds the same members, in the same order, as the interned `twin`. */
function sameMembers(value: object, twin: Recent): boolean {
  const names = twin.names;
  if (Array.isArray(value)) {
    const items = twin.node as unknown[];
    if (names !== undefined || value.length !== items.length) return false;
    for (let i = 0; i < value.length; i++) if (value[i] !== items[i]) return false;
    return true;
  }
  if (names === undefined) return false;
  const other = twin.node as Record<string, unknown>;
  let i = 0;
  for (const name in value) {
    // Identity for children (interned), === for primitives: NaN never matches, and then the key decides.
    if (i >= names.length || names[i] !== name || (value as Record<string, unknown>)[name] !== other[name])
      return false;
    i++;
  }
  return i === names.length;
}

/** The recent nodes at a place: an object member's by name, an array member's by the array's name and its index. */
function recentNodes(place: string, index: number): Recent[] | undefined {
  return index < 0 ? recentAt.get(place) : recentItemsAt.get(place)?.[index];
}

function recentTwin(value: object, place: string, index: number): object | undefined {
  const recent = recentNodes(place, index);
  if (recent === undefined) return undefined;
  for (const twin of recent) if (sameMembers(value, twin)) return twin.node;
  return undefined;
}

function remember(place: string, index: number, node: object): void {
  let recent = recentNodes(place, index);
  if (recent === undefined) {
    if (recentAt.size + recentItemsAt.size >= RECENT_PLACES_MAX) {
      recentAt.clear();
      recentItemsAt.clear();
    }
    recent = [];
    if (index < 0) recentAt.set(place, recent);
    else {
      let items = recentItemsAt.get(place);
      if (items === undefined) recentItemsAt.set(place, (items = []));
      // Past the end (an index skipped): holes would make the array slow; the place stays unremembered.
      if (index > items.length || index >= RECENT_INDEX_MAX) return;
      items[index] = recent;
    }
  }
  for (const known of recent) if (known.node === node) return;
  if (recent.length >= RECENT_PER_PLACE) recent.pop();
  recent.unshift(recentFor(node));
}

/**
 * The node to store in place of `value`: its interned twin, itself (now interned), or itself with its parts
 * compacted. `place` and `index` say where it sits (see recentAt).
 */
function compactNode(value: object, stored: unknown, place: string, index: number): object {
  if (value === stored) return value; // kept from the stored version: compacted then
  // Interned already, or frozen by someone else (managedFields' shared leaf): it cannot change, so its identity
  // stands for its content. (Every frozen node gets an id, so "frozen" is the quick test for "has an id".)
  if (Object.isFrozen(value)) {
    if (idOf(value) === undefined) frozenIds.set(value, nextId++);
    return value;
  }
  if (place === 'fieldsV1' && index < 0 && isRecord(value)) {
    const trie = internTrie(value);
    if (trie !== undefined) return trie;
  }
  let members = Members.Primitive;
  if (Array.isArray(value)) {
    const before = Array.isArray(stored) ? (stored as unknown[]) : undefined;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (typeof item === 'object' && item !== null) {
        const next = compactNode(item, before?.[i], place, i);
        if (next !== item) value[i] = next;
        if (members !== Members.Own) members = Object.isFrozen(next) ? Members.Shared : Members.Own;
      } else if (members !== Members.Own) members = primitive(item, members);
      else if (typeof item === 'string') flattenString(item);
    }
  } else {
    members = compactMembers(value as Record<string, unknown>, isRecord(stored) ? stored : undefined, true);
  }
  if (members === Members.Own) return value;
  // The node stored at this place last, when alike: no key needed.
  const recent = recentTwin(value, place, index);
  if (recent !== undefined) return recent;
  // JSON.stringify is native, and most nodes hold primitives only; others name their children by id.
  const key = members === Members.Primitive ? JSON.stringify(value) : contentKey(value);
  if (key === undefined || key.length > MAX_KEY_CHARS) return value;
  return internByKey(value, key, place, index);
}

/** `value`'s interned twin by content key, or `value` itself, now interned (frozen, with an id; see freezeShared). */
function internByKey(value: object, key: string, place: string, index: number, copiesShare = false): object {
  const twin = interned.get(key);
  if (twin) {
    remember(place, index, twin);
    return twin;
  }
  if (internedKeyChars + key.length > INTERNED_KEY_CHARS_BUDGET) {
    interned.clear();
    internedKeyChars = 0;
  }
  Object.defineProperty(value, ID, { value: nextId++ });
  if (copiesShare) freezeShared(value);
  else Object.freeze(value);
  // A key built piece by piece is a rope that would keep every piece (and the member names) alive.
  flattenString(key);
  interned.set(key, value);
  internedKeyChars += key.length;
  remember(place, index, value);
  return value;
}

/**
 * The content of a node that holds interned nodes: `<` (an object) or `(` (an array: JSON keys start with `{` or
 * `[`), then each member's name (objects only) and value, every text length-prefixed so that no content can make
 * two different nodes' keys equal, and each child by its id. Undefined past MAX_KEY_CHARS.
 */
function contentKey(node: object): string | undefined {
  const array = Array.isArray(node);
  let key = array ? '(' : '<';
  for (const name in node) {
    if (!array) key += `${name.length}:${name}`;
    const v = (node as Record<string, unknown>)[name];
    switch (typeof v) {
      case 'string':
        key += `s${v.length}:${v}`;
        break;
      case 'number':
        key += `n${v};`;
        break;
      case 'boolean':
        key += v ? 't' : 'f';
        break;
      case 'undefined':
        key += 'u';
        break;
      case 'object':
        key += v === null ? 'z' : `o${idOf(v)!};`;
        break;
      default:
        return undefined;
    }
    if (key.length > MAX_KEY_CHARS) return undefined;
  }
  return key;
}
