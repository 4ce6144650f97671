import { randomBytes } from 'node:crypto';

/** '00' … 'ff'. */
const HEX: readonly string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** A 32-bit word as 8 hex digits. */
function word(n: number): string {
  return HEX[(n >>> 24) & 255]! + HEX[(n >>> 16) & 255]! + HEX[(n >>> 8) & 255]! + HEX[n & 255]!;
}

/**
 * The one source of randomness: a seeded PRNG (sfc32), so a replay with the same seed produces the same
 * uids, generated names and IPs. `sim serve` without --seed draws the seed from the OS once at start.
 */
export class SeededRandom {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(readonly seed: number) {
    this.a = 0x9e3779b9;
    this.b = 0x243f6a88;
    this.c = 0xb7e15162;
    this.d = seed >>> 0;
    for (let i = 0; i < 15; i++) this.nextUint32();
  }

  static fromOs(): SeededRandom {
    return new SeededRandom(randomBytes(4).readUInt32LE(0));
  }

  nextUint32(): number {
    this.a >>>= 0;
    this.b >>>= 0;
    this.c >>>= 0;
    this.d >>>= 0;
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    return this.nextUint32() / 0x1_0000_0000;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** A version-4 UUID, as Kubernetes gives every object. */
  uuid(): string {
    const a = this.nextUint32();
    const b = (this.nextUint32() & 0xffff0fff) | 0x4000; // version 4
    const c = (this.nextUint32() & 0x3fffffff) | 0x80000000; // variant 10
    const d = this.nextUint32();
    // Two hex digits a byte from a table: toString(16) of a word above 2^31 (a heap number) is slow.
    // join() gives one flat string (see rfc3339 in clock.ts): every object keeps its uid.
    return [
      word(a),
      HEX[(b >>> 24) & 255]! + HEX[(b >>> 16) & 255]!,
      HEX[(b >>> 8) & 255]! + HEX[b & 255]!,
      HEX[(c >>> 24) & 255]! + HEX[(c >>> 16) & 255]!,
      HEX[(c >>> 8) & 255]! + HEX[c & 255]! + word(d),
    ].join('-');
  }

  /** Random suffix in apimachinery's alphabet (no vowels, no confusable digits), as generateName uses. */
  alphanumeric(length: number): string {
    const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
    let out = '';
    for (let i = 0; i < length; i++) out += alphabet[this.int(alphabet.length)];
    return out;
  }
}
