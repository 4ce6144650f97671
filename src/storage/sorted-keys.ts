/**
 * Names kept in byte order for lists, cheap to add to in bursts: new names wait in `pending` and are merged
 * in (one sort of the newcomers plus one linear merge) only when somebody reads the order. Removed names
 * are dropped at the same time. A burst of 150,000 creates therefore costs one merge, not 150,000 splices.
 */
export class SortedKeys {
  private sorted: string[] = [];
  private pending = new Set<string>();
  private removed = new Set<string>();

  add(key: string): void {
    if (this.removed.delete(key)) return; // removed and re-added before anyone looked: still in `sorted`
    this.pending.add(key);
  }

  remove(key: string): void {
    if (!this.pending.delete(key)) this.removed.add(key);
  }

  /** The names in order; the array is owned by this object, do not change it. */
  ordered(): readonly string[] {
    if (this.pending.size === 0 && this.removed.size === 0) return this.sorted;
    const incoming = Array.from(this.pending).sort(compareBytes);
    const merged: string[] = new Array(this.sorted.length + incoming.length);
    let i = 0;
    let j = 0;
    let n = 0;
    while (i < this.sorted.length || j < incoming.length) {
      let next: string;
      if (j >= incoming.length || (i < this.sorted.length && compareBytes(this.sorted[i]!, incoming[j]!) <= 0))
        next = this.sorted[i++]!;
      else next = incoming[j++]!;
      if (this.removed.size > 0 && this.removed.has(next)) continue;
      merged[n++] = next;
    }
    merged.length = n;
    this.sorted = merged;
    this.pending.clear();
    this.removed.clear();
    return this.sorted;
  }

  /** Index of the first name not less than `key`. */
  firstAtOrAfter(key: string): number {
    const keys = this.ordered();
    let lo = 0;
    let hi = keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (compareBytes(keys[mid]!, key) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Index of the first name greater than `after` (binary search over the ordered names). */
  firstAfter(after: string): number {
    const keys = this.ordered();
    let lo = 0;
    let hi = keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (compareBytes(keys[mid]!, after) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** etcd orders keys by bytes; names are ASCII, so code-unit order is the same. */
export function compareBytes(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
