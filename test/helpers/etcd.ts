import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { track } from './processes.js';

export const ETCD = process.env.KUBE_SIM_ETCD ?? '/usr/bin/etcd';
export const ETCDCTL = process.env.KUBE_SIM_ETCDCTL ?? '/usr/bin/etcdctl';

/** Why the etcd tests cannot run here, or undefined when they can. */
export function etcdMissing(): string | undefined {
  for (const [binary, pkg, flag] of [
    [ETCD, 'etcd-server', '--version'],
    [ETCDCTL, 'etcd-client', 'version'],
  ] as const) {
    if (spawnSync(binary, [flag], { encoding: 'utf8' }).status !== 0)
      return `${binary} is not installed (apt-get install -y ${pkg}), so the etcd end-to-end checks cannot run`;
  }
  return undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface EtcdMember {
  name: string;
  clientUrl: string;
  child: ChildProcess;
  /** SIGKILL, as a crash; resolves once the process is gone. */
  kill(): Promise<void>;
}

export interface EtcdCluster {
  members: EtcdMember[];
  /** The client URLs, comma-separated, as --etcd-servers takes them. */
  endpoints: string;
  /** Runs etcdctl against the cluster; resolves with its stdout (throws on a non-zero exit, with its stderr). */
  ctl(args: string[]): string;
  /** Kills every member and removes the data directories. */
  stop(): Promise<void>;
  log(): string;
}

/**
 * A `size`-member etcd cluster on loopback ephemeral ports, each member with a data directory of its own under one
 * temporary directory; resolves once every member answers /health.
 */
export async function startEtcdCluster(size = 3): Promise<EtcdCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-etcd-'));
  const ports: Array<{ client: number; peer: number }> = [];
  for (let i = 0; i < size; i++) ports.push({ client: await freePort(), peer: await freePort() });
  const names = ports.map((_, i) => `m${i}`);
  const initialCluster = ports.map((p, i) => `${names[i]}=http://127.0.0.1:${p.peer}`).join(',');
  let log = '';
  const members: EtcdMember[] = ports.map((p, i) => {
    const clientUrl = `http://127.0.0.1:${p.client}`;
    const child = track(
      spawn(
        ETCD,
        [
          '--name',
          names[i]!,
          '--data-dir',
          join(dir, names[i]!),
          '--listen-client-urls',
          clientUrl,
          '--advertise-client-urls',
          clientUrl,
          '--listen-peer-urls',
          `http://127.0.0.1:${p.peer}`,
          '--initial-advertise-peer-urls',
          `http://127.0.0.1:${p.peer}`,
          '--initial-cluster',
          initialCluster,
          '--initial-cluster-token',
          `kube-sim-test-${process.pid}`,
          '--initial-cluster-state',
          'new',
          '--log-level',
          'warn',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      ),
    );
    child.stderr!.setEncoding('utf8').on('data', (c: string) => {
      if (log.length < 200_000) log += `[${names[i]}] ${c}`;
    });
    const exit = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    return {
      name: names[i]!,
      clientUrl,
      child,
      kill: async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        await exit;
      },
    };
  });
  const endpoints = members.map((m) => m.clientUrl).join(',');
  const cluster: EtcdCluster = {
    members,
    endpoints,
    ctl: (args) => {
      const r = spawnSync(ETCDCTL, ['--endpoints', endpoints, ...args], {
        encoding: 'utf8',
        env: { ...process.env, ETCDCTL_API: '3' },
      });
      if (r.status !== 0) throw new Error(`etcdctl ${args.join(' ')} failed: ${r.stderr}`);
      return r.stdout;
    },
    stop: async () => {
      for (const m of members) await m.kill();
      rmSync(dir, { recursive: true, force: true });
    },
    log: () => log,
  };
  const deadline = Date.now() + 20_000;
  for (const m of members) {
    for (;;) {
      try {
        const res = await fetch(`${m.clientUrl}/health`);
        if (res.ok && ((await res.json()) as { health?: string }).health === 'true') break;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        await cluster.stop();
        throw new Error(`etcd member ${m.name} did not become healthy within 20 s:\n${log}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return cluster;
}
