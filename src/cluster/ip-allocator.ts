import type { SeededRandom } from '../clock/random.js';

/** Service cluster IPs from 10.96.0.0/12, as kube-apiserver's default --service-cluster-ip-range. */
const BASE = (10 << 24) | (96 << 16);
const SIZE = 1 << 20;

function toIp(n: number): string {
  return [(n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

export class ClusterIPAllocator {
  private readonly used = new Set<string>(['10.96.0.1']);

  constructor(private readonly random: SeededRandom) {}

  allocate(): string {
    for (let attempt = 0; attempt < 1000; attempt++) {
      const ip = toIp((BASE + 2 + this.random.int(SIZE - 3)) >>> 0);
      if (!this.used.has(ip)) {
        this.used.add(ip);
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
