import { isPlainObject, type KubeObject } from '../api/types.js';
import { isTerminal } from '../api/pod-util.js';
import type { PodRecord } from './pod-record.js';

/**
 * Pod CIDRs: /24s carved out of the cluster CIDR (10.244.0.0/16 → 10.244.0.0/24, 10.244.1.0/24, …), as
 * kube-controller-manager's node IPAM hands them out; pod IPs are given sequentially inside (.2 upward,
 * .1 being the bridge), reused once released.
 */
export class PodCidrs {
  private readonly base: number;
  private readonly blocks: number;
  private readonly used = new Set<number>();

  constructor(clusterCidr: string) {
    const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(clusterCidr.trim());
    if (!m) throw new Error(`--cluster-cidr: "${clusterCidr}" is not an IPv4 CIDR`);
    const prefix = Number(m[5]);
    if (prefix > 24) throw new Error('--cluster-cidr: the prefix must be /24 or shorter (each node gets a /24)');
    this.base = ((Number(m[1]) << 24) | (Number(m[2]) << 16) | (Number(m[3]) << 8) | Number(m[4])) >>> 0;
    this.blocks = 2 ** (24 - prefix);
  }

  reserve(cidr: string): void {
    const m = /^(\d+)\.(\d+)\.(\d+)\.0\/24$/.exec(cidr);
    if (!m) return;
    const n = (((Number(m[1]) << 24) | (Number(m[2]) << 16) | (Number(m[3]) << 8)) >>> 0) - this.base;
    if (n >= 0 && n % 256 === 0 && n / 256 < this.blocks) this.used.add(n / 256);
  }

  /**
   * The `preferred`th /24 when it is free (node-N's is the Nth, so processes that each register nodes give them the
   * same ranges), else the next free one; undefined when the cluster CIDR is used up.
   */
  allocate(preferred?: number): string | undefined {
    if (preferred !== undefined && preferred >= 0 && preferred < this.blocks && !this.used.has(preferred)) {
      this.used.add(preferred);
      return `${ipOf(this.base + preferred * 256)}/24`;
    }
    for (let i = 0; i < this.blocks; i++) {
      if (this.used.has(i)) continue;
      this.used.add(i);
      return `${ipOf(this.base + i * 256)}/24`;
    }
    return undefined;
  }

  release(cidr: string): void {
    const m = /^(\d+)\.(\d+)\.(\d+)\.0\/24$/.exec(cidr);
    if (!m) return;
    const n = (((Number(m[1]) << 24) | (Number(m[2]) << 16) | (Number(m[3]) << 8)) >>> 0) - this.base;
    this.used.delete(n / 256);
  }
}

function ipOf(n: number): string {
  return [(n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/** Pod IPs of one node's /24: .2 … .254, handed out round-robin like host-local IPAM. */
export class PodIps {
  private readonly used = new Set<number>();
  private next = 2;

  constructor(private readonly cidr: string | undefined) {}

  private prefix(): string | undefined {
    const m = this.cidr ? /^(\d+\.\d+\.\d+)\.0\/24$/.exec(this.cidr) : null;
    return m?.[1];
  }

  reserve(ip: string): void {
    const prefix = this.prefix();
    if (prefix && ip.startsWith(`${prefix}.`)) this.used.add(Number(ip.slice(prefix.length + 1)));
  }

  allocate(): string | undefined {
    const prefix = this.prefix();
    if (!prefix) return undefined;
    for (let tries = 0; tries < 253; tries++) {
      const host = this.next;
      this.next = this.next >= 254 ? 2 : this.next + 1;
      if (!this.used.has(host)) {
        this.used.add(host);
        return `${prefix}.${host}`;
      }
    }
    return undefined;
  }

  release(ip: string): void {
    const prefix = this.prefix();
    if (prefix && ip.startsWith(`${prefix}.`)) this.used.delete(Number(ip.slice(prefix.length + 1)));
  }
}

/**
 * The IP a pod's status gets when its containers start: the one it has, else the one it holds, else a fresh one
 * from its node's range, which it holds from now on (also before the status carrying it is written).
 */
export function podIPFor(pod: KubeObject, record: PodRecord, pool: PodIps): string {
  const current = isPlainObject(pod.status) ? pod.status.podIP : undefined;
  if (typeof current === 'string' && current !== '') return current;
  if (record.ip !== undefined) return record.ip;
  const ip = pool.allocate() ?? '';
  if (ip) record.holdIP(ip);
  return ip;
}

/** A pod found running with an IP (the server restarted with --data) keeps it: nobody else may get it. */
export function keepPodIP(pod: KubeObject, record: PodRecord, pool: PodIps): void {
  const ip = isPlainObject(pod.status) ? pod.status.podIP : undefined;
  if (typeof ip !== 'string' || ip === '' || isTerminal(pod)) return;
  pool.reserve(ip);
  record.holdIP(ip);
}

/** A pod that ended, or is gone, gives its IP back to its node's range. */
export function releasePodIP(record: PodRecord, pool: PodIps | undefined): void {
  const ip = record.releaseIP();
  if (ip !== undefined) pool?.release(ip);
}
