import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import { tmpdir } from 'node:os';
import { join, resolve as resolvePath } from 'node:path';
import { parseDuration } from '../clock/clock.js';
import {
  COMPONENTS,
  startSimulator,
  type Component,
  type Simulator,
  type SimulatorOptions,
} from '../cluster/simulator.js';
import { defaultProfile, loadNodeProfile, parseCapacity } from '../kubelet/node.js';
import { loadImageCatalog, parseImageList } from '../kubelet/images.js';
import { loadStageFile } from '../kubelet/stages.js';
import { buildServer } from '../server/server.js';
import { UI_PATH } from '../server/ui.js';
import { ApiAuth } from '../auth/api-auth.js';
import { loadTokenFile } from '../auth/token-file.js';
import type { UserInfo } from '../auth/user.js';
import { authBackend } from '../cluster/auth-backend.js';
import { parseServiceMapping, type Cluster } from '../cluster/cluster.js';
import {
  contextName,
  kubeconfigFileForMerge,
  kubeconfigFiles,
  kubeconfigYaml,
  mergeKubeconfig,
  readKubeconfig,
  readKubeconfigFiles,
} from '../client/kubeconfig.js';
import { attachComponents } from '../cluster/attached.js';
import { mergeMessage } from './kubeconfig-merge.js';
import { Logger, type LogLevel } from './logger.js';
import { answerPlainHttp, servingTls, tlsDir, type ServingTls } from './tls.js';
import { compactWhenQuiet } from './idle-compaction.js';
import { parseSnapshot, type Snapshot } from '../api/snapshot.js';

/** A snapshot file, read and parsed; throws a message naming the file. */
export function readSnapshotFile(file: string): Snapshot {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`--snapshot: cannot read ${file}: ${(err as Error).message}`);
  }
  return parseSnapshot(text, file);
}

export interface ServeOptions {
  port: number;
  host: string;
  data?: string;
  repair?: boolean;
  etcdServers?: string;
  etcdPrefix?: string;
  etcdCompactionInterval?: string;
  /** --components: a comma-separated subset of apiserver,controllers,scheduler,kubelets. */
  components?: string;
  /** --informers: one informer cache for the process's components, or one each. */
  informers?: 'shared' | 'separate';
  /** Unset: real, or virtual with --snapshot. */
  clock?: 'real' | 'virtual';
  /** Boot from this snapshot file (sim snapshot export). */
  snapshot?: string;
  /** Where a virtual clock starts (RFC 3339). */
  startTime?: string;
  seed?: number;
  watchHistory: number;
  eventTtl: string;
  controllers: string;
  logLevel: LogLevel;
  nodes: number;
  nodeProfile?: string;
  nodeCapacity?: string;
  stages?: string;
  startupDelay?: string;
  stopDelay?: string;
  readyDelay?: string;
  images?: string;
  missingImages?: string;
  /** Unset: 10.244.0.0/16, widened to hold --nodes. */
  clusterCidr?: string;
  /** --name: merge a kube-sim-NAME context into the user's kubeconfig. */
  name?: string;
  /** --no-switch: with --name, keep the current context. */
  switch?: boolean;
  /** Compact the heap once the server goes quiet after it grew (see idle-compaction.ts); on unless --no-idle-compaction. */
  idleCompaction?: boolean;
  scheduler?: boolean;
  auth?: boolean;
  tokenAuthFile?: string;
  tls?: boolean;
  kubeconfig?: string;
  /** --map-service values. */
  mapService?: string[];
  /** false with --no-metrics-server. */
  metricsServer?: boolean;
}

export const DEFAULT_CLUSTER_CIDR = '10.244.0.0/16';

/**
 * The pod CIDR range for `nodes` nodes, each of which gets a /24: --cluster-cidr when given (refused in one line if
 * it is too small), else 10.244.0.0/16 widened to the shortest prefix that holds them (said once: a /16 runs out at
 * 256 nodes, and each node past it would get no pod IPs and a warning of its own).
 */
export function clusterCidrFor(given: string | undefined, nodes: number, log: (m: string) => void): string {
  const cidr = given ?? DEFAULT_CLUSTER_CIDR;
  const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(cidr.trim());
  if (!m) throw new Error(`--cluster-cidr: "${cidr}" is not an IPv4 CIDR`);
  const prefix = Number(m[5]);
  const holds = 2 ** Math.max(24 - prefix, 0);
  if (nodes <= holds) return cidr;
  const needed = 24 - Math.ceil(Math.log2(nodes));
  if (given !== undefined || needed < 8)
    throw new Error(
      `--cluster-cidr ${cidr} has ${holds.toLocaleString('en-US')} /24s for ${nodes.toLocaleString('en-US')} nodes: give a /${Math.max(needed, 1)} or larger${needed >= 8 ? ` (e.g. --cluster-cidr 10.0.0.0/${needed})` : ''}`,
    );
  const address = m.slice(1, 5).reduce((a, octet) => a * 256 + Number(octet), 0);
  const base = address - (address % 2 ** (32 - needed));
  const widened = `${[24, 16, 8, 0].map((shift) => Math.floor(base / 2 ** shift) % 256).join('.')}/${needed}`;
  log(
    `--nodes ${nodes}: the default cluster CIDR ${cidr} holds ${holds} nodes (a /24 each); using ${widened} (${(2 ** (24 - needed)).toLocaleString('en-US')} /24s) instead`,
  );
  return widened;
}

/** The node simulator's options from the flags; throws with a message for the user. */
function kubeletOptions(options: ServeOptions, log: Logger): SimulatorOptions['kubelet'] {
  let profile = options.nodeProfile ? loadNodeProfile(options.nodeProfile) : defaultProfile();
  if (options.nodeCapacity) {
    const capacity = { ...profile.capacity, ...parseCapacity(options.nodeCapacity) };
    profile = {
      ...profile,
      capacity,
      allocatable: profile.allocatable ? { ...profile.allocatable, ...parseCapacity(options.nodeCapacity) } : undefined,
    };
  }
  const settings: Record<string, string> = {};
  for (const [flag, key, value] of [
    ['--startup-delay', 'kube-sim.dev/startup-delay', options.startupDelay],
    ['--ready-delay', 'kube-sim.dev/ready-delay', options.readyDelay],
    ['--stop-delay', 'kube-sim.dev/stop-delay', options.stopDelay],
  ] as const) {
    if (value === undefined) continue;
    try {
      parseDuration(value);
    } catch {
      throw new Error(`${flag}: "${value}" is not a duration (e.g. 2s, 1m30s)`);
    }
    settings[key] = value;
  }
  const clusterCidr = clusterCidrFor(options.clusterCidr, options.nodes, log.info);
  const kubelet: SimulatorOptions['kubelet'] = { profile, settings, clusterCidr };
  if (options.stages) kubelet!.stages = loadStageFile(options.stages);
  if (options.images) kubelet!.images = loadImageCatalog(options.images);
  if (options.missingImages !== undefined) kubelet!.missingImages = missingImages(options.missingImages);
  return kubelet;
}

/** --missing-images: a file of references (one a line, `#` comments) when one is there, else a comma-separated list. */
function missingImages(value: string): string[] {
  let text = value;
  try {
    if (statSync(value).isFile()) text = readFileSync(value, 'utf8');
  } catch {
    // not a file: the list itself
  }
  return parseImageList(text);
}

const ADMIN_USER = 'kubernetes-admin';

interface ServeSecurity {
  auth: ApiAuth;
  adminToken: string;
}

/**
 * --auth: static tokens from --token-auth-file plus a fresh admin token (system:masters), printed at start.
 * The admin token comes from the OS's secure random source, not the seeded RNG: --seed must not make it guessable.
 * Over etcd it is the one etcd keeps, made by the first API server, so that every server takes it.
 */
function serveSecurity(cluster: Cluster, options: ServeOptions, log: Logger): ServeSecurity {
  if (!options.auth) throw new Error('--token-auth-file needs --auth');
  const tokens = new Map<string, UserInfo>();
  if (options.tokenAuthFile) {
    const file = loadTokenFile(options.tokenAuthFile);
    for (const warning of file.warnings) log.warn(warning);
    for (const [token, user] of file.users) tokens.set(token, user);
  }
  const adminToken = cluster.sharedAdminToken ?? randomBytes(32).toString('base64url');
  tokens.set(adminToken, { username: ADMIN_USER, groups: ['system:masters'] });
  // With --data the ServiceAccount signing key is kept beside the CA, so issued tokens outlive a restart.
  const backend = authBackend(cluster);
  if (options.data !== undefined) backend.tokens.useKeyFile(join(tlsDir(options.data), 'sa.key'));
  return { auth: new ApiAuth(backend, tokens), adminToken };
}

/** The current context of the kubeconfig kubectl would read, if it has one (a broken file counts as none). */
function currentContext(): string | undefined {
  try {
    return readKubeconfigFiles(kubeconfigFiles())?.context;
  } catch {
    return undefined;
  }
}

/** --etcd-servers and its companions, checked: undefined without it. */
function etcdOptions(options: ServeOptions): SimulatorOptions['etcd'] {
  if (options.etcdServers === undefined) return undefined;
  if (options.data !== undefined) throw new Error('--data and --etcd-servers are exclusive: etcd keeps the cluster');
  const endpoints = options.etcdServers
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const url of endpoints)
    if (!/^https?:\/\/[^/]+\/?$/.test(url))
      throw new Error(`--etcd-servers: "${url}" is not an etcd client URL (e.g. http://127.0.0.1:2379)`);
  if (endpoints.length === 0) throw new Error('--etcd-servers: no URL given');
  const prefix = options.etcdPrefix ?? '/registry';
  if (!prefix.startsWith('/')) throw new Error(`--etcd-prefix: "${prefix}" must start with /`);
  let compactionIntervalMs: number;
  try {
    compactionIntervalMs = parseDuration(options.etcdCompactionInterval ?? '5m');
  } catch {
    throw new Error(`--etcd-compaction-interval: "${options.etcdCompactionInterval}" is not a duration (e.g. 5m, 0)`);
  }
  return { endpoints, prefix, compactionIntervalMs };
}

/** --components, checked: the set of components this process runs. */
function componentsOf(options: ServeOptions): Set<Component> {
  const names = (options.components ?? COMPONENTS.join(','))
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const known = new Set<string>(COMPONENTS);
  for (const name of names)
    if (!known.has(name))
      throw new Error(`--components: unknown component "${name}" (known: ${COMPONENTS.join(', ')})`);
  if (names.length === 0) throw new Error(`--components: none given (known: ${COMPONENTS.join(', ')})`);
  const components = new Set(names as Component[]);
  if (components.has('apiserver')) return components;
  if (options.etcdServers === undefined && options.kubeconfig === undefined)
    throw new Error(
      '--components without apiserver needs --kubeconfig FILE (the API server to attach to, as kube-controller-manager reads it) or --etcd-servers (the cluster etcd keeps, which another sim serve serves)',
    );
  if (options.etcdServers !== undefined && options.kubeconfig !== undefined)
    throw new Error(
      '--components without apiserver takes --kubeconfig FILE (attach to an API server) or --etcd-servers, not both',
    );
  return components;
}

/** `sim serve`: start a cluster, serve it, and shut down cleanly on SIGINT/SIGTERM. */
export async function serve(options: ServeOptions): Promise<void> {
  const log = new Logger(options.logLevel);
  // The serving CA is the cluster CA (kube-root-ca.crt, the CSR signers), so it is known before the cluster starts;
  // over etcd it is the one etcd keeps for every API server, known once the cluster has started.
  let tls: ServingTls | undefined;
  try {
    tls = options.tls && options.etcdServers === undefined ? servingTls(options.host, options.data) : undefined;
  } catch (err) {
    log.error(`cannot start: --tls: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
    return;
  }
  let sim: Simulator;
  let components: Set<Component>;
  try {
    components = componentsOf(options);
    if (!components.has('apiserver') && options.kubeconfig !== undefined)
      return await serveAttached(options, [...components], log);
    const etcd = etcdOptions(options);
    const snapshot = options.snapshot !== undefined ? readSnapshotFile(options.snapshot) : undefined;
    let startTime: number | undefined;
    if (options.startTime !== undefined) {
      startTime = Date.parse(options.startTime);
      if (Number.isNaN(startTime))
        throw new Error(`--start-time: "${options.startTime}" is not an RFC 3339 time (e.g. 2025-06-01T12:00:00Z)`);
    }
    sim = await startSimulator({
      etcd,
      components,
      informers: options.informers,
      clock: options.clock ?? (snapshot ? 'virtual' : 'real'),
      startTime,
      snapshot,
      seed: options.seed,
      watchHistory: options.watchHistory,
      eventTtlMs: parseDuration(options.eventTtl),
      metricsServer: options.metricsServer !== false,
      dataPath: options.data,
      repairData: options.repair,
      controllers: options.controllers,
      log: (level, message) => log.log(level, message),
      nodes: options.nodes,
      kubelet: kubeletOptions(options, log),
      scheduler: options.scheduler,
      ca: tls ? { cert: tls.caCert, key: tls.caKey } : undefined,
      caDir: options.data !== undefined ? tlsDir(options.data) : undefined,
      serviceMappings: (options.mapService ?? []).map(parseServiceMapping),
      kubeletAddress: options.host,
    });
    if (options.tls && !tls) tls = servingTls(options.host, undefined, sim.cluster.certificates.load().pem);
  } catch (err) {
    log.error(`cannot start: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
    return;
  }
  const { cluster, controllers: manager } = sim;
  for (const note of cluster.recoveryNotes) log.warn(note);
  if (!components.has('apiserver')) return runComponentsOnly(sim, [...components], options, log);
  let security: ServeSecurity | undefined;
  try {
    security = options.auth || options.tokenAuthFile ? serveSecurity(cluster, options, log) : undefined;
    cluster.authorizer = security?.auth.authorizer;
  } catch (err) {
    log.error(`cannot start: ${err instanceof Error ? err.message : String(err)}`);
    await cluster.close();
    process.exitCode = 1;
    return;
  }
  let address = `${options.host}:${options.port}`;
  const app = buildServer(cluster, {
    ...sim.serverOptions,
    advertiseAddress: () => address,
    logger: log.error,
    auth: security?.auth,
    // With --auth, clients may authenticate with a certificate the cluster CA signed (a CSR's, say).
    https: tls && { cert: tls.cert, key: tls.key, ...(security ? { clientCa: tls.caCert } : {}) },
  });
  if (tls) {
    const plainHttp = answerPlainHttp(app.server as unknown as TlsServer);
    app.addHook('preClose', (done) => {
      plainHttp.destroyPending();
      done();
    });
  }
  try {
    await app.listen({ port: options.port, host: options.host });
  } catch (err) {
    log.error(`cannot listen on ${options.host}:${options.port}: ${err instanceof Error ? err.message : String(err)}`);
    await cluster.close();
    process.exitCode = 1;
    return;
  }
  const stopCompaction = options.idleCompaction === false ? () => undefined : compactWhenQuiet(log.info);
  // A kubeconfig put in a temporary directory of our own is removed again at shutdown (its CA dies with us).
  let temporaryDir: string | undefined;
  // Signals are handled before anything is printed: whoever waits for the "serving on" line may stop us at once.
  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal}: shutting down`);
    stopCompaction();
    await app.close();
    await cluster.close();
    if (temporaryDir) rmSync(temporaryDir, { recursive: true, force: true });
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  const port = (app.server.address() as AddressInfo).port;
  address = `${options.host}:${port}`;
  const url = `${tls ? 'https' : 'http'}://${options.host.includes(':') ? `[${options.host}]` : options.host}:${port}`;
  // What a client needs (the kubeconfig file, the admin token) is out before the "serving on" line that tells
  // scripts and tests the server is up.
  // Without --auth any token is accepted and ignored; kubectl needs one all the same, or over https it stops to
  // prompt for a username and password.
  const forClients = {
    server: url,
    token: security?.adminToken ?? (tls ? 'kube-sim' : undefined),
    caCert: tls?.caCert,
  };
  if (tls || options.kubeconfig) {
    // --tls: kubectl needs the CA, so a kubeconfig carrying it (and the admin token with --auth) is written out.
    if (!options.kubeconfig && !tls?.caDir) temporaryDir = mkdtempSync(join(tmpdir(), 'kube-sim-'));
    const file = resolvePath(options.kubeconfig ?? join(tls?.caDir ?? temporaryDir!, 'kubeconfig'));
    writeFileSync(file, kubeconfigYaml(forClients), { mode: 0o600 });
    process.stdout.write(
      `kubeconfig written to ${file}${tls ? ' (with the CA that signed the serving certificate)' : ''}: export KUBECONFIG=${file}\n`,
    );
  }
  if (options.name !== undefined) {
    // kind's way: the context goes into the kubeconfig kubectl reads, so plain `kubectl` reaches this server.
    try {
      const merged = mergeKubeconfig(
        kubeconfigFileForMerge(),
        contextName(options.name),
        forClients,
        options.switch !== false,
      );
      process.stdout.write(`${mergeMessage(merged, url)}\n`);
    } catch (err) {
      log.warn(`--name: cannot write the kubeconfig: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  if (security) {
    process.stdout.write(`auth on: admin token (user ${ADMIN_USER}, group system:masters): ${security.adminToken}\n`);
    // kubectl sends tokens over TLS only: with --tls the kubeconfig written above carries this token.
    if (!tls)
      process.stdout.write(
        `try it: curl -H 'Authorization: Bearer ${security.adminToken}' ${url}/api/v1/namespaces   (for kubectl, serve with --tls as well: kubectl sends tokens over TLS only)\n`,
      );
  }
  process.stdout.write(`kube-sim serving on ${url}   (live view: ${url}${UI_PATH})\n`);
  if (!security && !tls && options.name === undefined) {
    const current = currentContext();
    if (current !== undefined)
      process.stdout.write(
        `note: your kubeconfig's current context is "${current}", so plain kubectl goes there, not here: use kubectl --server ${url}, or sim serve --name NAME (adds a context kube-sim-NAME and switches to it)\n`,
      );
    else
      process.stdout.write(
        port === 8080 && (options.host === '127.0.0.1' || options.host === 'localhost')
          ? `kubectl finds it without a kubeconfig (its default is localhost:8080); or: kubectl --server ${url} get ns\n`
          : `point kubectl at it: kubectl --server ${url} get ns   (or: sim kubeconfig --server ${url} > kubeconfig && export KUBECONFIG=$PWD/kubeconfig)\n`,
      );
  }
  log.info(
    `clock ${cluster.clock.mode}, seed ${cluster.random.seed}${options.etcdServers ? `, etcd ${options.etcdServers} (prefix ${options.etcdPrefix ?? '/registry'})` : options.data ? `, data ${options.data}` : ', in memory'}${options.snapshot ? `, booted from ${options.snapshot} (${cluster.restoredNodes.size} nodes)` : ''}`,
  );
  log.info(
    options.etcdServers && components.has('controllers')
      ? 'controllers: started while this process leads Lease kube-system/kube-controller-manager'
      : `controllers: ${manager.names().join(', ') || '(none)'}`,
  );
  const simulated = options.nodes + cluster.restoredNodes.size;
  log.info(
    `nodes: ${simulated > 0 ? `${simulated} simulated (kubelets adopt Nodes created later too)` : 'none simulated'}; scheduler ${(options.scheduler ?? simulated > 0) ? 'on' : 'off'}`,
  );
}

/**
 * A process without the API server (`--components controllers,scheduler`, over etcd): its components work on the
 * cluster etcd keeps through this process's own cache and writes, as kube-controller-manager works through its
 * kube-apiserver; it says so on stdout in one line (scripts wait for it, as for "serving on") and stops on a signal.
 */
function runComponentsOnly(sim: Simulator, components: Component[], options: ServeOptions, log: Logger): void {
  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal}: shutting down`);
    await sim.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.stdout.write(
    `kube-sim components running: ${components.join(', ')} (no API server; the cluster is in etcd ${options.etcdServers})\n`,
  );
}

/** What a process that attaches to an API server (--kubeconfig, no apiserver) cannot do, said before it starts. */
const NOT_WHEN_ATTACHED: Array<[keyof ServeOptions, string]> = [
  ['data', '--data'],
  ['snapshot', '--snapshot'],
  ['tls', '--tls'],
  ['auth', '--auth'],
  ['tokenAuthFile', '--token-auth-file'],
  ['name', '--name'],
];

/**
 * `--components controllers,scheduler,kubelets --kubeconfig FILE`: the components attach to the API server of the
 * kubeconfig's current context over HTTP(S), as kube-controller-manager, kube-scheduler and kubelets read their
 * --kubeconfig (here it is read, not written). One line on stdout says so once they run; a signal stops them.
 */
async function serveAttached(options: ServeOptions, components: Component[], log: Logger): Promise<void> {
  for (const [key, flag] of NOT_WHEN_ATTACHED)
    if (options[key] !== undefined && options[key] !== false)
      throw new Error(
        `${flag} belongs to the API server; with --components ${components.join(',')} --kubeconfig this process attaches to one`,
      );
  if (options.clock === 'virtual')
    throw new Error('--clock virtual: components attached to an API server run on real time, as the server does');
  const file = resolvePath(options.kubeconfig!);
  const connection = readKubeconfig(file);
  const attached = await attachComponents(connection, {
    components: new Set(components),
    seed: options.seed,
    controllers: options.controllers,
    log: (level, message) => log.log(level, message),
    nodes: options.nodes,
    kubelet: kubeletOptions(options, log),
    scheduler: options.scheduler,
  });
  // The clock's timers do not hold the process; while the API server is away nothing else does (no socket open).
  const alive = setInterval(() => undefined, 1 << 30);
  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal}: shutting down`);
    clearInterval(alive);
    await attached.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.stdout.write(
    `kube-sim components running: ${components.join(', ')} (attached to ${connection.server}, from the kubeconfig ${file})\n`,
  );
}
