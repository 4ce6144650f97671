import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { parseDuration, wallClock } from '../clock/clock.js';
import type { KubeClient } from '../client/client.js';
import {
  HttpClient,
  connectionFetch,
  errorOf,
  fetchTransport,
  type HttpReply,
  type HttpRequest,
  type HttpTransport,
} from '../client/http.js';
import type { Connection } from '../client/kubeconfig.js';
import { DEFAULT_VIRTUAL_START } from '../cluster/cluster.js';
import { startSimulator, type Simulator, type SimulatorOptions } from '../cluster/simulator.js';
import type { Snapshot } from '../api/snapshot.js';

export type LogFn = NonNullable<SimulatorOptions['log']>;

/**
 * The cluster a scenario runs against. Embedded: a fresh simulator on a virtual clock in this process,
 * driven through an in-process client (whose watch deliveries the virtual clock waits for, so every change
 * is seen at the cluster time it happened) and through its HTTP API via fastify's inject. Remote: a running
 * `sim serve`, driven over HTTP.
 */
export interface ScenarioTarget {
  readonly mode: 'embedded' | 'remote';
  readonly client: KubeClient;
  /** Raw API requests: server-side apply, /scale, and the simulator's /sim/v1 endpoints. */
  readonly http: HttpTransport;
  readonly virtual: boolean;
  /** Cluster time now (remote: as last read from the server). */
  now(): number;
  /** Moves a virtual clock forward and waits for the work due on the way. */
  advance(ms: number): Promise<void>;
  /** Lets the work due now run to completion. */
  settle(): Promise<void>;
  /** When the next scheduled work is due (embedded only; undefined when unknown or nothing is scheduled). */
  nextTimerAt(): number | undefined;
  /** Where kubectl finds the server, with its credentials (an embedded target starts listening on 127.0.0.1 the first time). */
  connection(): Promise<Connection>;
  /** Resolves when a browser has loaded the live view (/sim/ui/) from this server (embedded only). */
  pageOpened(): Promise<void>;
  /** Names of the controllers running, when known. */
  controllers(): string[] | undefined;
  close(): Promise<void>;
}

export interface EmbeddedOptions {
  seed: number;
  /** Default: the snapshot's time, else 2025-01-01. */
  startTime?: number;
  /** Boot from this snapshot (its nodes are simulated besides `nodes`). */
  snapshot?: Snapshot;
  controllers?: string;
  nodes?: number;
  log?: LogFn;
  /** The port to listen on when a connection is first asked for (0: a free one). */
  port?: number;
  /**
   * At most this many ms of cluster time per ms of wall time while time passes (0 or unset: as fast as it can), so
   * that a person watching the live view sees the replay happen. Aborting `signal` ends a paced advance early.
   */
  pace?: number;
  signal?: AbortSignal;
}

/** A paced advance moves the clock on this often (wall time). */
const PACE_TICK_MS = 100;

function injectTransport(app: FastifyInstance): HttpTransport {
  return async ({ method, path, body, contentType }: HttpRequest): Promise<HttpReply> => {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = contentType ?? 'application/json';
    const res = await app.inject({ method: method as 'GET', url: path, headers, payload: body });
    return { status: res.statusCode, contentType: String(res.headers['content-type'] ?? ''), text: res.body };
  };
}

export async function embeddedTarget(options: EmbeddedOptions): Promise<ScenarioTarget> {
  const simOptions: SimulatorOptions & { nodes?: number } = {
    clock: 'virtual',
    seed: options.seed,
    startTime: options.startTime ?? (options.snapshot?.header.time ? undefined : DEFAULT_VIRTUAL_START),
    controllers: options.controllers ?? '*',
    log: options.log,
    snapshot: options.snapshot,
  };
  if (options.nodes !== undefined) simOptions.nodes = options.nodes;
  const sim: Simulator = await startSimulator(simOptions);
  const clock = sim.cluster.virtualClock!;
  let address = '127.0.0.1:0';
  const app = sim.buildServer({ advertiseAddress: () => address });
  let url: Promise<string> | undefined;
  let opened!: () => void;
  const pageOpened = new Promise<void>((resolve) => (opened = resolve));
  // The page's script is loaded once per page load: the first says a person is watching.
  app.addHook('onResponse', async (request) => {
    if (request.url.startsWith('/sim/ui/main.js')) opened();
  });
  const client = sim.client();
  const pace = options.pace ?? 0;
  const pacedAdvance = async (ms: number): Promise<void> => {
    for (let done = 0; done < ms && !options.signal?.aborted; ) {
      const piece = Math.min(ms - done, pace * PACE_TICK_MS);
      const wallStart = wallClock.now();
      await clock.advance(piece);
      done += piece;
      await wallSleep(Math.max(0, piece / pace - (wallClock.now() - wallStart)));
    }
  };
  return {
    mode: 'embedded',
    client,
    http: injectTransport(app),
    virtual: true,
    now: () => clock.now(),
    advance: (ms) => (pace > 0 ? pacedAdvance(ms) : clock.advance(ms)),
    settle: () => clock.settle(),
    nextTimerAt: () => clock.nextTimerAt(),
    pageOpened: () => pageOpened,
    connection: async () => ({
      server: await (url ??= app.listen({ host: '127.0.0.1', port: options.port ?? 0 }).then(() => {
        const port = (app.server.address() as AddressInfo).port;
        address = `127.0.0.1:${port}`;
        return `http://${address}`;
      })),
    }),
    controllers: () => sim.controllers.names(),
    close: async () => {
      await app.close();
      await sim.close();
    },
  };
}

interface ClockState {
  now: string;
  mode: 'real' | 'virtual';
}

export async function remoteTarget(connection: Connection): Promise<ScenarioTarget> {
  const baseUrl = connection.server.replace(/\/$/, '');
  const fetchFn = await connectionFetch(connection);
  const http = fetchTransport(baseUrl, fetchFn);
  const readClock = async (): Promise<ClockState> => {
    let reply: HttpReply;
    try {
      reply = await http({ method: 'GET', path: '/sim/v1/clock' });
    } catch (err) {
      // fetch says only "fetch failed"; the cause says why (refused, a certificate it cannot verify …).
      const cause = (err as { cause?: { message?: string } }).cause?.message;
      throw new Error(`cannot reach ${baseUrl}: ${(err as Error).message}${cause ? `: ${cause}` : ''}`);
    }
    if (reply.status === 401)
      throw new Error(
        `${baseUrl} answered 401 Unauthorized: ${connection.token === undefined ? 'give a token (--token, or --kubeconfig with one)' : 'the token is not valid there'}`,
      );
    if (reply.status === 403)
      throw new Error(`${baseUrl} answered 403 Forbidden: ${errorOf(reply, 'GET /sim/v1/clock').message}`);
    if (reply.status !== 200)
      throw new Error(`${baseUrl} is not a kube-sim server (GET /sim/v1/clock answered ${reply.status})`);
    return JSON.parse(reply.text) as ClockState;
  };
  const first = await readClock();
  let now = Date.parse(first.now);
  const virtual = first.mode === 'virtual';
  const advance = async (ms: number): Promise<void> => {
    const reply = await http({
      method: 'POST',
      path: '/sim/v1/clock/advance',
      body: JSON.stringify({ by: `${ms}ms` }),
    });
    if (reply.status !== 200) throw errorOf(reply, 'advancing the clock');
    now = Date.parse((JSON.parse(reply.text) as ClockState).now);
  };
  return {
    mode: 'remote',
    client: new HttpClient(baseUrl, http, fetchFn),
    http,
    virtual,
    now: () => (virtual ? now : wallClock.now()),
    advance: async (ms) => {
      if (!virtual) throw new Error(`the server's clock is real: start it with --clock virtual to advance time`);
      await advance(ms);
    },
    settle: async () => {
      if (virtual) await advance(0);
      else now = Date.parse((await readClock()).now);
    },
    nextTimerAt: () => undefined,
    // A running server's page is its own: nothing to wait for.
    pageOpened: async () => undefined,
    connection: async () => ({ ...connection, server: baseUrl }),
    controllers: () => undefined,
    close: async () => undefined,
  };
}

/** Waits on the wall clock (a real-clock remote server, kubectl deadlines): the one place replay uses it. */
export function wallSleep(ms: number): Promise<void> {
  return new Promise((resolve) => wallClock.setTimer(ms, resolve));
}

export function durationMs(value: string | number): number {
  return typeof value === 'number' ? value * 1000 : parseDuration(value);
}
