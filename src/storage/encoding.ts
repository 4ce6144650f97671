import { Readable } from 'node:stream';
import { yaml } from '../api/yaml.js';
import type { KubeObject } from '../api/types.js';
import { flattenString, isInterned } from './compact.js';

/**
 * Serialise once: stored objects never change after they are written, so their JSON text is cached beside
 * them and reused by every list, get and watch event that carries them.
 */
const jsonCache = new WeakMap<object, string>();

export function jsonOf(obj: object): string {
  let text = jsonCache.get(obj);
  if (text === undefined) {
    text = splicedJson(obj);
    // Cached: one flat string, as JSON.stringify makes (a rope would keep its dozens of pieces and their string
    // nodes alive, and be walked again by every use).
    flattenString(text);
    jsonCache.set(obj, text);
  }
  return text;
}

/**
 * JSON.stringify(obj), byte for byte, with the text of its interned parts (see storage/compact.ts: a template's
 * containers, tolerations, managedFields entries, conditions, often a whole spec, shared by thousands of pods
 * and by every version of a pod) serialised once and spliced in. Only the top SPLICE_DEPTH levels are walked
 * here; below them, and for anything but plain objects and arrays, the native JSON.stringify writes.
 */
export function splicedJson(obj: object): string {
  const parts: string[] = [];
  if (!hasSharedBody(obj) || !writeNode(obj, SPLICE_DEPTH, parts)) return JSON.stringify(obj);
  // A rope: what it is written into (a watch event's or a list's buffer) copies it flat anyway, as join() would.
  let text = '';
  for (const part of parts) text += part;
  return text;
}

/**
 * Whether the object's spec or status holds interned parts (a Pod's: half its text). The walk costs more than it
 * saves where they are a small part (an Event's involvedObject and source: a fifth of it) or where there are none
 * (kinds that are not compacted).
 */
function hasSharedBody(obj: object): boolean {
  const { spec, status } = obj as { spec?: unknown; status?: unknown };
  return holdsInterned(spec) || holdsInterned(status);
}

function holdsInterned(node: unknown): boolean {
  if (typeof node !== 'object' || node === null) return false;
  if (isInterned(node)) return true;
  for (const name in node) {
    const item = (node as Record<string, unknown>)[name];
    if (typeof item === 'object' && item !== null && isInterned(item)) return true;
  }
  return false;
}

/** Levels walked here: a Pod, then its metadata, spec and status, whose members are mostly interned or short. */
const SPLICE_DEPTH = 2;

/** `"name":` for member names, which repeat in every object of a kind. Bounded: names are the client's to pick. */
const memberOpenings = new Map<string, string>();
const MEMBER_OPENINGS_MAX = 10_000;

function memberOpening(name: string): string {
  let opening = memberOpenings.get(name);
  if (opening === undefined) {
    if (memberOpenings.size >= MEMBER_OPENINGS_MAX) memberOpenings.clear();
    opening = `${JSON.stringify(name)}:`;
    memberOpenings.set(name, opening);
  }
  return opening;
}

/** Members JSON writes nothing for (in an object; null in an array). */
function isSkipped(item: unknown): boolean {
  const type = typeof item;
  return type === 'undefined' || type === 'function' || type === 'symbol';
}

/**
 * Writes a plain object's or array's JSON to `parts`, its interned parts from the cache; false where only
 * JSON.stringify of the whole can write it (a toJSON method, whose key argument only the native walk supplies).
 */
function writeNode(node: object, depth: number, parts: string[]): boolean {
  if (typeof (node as { toJSON?: unknown }).toJSON === 'function') return false;
  if (Array.isArray(node)) {
    parts.push('[');
    for (let i = 0; i < node.length; i++) {
      if (i > 0) parts.push(',');
      const item: unknown = node[i];
      if (isSkipped(item)) parts.push('null');
      else if (!writeValue(item, depth, parts)) return false;
    }
    parts.push(']');
    return true;
  }
  let first = true;
  parts.push('{');
  for (const name of Object.keys(node)) {
    const item = (node as Record<string, unknown>)[name];
    if (isSkipped(item)) continue;
    if (!first) parts.push(',');
    first = false;
    parts.push(memberOpening(name));
    if (!writeValue(item, depth, parts)) return false;
  }
  parts.push('}');
  return true;
}

function writeValue(item: unknown, depth: number, parts: string[]): boolean {
  switch (typeof item) {
    case 'string':
      // Most texts need no escaping (JSON.stringify escapes these, and lone surrogates): a call saved a member.
      parts.push(NEEDS_ESCAPE.test(item) ? JSON.stringify(item) : `"${item}"`);
      return true;
    case 'number':
      parts.push(Number.isFinite(item) ? String(item) : 'null');
      return true;
    case 'boolean':
      parts.push(item ? 'true' : 'false');
      return true;
    case 'object':
      break;
    default:
      parts.push(JSON.stringify(item)); // a BigInt: throws as JSON.stringify of the whole would
      return true;
  }
  if (item === null) {
    parts.push('null');
    return true;
  }
  if (isInterned(item)) {
    let text = jsonCache.get(item);
    if (text === undefined) {
      if (typeof (item as { toJSON?: unknown }).toJSON === 'function') return false;
      text = JSON.stringify(item);
      jsonCache.set(item, text);
    }
    parts.push(text);
    return true;
  }
  if (depth > 1 && isPlain(item)) return writeNode(item, depth - 1, parts);
  if (typeof (item as { toJSON?: unknown }).toJSON === 'function') return false;
  parts.push(JSON.stringify(item));
  return true;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what JSON must escape
const NEEDS_ESCAPE = /[\u0000-\u001f"\\\ud800-\udfff]/;

function isPlain(value: object): boolean {
  if (Array.isArray(value)) return true;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

type ListHead = { apiVersion: string; kind: string; metadata: object };

function listOpening(head: ListHead): string {
  return `{"kind":${JSON.stringify(head.kind)},"apiVersion":${JSON.stringify(head.apiVersion)},"metadata":${JSON.stringify(head.metadata)},"items":[`;
}

/** A list as JSON, splicing in each item's cached text instead of re-serialising it. */
export function listJson(head: ListHead, items: readonly KubeObject[]): string {
  const parts = new Array<string>(items.length);
  for (let i = 0; i < items.length; i++) parts[i] = jsonOf(items[i]!);
  return `${listOpening(head)}${parts.join(',')}]}`;
}

/** Lists longer than this are streamed; shorter ones are one buffer, sent with a Content-Length. */
export const STREAMED_LIST_ITEMS = 2000;
const CHUNK_BYTES = 256 * 1024;

/**
 * A list's JSON as the response body, each item's JSON encoded once, straight into the buffer that is
 * sent (joining the texts into one string, measuring it for Content-Length and encoding it on write took three
 * passes). Lists longer than STREAMED_LIST_ITEMS are streamed (see ListStream).
 */
export function listBody(head: ListHead, items: readonly KubeObject[]): Buffer | Readable {
  // The newline Go's json.Encoder ends every answer with, written with the closing bracket (no copy of the body).
  return arrayBody(listOpening(head), items, listedJsonOf, ']}\n');
}

/**
 * A list's items (and a snapshot's objects) are serialised without filling the per-object cache: a full list of
 * a dense cluster's pods (or kubectl walking them 500 at a time for `-o json`) would otherwise keep the JSON of
 * every pod alive for as long as the pods live. Text cached by a get or a watch is reused, and so is that of interned parts
 * (shared by many objects: their text is cached whoever asks).
 */
export function listedJsonOf(obj: object): string {
  return jsonCache.get(obj) ?? splicedJson(obj);
}

/**
 * `opening`, the texts of `items` separated by commas, then `closing`: one buffer for a short array, a
 * ListStream past STREAMED_LIST_ITEMS. The items are already captured (a consistent snapshot: stored objects
 * never change); only their serialisation is deferred.
 */
export function arrayBody<T>(
  opening: string,
  items: readonly T[],
  textOf: (item: T) => string,
  closing: string,
): Buffer | Readable {
  if (items.length > STREAMED_LIST_ITEMS) return new ListStream(opening, items, textOf, closing);
  const texts = new Array<string>(items.length);
  // Exactly the bytes needed: reserving 3 a character (UTF-8's worst case) made a list take three times its size
  // in memory outside the heap, freed only by a later GC.
  let bytes = Buffer.byteLength(opening) + Buffer.byteLength(closing) + Math.max(0, items.length - 1);
  for (let i = 0; i < items.length; i++) bytes += Buffer.byteLength((texts[i] = textOf(items[i]!)));
  const body = Buffer.allocUnsafe(bytes);
  let at = body.write(opening, 0);
  for (let i = 0; i < texts.length; i++) {
    if (i > 0) body[at++] = 0x2c;
    at += body.write(texts[i]!, at);
  }
  body.write(closing, at);
  return body;
}

/**
 * A long array body, serialised ~256 KiB at a time and only when the socket wants more (Readable's
 * backpressure: fastify pipes it, and pipe waits for 'drain'). Each piece is made in a turn of the event loop of
 * its own (setImmediate), so that while a list of 150,000 pods goes out, other requests, watch events and Lease
 * renewals are still served, as kube-apiserver keeps serving while it streams a list. A client that goes away
 * destroys the stream: no more pieces are made and the captured items are let go.
 */
class ListStream<T> extends Readable {
  private items: readonly T[] | undefined;
  private next = 0;
  private readonly writer = new PieceWriter(CHUNK_BYTES);
  private pending: NodeJS.Immediate | undefined;

  constructor(
    opening: string,
    items: readonly T[],
    private readonly textOf: (item: T) => string,
    private readonly closing: string,
  ) {
    super({ highWaterMark: CHUNK_BYTES });
    this.items = items;
    this.writer.write(opening, false);
  }

  override _read(): void {
    this.pending ??= setImmediate(this.makePiece);
  }

  private readonly makePiece = (): void => {
    this.pending = undefined;
    const items = this.items;
    if (items === undefined || this.destroyed) return;
    while (this.next < items.length) {
      const i = this.next++;
      const full = this.writer.write(this.textOf(items[i]!), i > 0);
      if (full) {
        this.push(full);
        return;
      }
    }
    const full = this.writer.write(this.closing, false);
    this.items = undefined;
    if (full) this.push(full);
    this.push(this.writer.rest());
    this.push(null);
  };

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (this.pending) clearImmediate(this.pending);
    this.pending = undefined;
    this.items = undefined;
    callback(error);
  }
}

/** Encodes texts one after another into pieces of about `size` bytes; write returns a piece when it is full. */
class PieceWriter {
  private piece: Buffer;
  private used = 0;

  constructor(private readonly size: number) {
    this.piece = Buffer.allocUnsafe(size);
  }

  write(text: string, comma: boolean): Buffer | undefined {
    // A UTF-16 code unit takes at most 3 bytes of UTF-8: reserve that much, so that a write is never cut short.
    const worst = text.length * 3 + 1;
    let full: Buffer | undefined;
    if (this.used + worst > this.piece.length) {
      if (this.used > 0) full = this.piece.subarray(0, this.used);
      this.piece = Buffer.allocUnsafe(Math.max(this.size, worst));
      this.used = 0;
    }
    if (comma) this.piece[this.used++] = 0x2c;
    this.used += this.piece.write(text, this.used, 'utf8');
    return full;
  }

  rest(): Buffer {
    return this.piece.subarray(0, this.used);
  }
}

export type OutputFormat = 'json' | 'yaml';

export function render(value: unknown, format: OutputFormat): string {
  if (format === 'yaml') return yaml().stringify(value, { lineWidth: 0 });
  return typeof value === 'object' && value !== null ? jsonOf(value) : JSON.stringify(value);
}
