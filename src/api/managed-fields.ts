import { ApiError, type StatusDetails } from './errors.js';
import type { FieldPatchMeta } from './schema/patch-meta.js';
import { typeInfo, type Shape, type TypeInfo } from './schema/schema.js';
import { deepEqual, freezeShared, isPlainObject, type KubeObject } from './types.js';

/**
 * Field ownership (metadata.managedFields) and server-side apply, after sigs.k8s.io/structured-merge-diff:
 *
 * - Every write names a field manager. An Update (create, PUT, non-apply PATCH) makes its manager own the fields
 *   it set or changed, taking them from every other manager; an Apply makes its manager own exactly the fields of
 *   the applied configuration.
 * - An Apply that would change a field another manager owns is a conflict (409) unless forced, in which case the
 *   field changes hands. Fields an applier stops applying are removed from the object unless someone else owns them.
 * - Sets are written as fieldsV1: `f:<field>`, `k:{"name":"x"}` for items of keyed lists (listType=map),
 *   `v:<json>` for items of sets, and `.` for the node itself.
 *
 * Worked example: kubectl-client-side-apply created a Deployment with replicas 2 (it owns f:spec.f:replicas); a
 * server-side apply of replicas 3 by "kubectl" conflicts on .spec.replicas; with --force-conflicts, "kubectl" owns
 * it and the other entry loses it (and is dropped if it owned nothing else).
 */
export interface ManagedFieldsEntry {
  manager: string;
  operation: 'Apply' | 'Update';
  apiVersion: string;
  time: string;
  fieldsType: 'FieldsV1';
  fieldsV1: Record<string, unknown>;
  subresource?: string;
}

/** Where a walk is in the schema: a shape (and its field's patch meta), or nothing known. */
interface Node {
  shape?: Shape;
  meta?: FieldPatchMeta;
  /** A required field: always present in the Go struct, so never added as a node of its own (no `.`). */
  required?: boolean;
  /**
   * Nodes are shared and keep what walks below them derive: the children of a struct (valid while its type is
   * `childrenOf`: a custom resource's schema can be replaced), of a map (`values`) and of a list (`items`).
   */
  children?: Map<string, Node>;
  childrenOf?: TypeInfo;
  values?: Node;
  items?: Node;
}

/** A field the schema does not know (or no schema): everything below it is unknown too. */
const UNKNOWN: Node = Object.freeze({});
/** Root nodes by type name: every walk of a kind starts from the same one, and so reuses its derived children. */
const roots = new Map<string, Node>();

function rootNode(typeName: string | undefined): Node {
  if (typeName === undefined) return UNKNOWN;
  let root = roots.get(typeName);
  if (!root) roots.set(typeName, (root = { shape: { kind: 'ref', name: typeName } }));
  return root;
}

/** The node of a list's items. */
function itemsOf(node: Node): Node {
  return node.shape?.kind === 'list' ? (node.items ??= { shape: node.shape.items }) : UNKNOWN;
}

const SEP = '\u0000';
/** A path is its fieldsV1 elements joined by SEP; leaves map to their values (undefined for `.` markers). */
export type Leaves = Map<string, unknown>;

/**
 * The one leaf of every fieldsV1 trie the server builds. Leaves are most of a trie's nodes and stored objects are
 * never changed in place, so they share a frozen {} (a Pod's managedFields take half the memory that way).
 */
const LEAF: Record<string, unknown> = freezeShared({});

/** Metadata the server owns: never part of anyone's field set. */
const IGNORED_META = new Set([
  'name',
  'namespace',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'selfLink',
  'managedFields',
]);

/** Defaults of list-map key fields (the schema's `default`), which identify an item whether sent or not. */
const KEY_DEFAULTS: Readonly<Record<string, unknown>> = { protocol: 'TCP' };

function keyElement(item: Record<string, unknown>, keys: readonly string[]): string {
  if (keys.length === 1) {
    // Most list-map keys are a single name: the JSON of a one-field object, written directly.
    const key = keys[0]!;
    const only = item[key] ?? KEY_DEFAULTS[key];
    return only === undefined ? 'k:{}' : `k:{${JSON.stringify(key)}:${JSON.stringify(only)}}`;
  }
  const value = (k: string): unknown => item[k] ?? KEY_DEFAULTS[k];
  const present = [...keys].filter((k) => value(k) !== undefined).sort();
  return `k:${JSON.stringify(Object.fromEntries(present.map((k) => [k, value(k)])))}`;
}

function childNode(node: Node, key: string): Node {
  const shape = node.shape;
  if (shape?.kind === 'ref') {
    const t = typeInfo(shape.name);
    if (!t) return UNKNOWN;
    if (node.childrenOf !== t) {
      node.children = new Map();
      node.childrenOf = t;
    }
    let child = node.children!.get(key);
    if (child) return child;
    const p = t.properties.get(key);
    if (!p) return UNKNOWN; // not kept: the keys of unknown fields are unbounded
    child = { shape: p.shape };
    if (p.meta) child.meta = p.meta;
    if (t.required.includes(key)) child.required = true;
    node.children!.set(key, child);
    return child;
  }
  if (shape?.kind === 'map') return (node.values ??= { shape: shape.values });
  return UNKNOWN;
}

function isAtomic(node: Node): boolean {
  if (node.meta?.mapType === 'atomic') return true;
  if (node.shape?.kind === 'ref') {
    const t = typeInfo(node.shape.name);
    return !t || t.scalar !== undefined || t.atomic;
  }
  return node.shape?.kind === 'scalar';
}

function listType(node: Node): 'map' | 'set' | 'atomic' {
  const list = node.meta?.list;
  if (list === 'map' && node.meta?.mapKeys?.length) return 'map';
  if (list === 'set') return 'set';
  return 'atomic';
}

/**
 * `apply`: the set of an applied configuration, where a map or keyed list is not a member itself (only list items
 * are, as `.`); an Update's set also holds the maps and keyed lists it added.
 */
function walk(value: unknown, node: Node, path: string, out: Leaves, apply: boolean): void {
  if (isPlainObject(value)) {
    if (isAtomic(node) || Object.keys(value).length === 0) {
      out.set(path, value);
      return;
    }
    if (node.shape?.kind === 'map' && !apply && !node.required) out.set(`${path}${SEP}.`, undefined);
    for (const [k, v] of Object.entries(value)) walk(v, childNode(node, k), `${path}${SEP}f:${k}`, out, apply);
    return;
  }
  if (Array.isArray(value) && value.length > 0) {
    const type = listType(node);
    const items: Node = itemsOf(node);
    if (type === 'map') {
      if (!apply && !node.required) out.set(`${path}${SEP}.`, undefined);
      for (const item of value) {
        if (!isPlainObject(item)) continue;
        const itemPath = `${path}${SEP}${keyElement(item, node.meta!.mapKeys!)}`;
        out.set(`${itemPath}${SEP}.`, undefined);
        for (const [k, v] of Object.entries(item)) walk(v, childNode(items, k), `${itemPath}${SEP}f:${k}`, out, apply);
      }
      return;
    }
    if (type === 'set') {
      for (const item of value) out.set(`${path}${SEP}v:${JSON.stringify(item)}`, item);
      return;
    }
  }
  out.set(path, value);
}

/** Leaves of stored objects (which never change once written): the next write's "before" is the last one's "after". */
const leafCache = new WeakMap<object, Map<string, Leaves>>();

/** The leaf fields of an object (or of its status, for the status subresource), by fieldsV1 path. */
export function leavesOf(
  obj: KubeObject,
  typeName: string | undefined,
  scope: 'main' | 'status',
  hasStatus: boolean,
  apply = false,
): Leaves {
  const cacheKey = `${typeName}|${scope}|${hasStatus}|${apply}`;
  let cached = leafCache.get(obj);
  const hit = cached?.get(cacheKey);
  if (hit) return hit;
  const out = computeLeaves(obj, typeName, scope, hasStatus, apply);
  if (!cached) leafCache.set(obj, (cached = new Map()));
  cached.set(cacheKey, out);
  return out;
}

function computeLeaves(
  obj: KubeObject,
  typeName: string | undefined,
  scope: 'main' | 'status',
  hasStatus: boolean,
  apply: boolean,
): Leaves {
  const out: Leaves = new Map();
  const root = rootNode(typeName);
  for (const [k, v] of Object.entries(obj)) {
    if (k === 'apiVersion' || k === 'kind') continue;
    if (scope === 'status' ? k !== 'status' : k === 'status' && hasStatus) continue;
    const node = childNode(root, k);
    if (k === 'metadata' && isPlainObject(v)) {
      for (const [mk, mv] of Object.entries(v))
        if (!IGNORED_META.has(mk) && mv !== undefined)
          walk(mv, childNode(node, mk), `f:metadata${SEP}f:${mk}`, out, apply);
      continue;
    }
    walk(v, node, `f:${k}`, out, apply);
  }
  return out;
}

/**
 * The fieldsV1 of every field of a new object — what a create's manager owns — built in one walk: the same set
 * as toFieldsV1(leavesOf(obj)), without the path strings, their splitting and a sort of the whole trie.
 */
function fieldsOfNewObject(
  obj: KubeObject,
  typeName: string | undefined,
  scope: 'main' | 'status',
  hasStatus: boolean,
): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  const type = rootNode(typeName);
  for (const k of Object.keys(obj).sort()) {
    if (k === 'apiVersion' || k === 'kind') continue;
    if (scope === 'status' ? k !== 'status' : k === 'status' && hasStatus) continue;
    const v = obj[k];
    const node = childNode(type, k);
    if (k === 'metadata' && isPlainObject(v)) {
      const meta: Record<string, unknown> = {};
      for (const mk of Object.keys(v).sort()) {
        const mv = v[mk];
        if (!IGNORED_META.has(mk) && mv !== undefined) addFields(mv, childNode(node, mk), meta, `f:${mk}`);
      }
      if (hasAnyKey(meta)) root['f:metadata'] = meta;
      continue;
    }
    addFields(v, node, root, `f:${k}`);
  }
  return root;
}

function hasAnyKey(obj: Record<string, unknown>): boolean {
  for (const _ in obj) return true;
  return false;
}

/** walk(…, apply = false) into a sorted trie: adds `value`'s fields under parent[element] (created only when non-empty). */
function addFields(value: unknown, node: Node, parent: Record<string, unknown>, element: string): void {
  if (isPlainObject(value)) {
    const keys = Object.keys(value);
    if (keys.length === 0 || isAtomic(node)) return addLeaf(parent, element);
    const own = childOf(parent, element);
    if (node.shape?.kind === 'map' && !node.required) own['.'] = LEAF;
    keys.sort();
    for (const k of keys) addFields(value[k], childNode(node, k), own, `f:${k}`);
    if (hasAnyKey(own)) parent[element] = own;
    return;
  }
  if (Array.isArray(value) && value.length > 0) {
    const type = listType(node);
    if (type === 'map') {
      const items: Node = itemsOf(node);
      const keyed: Array<[string, Record<string, unknown>]> = [];
      for (const item of value) if (isPlainObject(item)) keyed.push([keyElement(item, node.meta!.mapKeys!), item]);
      keyed.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      const own = childOf(parent, element);
      if (!node.required) own['.'] = LEAF;
      for (let i = 0; i < keyed.length; i++) {
        const [el, item] = keyed[i]!;
        const itemFields = childOf(own, el);
        itemFields['.'] = LEAF;
        for (const k of Object.keys(item).sort()) addFields(item[k], childNode(items, k), itemFields, `f:${k}`);
        // Items with the same key share one node, filled out of order: sort it as toFieldsV1 would have.
        own[el] = i > 0 && keyed[i - 1]![0] === el ? (sortKeys(itemFields) as Record<string, unknown>) : itemFields;
      }
      if (hasAnyKey(own)) parent[element] = own;
      return;
    }
    if (type === 'set') {
      const own = childOf(parent, element);
      for (const el of value.map((item) => `v:${JSON.stringify(item)}`).sort()) addLeaf(own, el);
      parent[element] = own;
      return;
    }
  }
  addLeaf(parent, element);
}

function addLeaf(parent: Record<string, unknown>, element: string): void {
  if (!isPlainObject(parent[element])) parent[element] = LEAF;
}

/** The node at parent[element] to add children to: a new one where there is none or only a shared (frozen) one. */
function childOf(parent: Record<string, unknown>, element: string): Record<string, unknown> {
  const existing = parent[element];
  if (!isPlainObject(existing) || existing === LEAF) return {};
  return Object.isFrozen(existing) ? { ...existing } : existing;
}

/**
 * A set of paths as fieldsV1 (a trie whose leaves are {}), its keys in sorted order. The paths are sorted first:
 * since SEP sorts before every other character, the paths through a node then come in the order of that node's
 * children, so the trie is built in order instead of being rebuilt by a sort afterwards.
 */
export function toFieldsV1(paths: Iterable<string>): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  const sorted = [...paths].sort();
  for (let i = 0; i < sorted.length; i++) {
    const elements = sorted[i]!.split(SEP);
    // The paths below this one, if any, come right after it: it is the shared LEAF unless the next one extends it.
    const isLeaf = !(sorted[i + 1]?.startsWith(`${sorted[i]}${SEP}`) ?? false);
    let node = root;
    for (let j = 0; j < elements.length; j++) {
      const el = elements[j]!;
      if (j === elements.length - 1 && isLeaf) addLeaf(node, el);
      else node[el] = childOf(node, el);
      node = node[el] as Record<string, unknown>;
    }
  }
  return root;
}

function sortKeys(value: unknown): unknown {
  if (!isPlainObject(value)) return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((k) => [k, sortKeys(value[k])]),
  );
}

const pathCache = new WeakMap<object, Set<string>>();

/** fieldsV1 back to a set of paths (every node that is a leaf or has a `.` child); cached per fieldsV1 object. */
export function fromFieldsV1(fields: unknown): Set<string> {
  if (isPlainObject(fields)) {
    const hit = pathCache.get(fields);
    if (hit) return hit;
  }
  const out = parseFieldsV1(fields);
  if (isPlainObject(fields)) pathCache.set(fields, out);
  return out;
}

function parseFieldsV1(fields: unknown): Set<string> {
  const out = new Set<string>();
  const visit = (node: unknown, prefix: string): void => {
    if (!isPlainObject(node)) return;
    const keys = Object.keys(node);
    if (keys.length === 0 && prefix !== '') out.add(prefix);
    for (const k of keys) {
      const path = prefix === '' ? k : `${prefix}${SEP}${k}`;
      if (k === '.') out.add(path);
      else visit(node[k], path);
    }
  };
  visit(fields, '');
  return out;
}

/** `.spec.template.spec.containers[name="nginx"].image`: how conflicts name a path. */
export function renderPath(path: string): string {
  let out = '';
  for (const el of path.split(SEP)) {
    if (el.startsWith('f:')) out += `.${el.slice(2)}`;
    else if (el.startsWith('k:')) {
      const keys = JSON.parse(el.slice(2)) as Record<string, unknown>;
      out += `[${Object.entries(keys)
        .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
        .join(',')}]`;
    } else if (el.startsWith('v:')) out += `[=${el.slice(2)}]`;
  }
  return out;
}

function entriesOf(obj: KubeObject): ManagedFieldsEntry[] {
  const raw = obj.metadata.managedFields;
  return Array.isArray(raw)
    ? (raw.filter(
        (e) => isPlainObject(e) && typeof (e as { manager?: unknown }).manager === 'string',
      ) as unknown as ManagedFieldsEntry[])
    : [];
}

function sameManager(
  e: ManagedFieldsEntry,
  manager: string,
  operation: string,
  subresource: string | undefined,
): boolean {
  return e.manager === manager && e.operation === operation && (e.subresource ?? '') === (subresource ?? '');
}

export interface WriteContext {
  manager: string;
  apiVersion: string;
  time: string;
  typeName: string | undefined;
  hasStatus: boolean;
  /** The subresource the write came through: status (whose fields it then owns), or scale. */
  subresource?: string | undefined;
}

function scopeOf(ctx: WriteContext): 'main' | 'status' {
  return ctx.subresource === 'status' ? 'status' : 'main';
}

/** Sets each entry's fields with `remove` taken out; entries left owning nothing are dropped. */
function withoutPaths(
  entries: ManagedFieldsEntry[],
  remove: (path: string, e: ManagedFieldsEntry) => boolean,
): ManagedFieldsEntry[] {
  const out: ManagedFieldsEntry[] = [];
  for (const e of entries) {
    const paths = [...fromFieldsV1(e.fieldsV1)];
    const kept = paths.filter((p) => !remove(p, e));
    if (kept.length === 0) continue;
    out.push(kept.length === paths.length ? e : { ...e, fieldsV1: toFieldsV1(kept) });
  }
  return out;
}

function upsert(entries: ManagedFieldsEntry[], entry: ManagedFieldsEntry): ManagedFieldsEntry[] {
  const i = entries.findIndex((e) => sameManager(e, entry.manager, entry.operation, entry.subresource));
  const out = [...entries];
  if (Object.keys(entry.fieldsV1).length === 0) {
    if (i >= 0) out.splice(i, 1);
    return out;
  }
  // Unchanged ownership keeps its time, so a write that changes nothing else stays a no-op.
  if (i >= 0)
    out[i] = deepEqual(out[i]!.fieldsV1, entry.fieldsV1) && out[i]!.apiVersion === entry.apiVersion ? out[i]! : entry;
  else out.push(entry);
  return out;
}

function entry(ctx: WriteContext, operation: 'Apply' | 'Update', paths: Iterable<string>): ManagedFieldsEntry {
  return entryOf(ctx, operation, toFieldsV1(paths));
}

function entryOf(
  ctx: WriteContext,
  operation: 'Apply' | 'Update',
  fieldsV1: Record<string, unknown>,
): ManagedFieldsEntry {
  const e: ManagedFieldsEntry = {
    manager: ctx.manager,
    operation,
    apiVersion: ctx.apiVersion,
    time: ctx.time,
    fieldsType: 'FieldsV1',
    fieldsV1,
  };
  if (ctx.subresource) e.subresource = ctx.subresource;
  return e;
}

/**
 * managedFields after an Update-operation write from `old` (undefined on create) to `next`: the manager owns what
 * it changed; others keep what is unchanged and still present. A request that itself rewrote managedFields gets
 * them as sent (`[{}]` resets them), as kube-apiserver allows.
 */
export function managedFieldsAfterUpdate(
  old: KubeObject | undefined,
  next: KubeObject,
  requested: unknown,
  ctx: WriteContext,
): ManagedFieldsEntry[] {
  let base = old ? entriesOf(old) : [];
  if (Array.isArray(requested) && requested.length > 0 && (!old || !deepEqual(requested, old.metadata.managedFields))) {
    if (requested.length === 1 && isPlainObject(requested[0]) && Object.keys(requested[0]).length === 0) base = [];
    else return requested.filter(isPlainObject) as unknown as ManagedFieldsEntry[];
  }
  const scope = scopeOf(ctx);
  if (!old) {
    // A new object: its manager owns every field of it.
    const fields = fieldsOfNewObject(next, ctx.typeName, scope, ctx.hasStatus);
    return hasAnyKey(fields) ? [entryOf(ctx, 'Update', fields)] : [];
  }
  const before = leavesOf(old, ctx.typeName, scope, ctx.hasStatus);
  const after = leavesOf(next, ctx.typeName, scope, ctx.hasStatus);
  const changed = new Set<string>();
  for (const [path, value] of after) {
    if (!before.has(path) || (value !== undefined && !deepEqual(before.get(path), value))) changed.add(path);
  }
  const inScope = (e: ManagedFieldsEntry): boolean => (scope === 'status') === (e.subresource === 'status');
  let entries = withoutPaths(base, (p, e) => inScope(e) && (changed.has(p) || !after.has(p)));
  if (changed.size > 0) {
    const mine = entries.find((e) => sameManager(e, ctx.manager, 'Update', ctx.subresource));
    const paths = new Set([...(mine ? fromFieldsV1(mine.fieldsV1) : []), ...changed]);
    entries = upsert(entries, entry(ctx, 'Update', paths));
  }
  return entries;
}

export interface ApplyResult {
  object: KubeObject;
  managedFields: ManagedFieldsEntry[];
}

/**
 * Server-side apply of `applied` onto `live` (undefined: the object does not exist yet) by ctx.manager.
 * Throws the 409 conflict naming fields and managers unless `force`.
 */
export function serverSideApply(
  live: KubeObject | undefined,
  applied: KubeObject,
  ctx: WriteContext,
  force: boolean,
  gr: { group: string; resource: string },
  name: string,
): ApplyResult {
  const scope = scopeOf(ctx);
  const appliedLeaves = leavesOf(applied, ctx.typeName, scope, ctx.hasStatus, true);
  const entries = live ? entriesOf(live) : [];
  const liveLeaves = live ? leavesOf(live, ctx.typeName, scope, ctx.hasStatus) : new Map<string, unknown>();
  const isMine = (e: ManagedFieldsEntry): boolean => sameManager(e, ctx.manager, 'Apply', ctx.subresource);
  const inScope = (e: ManagedFieldsEntry): boolean => (scope === 'status') === (e.subresource === 'status');

  // Conflicts: applied values that differ from live values owned by another manager.
  const conflicts: ApplyConflict[] = [];
  for (const e of entries) {
    if (isMine(e) || !inScope(e)) continue;
    for (const path of fromFieldsV1(e.fieldsV1)) {
      if (!appliedLeaves.has(path) || !liveLeaves.has(path)) continue;
      const want = appliedLeaves.get(path);
      if (want === undefined) continue;
      if (!deepEqual(want, liveLeaves.get(path)))
        conflicts.push({ manager: e.manager, apiVersion: e.apiVersion, path });
    }
  }
  if (conflicts.length > 0 && !force) throw new ApplyConflicts(conflicts, gr, name);

  // Merge, then remove what this manager applied before and no longer does, as structured-merge-diff's prune: a
  // field (a map, a list item: all of it) goes unless a field at or below it is still owned, by another manager
  // or by this apply.
  const root = rootNode(ctx.typeName);
  let object = (live ? mergeApplied(live, applied, root) : structuredClone(applied)) as KubeObject;
  const previous = entries.find(isMine);
  if (previous && live) {
    const lastSet = fromFieldsV1(previous.fieldsV1);
    const held = new Set<string>();
    for (const e of entries) if (!isMine(e) && inScope(e)) for (const p of fromFieldsV1(e.fieldsV1)) holdPath(held, p);
    for (const p of appliedLeaves.keys()) holdPath(held, p);
    const removed = [...lastSet].filter((p) => !held.has(nodeOf(p)));
    for (const path of removed.sort((a, b) => a.length - b.length))
      object = removePath(object, path.split(SEP)) as KubeObject;
  }

  // Ownership: the applier owns the applied fields; forced conflicts leave their previous owners.
  const forced = new Set(conflicts.map((c) => `${c.manager}${SEP}${c.path}`));
  let managed = withoutPaths(entries, (p, e) => !isMine(e) && forced.has(`${e.manager}${SEP}${p}`));
  managed = upsert(managed, entry(ctx, 'Apply', appliedLeaves.keys()));
  return { object, managedFields: managed };
}

/** The node a path names: a `.` path is the map or list item it is a member of. */
function nodeOf(path: string): string {
  return path.endsWith(`${SEP}.`) ? path.slice(0, -2) : path;
}

/** Adds the node of `path` and every node above it to `held`. */
function holdPath(held: Set<string>, path: string): void {
  for (let i = path.indexOf(SEP); i >= 0; i = path.indexOf(SEP, i + 1)) held.add(path.slice(0, i));
  held.add(nodeOf(path));
}

/** A field another manager owns with another value than the one applied (its path as fieldsV1 elements). */
export interface ApplyConflict {
  manager: string;
  apiVersion: string;
  path: string;
}

/** The 409 of an apply that would change fields other managers own, with the conflicts it names. */
export class ApplyConflicts extends ApiError {
  constructor(
    readonly conflicts: readonly ApplyConflict[],
    gr: { group: string; resource: string },
    name: string,
  ) {
    const { message, details } = describeConflicts(conflicts, gr, name);
    super(409, 'Conflict', message, details);
  }
}

/**
 * The fields of an applied configuration `config` (e.g. a client-side apply's last-applied-configuration) whose
 * value in `live` is the same: what structured-merge-diff's Compare leaves of the configuration's field set once
 * the modified, added and removed fields are taken out.
 */
export function appliedFieldsMatching(config: KubeObject, live: KubeObject, ctx: WriteContext): Set<string> {
  const scope = scopeOf(ctx);
  const liveLeaves = leavesOf(live, ctx.typeName, scope, ctx.hasStatus);
  const matching = new Set<string>();
  for (const [path, value] of computeLeaves(config, ctx.typeName, scope, ctx.hasStatus, true))
    if (liveLeaves.has(path) && (value === undefined || deepEqual(value, liveLeaves.get(path)))) matching.add(path);
  return matching;
}

function describeConflicts(
  conflicts: readonly ApplyConflict[],
  gr: { group: string; resource: string },
  name: string,
): { message: string; details: StatusDetails } {
  const byManager = new Map<string, ApplyConflict[]>();
  for (const c of conflicts) {
    const list = byManager.get(c.manager) ?? [];
    list.push(c);
    byManager.set(c.manager, list);
  }
  const n = conflicts.length;
  let message = `Apply failed with ${n} conflict${n === 1 ? '' : 's'}: `;
  if (n === 1) {
    const c = conflicts[0]!;
    message += `conflict with "${c.manager}" using ${c.apiVersion}: ${renderPath(c.path)}`;
  } else {
    message += [...byManager.entries()]
      .map(
        ([manager, list]) =>
          `conflict${list.length === 1 ? '' : 's'} with "${manager}" using ${list[0]!.apiVersion}:\n${list.map((c) => `- ${renderPath(c.path)}`).join('\n')}`,
      )
      .join('\n');
  }
  const details = {
    name,
    kind: gr.resource,
    ...(gr.group ? { group: gr.group } : {}),
    causes: conflicts.map((c) => ({
      reason: 'FieldManagerConflict',
      message: `conflict with "${c.manager}" using ${c.apiVersion}`,
      field: renderPath(c.path),
    })),
  };
  return { message, details };
}

function mergeApplied(live: unknown, applied: unknown, node: Node): unknown {
  if (isPlainObject(applied)) {
    if (!isPlainObject(live) || isAtomic(node)) return structuredClone(applied);
    const out: Record<string, unknown> = { ...live };
    for (const [k, v] of Object.entries(applied)) {
      if (v === null) delete out[k];
      else out[k] = mergeApplied(live[k], v, childNode(node, k));
    }
    return out;
  }
  if (Array.isArray(applied) && Array.isArray(live)) {
    const type = listType(node);
    const items: Node = itemsOf(node);
    if (type === 'map') {
      const keys = node.meta!.mapKeys!;
      const out = [...live];
      for (const item of applied) {
        if (!isPlainObject(item)) continue;
        const k = keyElement(item, keys);
        const i = out.findIndex((x) => isPlainObject(x) && keyElement(x, keys) === k);
        if (i >= 0) out[i] = mergeApplied(out[i], item, items);
        else out.push(structuredClone(item));
      }
      return out;
    }
    if (type === 'set') {
      const out = [...live];
      for (const item of applied) if (!out.some((x) => deepEqual(x, item))) out.push(item);
      return out;
    }
  }
  return structuredClone(applied);
}

/** Removes one fieldsV1 path from a value (returns the new value; copies along the way). */
function removePath(value: unknown, path: readonly string[]): unknown {
  if (path.length === 0) return undefined;
  const [el, ...rest] = path as [string, ...string[]];
  if (el === '.') return undefined;
  if (el.startsWith('f:') && isPlainObject(value)) {
    const key = el.slice(2);
    if (!(key in value)) return value;
    const out = { ...value };
    const child = rest.length === 0 ? undefined : removePath(value[key], rest);
    if (child === undefined) delete out[key];
    else out[key] = child;
    return out;
  }
  if ((el.startsWith('k:') || el.startsWith('v:')) && Array.isArray(value)) {
    const match = (x: unknown): boolean => {
      if (el.startsWith('v:')) return JSON.stringify(x) === el.slice(2);
      if (!isPlainObject(x)) return false;
      const keys = JSON.parse(el.slice(2)) as Record<string, unknown>;
      return Object.entries(keys).every(([k, v]) => deepEqual(x[k] ?? KEY_DEFAULTS[k], v));
    };
    const i = value.findIndex(match);
    if (i < 0) return value;
    const out = [...value];
    const child = rest.length === 0 ? undefined : removePath(value[i], rest);
    if (child === undefined) out.splice(i, 1);
    else out[i] = child;
    return out;
  }
  return value;
}

/** The default field manager for a request without ?fieldManager: the User-Agent's program name, as kube-apiserver derives it. */
export function defaultFieldManager(userAgent: string | undefined): string {
  const name = (userAgent ?? '').split('/')[0]!.trim();
  return name === '' ? 'unknown' : name.slice(0, 128);
}
