import { Readable } from 'node:stream';
import { stringify as toYaml } from 'yaml';
import type { KubeObject } from '../api/types.js';

/**
 * Serialise once: stored objects never change after they are written, so their JSON text is cached beside
 * them and reused by every list, get and watch event that carries them.
 */
const jsonCache = new WeakMap<object, string>();

export function jsonOf(obj: object): string {
  let text = jsonCache.get(obj);
  if (text === undefined) {
    text = JSON.stringify(obj);
    jsonCache.set(obj, text);
  }
  return text;
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
 * A list's JSON as the response body, each item's cached JSON encoded once, straight into the buffer that is
 * sent (joining the texts into one string, measuring it for Content-Length and encoding it on write took three
 * passes). Lists longer than STREAMED_LIST_ITEMS are a stream of ~256 KiB pieces, written as the socket drains
 * (chunked), so that a list of 100,000 objects never sits in memory whole.
 */
export function listBody(head: ListHead, items: readonly KubeObject[]): Buffer | Readable {
  if (items.length > STREAMED_LIST_ITEMS) return Readable.from(listPieces(head, items), { objectMode: false, highWaterMark: CHUNK_BYTES });
  const opening = listOpening(head);
  const texts = new Array<string>(items.length);
  let chars = opening.length + items.length + 2;
  for (let i = 0; i < items.length; i++) chars += (texts[i] = jsonOf(items[i]!)).length;
  const writer = new PieceWriter(chars * 3);
  writer.write(opening, false);
  for (let i = 0; i < texts.length; i++) writer.write(texts[i]!, i > 0);
  writer.write(']}', false);
  return writer.rest();
}

function* listPieces(head: ListHead, items: readonly KubeObject[]): Generator<Buffer> {
  const pieces = new PieceWriter(CHUNK_BYTES);
  let full = pieces.write(listOpening(head), false);
  if (full) yield full;
  for (let i = 0; i < items.length; i++) {
    full = pieces.write(jsonOf(items[i]!), i > 0);
    if (full) yield full;
  }
  full = pieces.write(']}', false);
  if (full) yield full;
  yield pieces.rest();
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
  if (format === 'yaml') return toYaml(value, { lineWidth: 0 });
  return typeof value === 'object' && value !== null ? jsonOf(value) : JSON.stringify(value);
}
