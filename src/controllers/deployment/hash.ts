import { safeEncodeString, stableJson } from '../history.js';

/**
 * The pod-template-hash (controller.ComputeHash): 32-bit FNV-1a over the pod template's printed form, then over
 * the collision count (when the Deployment has one) as 8 bytes, little-endian uint32 first; the sum written in
 * decimal and safe-encoded, so it is 8–10 characters out of "bcdfghjklmnpqrstvwxz2456789" — in practice the
 * ten that decimal digits map to (4-9, b, c, d, f), as in `nginx-7854ff8877`.
 *
 * Kubernetes prints the Go struct with spew (every field, zero values included), which this cannot reproduce
 * byte for byte; the printed form here is the template's JSON with sorted keys. So a template hashes to a
 * different string than on a real cluster, but with the same properties: stable for a template, changed by any
 * change to it, and moved by the collision count.
 */
export function computeHash(template: unknown, collisionCount?: number): string {
  let h = fnv32a(Buffer.from(stableJson(template), 'utf8'));
  if (collisionCount !== undefined) {
    const bytes = Buffer.alloc(8);
    bytes.writeUInt32LE(collisionCount >>> 0, 0);
    h = fnv32a(bytes, h);
  }
  return safeEncodeString(String(h));
}

/** 32-bit FNV-1a (Go's hash/fnv New32a), continuing from `h`. */
export function fnv32a(bytes: Uint8Array, h = 0x811c9dc5): number {
  for (const byte of bytes) {
    h = (h ^ byte) >>> 0;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}
