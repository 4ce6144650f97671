import type { SeededRandom } from '../clock/random.js';

/** Service cluster IPs from 10.96.0.0/12, as kube-apiserver's default --service-cluster-ip-range. */
export const SERVICE_IP_BASE = ((10 << 24) | (96 << 16)) >>> 0;
export const SERVICE_IP_SIZE = 1 << 20;

export function ipText(n: number): string {
  return [(n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/** A dotted IPv4 address as a number, or undefined. */
export function ipNumber(ip: string): number | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
  if (!m) return undefined;
  const octets = m.slice(1).map(Number);
  if (octets.some((o) => o > 255)) return undefined;
  return octets.reduce((a, o) => a * 256 + o, 0);
}

export class ClusterIPAllocator {
  private readonly used = new Set<string>(['10.96.0.1']);
  /** Over etcd (clusterWide, service-ranges.ts): the IPs drawn for writes not yet made, which may be drawn again there. */
  readonly drawn = new Set<string>();
  clusterWide = false;

  constructor(private readonly random: SeededRandom) {}

  allocate(): string {
    for (let attempt = 0; attempt < 1000; attempt++) {
      const ip = ipText((SERVICE_IP_BASE + 2 + this.random.int(SERVICE_IP_SIZE - 3)) >>> 0);
      if (!this.used.has(ip)) {
        this.used.add(ip);
        if (this.clusterWide) remember(this.drawn, ip);
        return ip;
      }
    }
    throw new Error('service IP range is full');
  }

  reserve(ip: unknown): void {
    if (typeof ip === 'string' && ip !== 'None' && ip !== '') this.used.add(ip);
  }

  release(ip: unknown): void {
    if (typeof ip === 'string' && ip !== '10.96.0.1') this.used.delete(ip);
  }
}

/** Drawn values a write never claimed (a dry run, a rejected request) are forgotten past the last 1,024. */
export function remember<T>(drawn: Set<T>, value: T): void {
  drawn.add(value);
  if (drawn.size > 1024) drawn.delete(drawn.values().next().value as T);
}
