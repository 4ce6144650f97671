import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { ApiError } from '../api/errors.js';
import { RealClock, wallClock, type TimerHandle } from '../clock/clock.js';
import { SeededRandom } from '../clock/random.js';
import { discoverResources, sameResources, type DiscoveredResource } from '../client/discovery.js';
import { connectionFetch, fetchTransport, HttpClient, type HttpTransport } from '../client/http.js';
import type { Connection } from '../client/kubeconfig.js';
import { CONTROLLER_NAMES } from '../controllers/index.js';
import { selectControllers, type ControllerHost } from '../runtime/manager.js';
import { defaultProfile } from '../kubelet/node.js';
import { startComponents, type SimulatorOptions } from './simulator.js';

/** The annotation KWOK's fake nodes carry (its --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake). */
export const FAKE_NODE_ANNOTATION = 'kwok.x-k8s.io/node';

/** How often the served kinds are discovered again (kube-controller-manager's garbage collector: every 30 s). */
const REDISCOVERY_MS = 30_000;
/** How long start-up waits for the API server to answer before it gives up. */
const REACH_TIMEOUT_MS = 60_000;

export interface AttachedComponents {
  /** The controllers this process runs while it leads (none when it runs no controllers). */
  controllerNames(): string[];
  close(): Promise<void>;
}

/**
 * Controllers, scheduler and kubelets of this process attached to an API server over HTTP(S) (`sim serve
 * --components controllers,scheduler,kubelets --kubeconfig FILE`), as kube-controller-manager, kube-scheduler and
 * kubelets are: another kube-sim, or any cluster, where the simulated nodes then behave as KWOK's fake nodes do.
 * Each component has an HTTP client of its own with the kubeconfig's credentials; the controllers and the scheduler
 * lead on their Leases in kube-system, so that they start only where no other copy leads (a real cluster's
 * kube-controller-manager keeps leading its own). The kinds served come from discovery, read again every 30 s.
 */
export async function attachComponents(connection: Connection, options: SimulatorOptions): Promise<AttachedComponents> {
  const selected = selectControllers(options.controllers ?? '*', CONTROLLER_NAMES);
  const baseUrl = connection.server.replace(/\/$/, '');
  const fetchFn = await connectionFetch(connection);
  const transport = fetchTransport(baseUrl, fetchFn);
  let resources = await reach(baseUrl, transport, connection);
  const clock = new RealClock();
  const random = options.seed !== undefined ? new SeededRandom(options.seed) : SeededRandom.fromOs();
  const closers: Array<() => Promise<void> | void> = [];
  const changed: Array<() => void> = [];
  let rediscovery: TimerHandle | undefined;
  const rediscover = (): void => {
    rediscovery = clock.setTimer(REDISCOVERY_MS, () => {
      discoverResources(transport).then(
        (next) => {
          if (!sameResources(resources, next)) {
            resources = next;
            for (const fn of changed) fn();
          }
          rediscover();
        },
        () => rediscover(),
      );
    });
  };
  rediscover();
  closers.push(() => rediscovery?.cancel());
  const host: ControllerHost = {
    client: () => new HttpClient(baseUrl, transport, fetchFn),
    resources: {
      all: () => resources,
      byKind: (apiVersion, kind) => {
        const group = apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';
        // An owner reference may name a version other than the preferred one: the kind is what identifies it.
        return (
          resources.find((r) => r.apiVersion === apiVersion && r.kind === kind) ??
          resources.find((r) => r.gvr.group === group && r.kind === kind)
        );
      },
      onChange: (fn) => changed.push(fn),
    },
    clock,
    random,
    // The kubeconfig's CA is the one clients trust the server by (kube-controller-manager's --root-ca-file): what
    // kube-root-ca.crt publishes. Without a signing key, CertificateSigningRequests wait for another signer.
    certificates: connection.caCert !== undefined ? { certificate: async () => connection.caCert! } : undefined,
  };
  // The Nodes these kubelets register carry KWOK's annotation, and only Nodes that carry it get a kubelet here: a
  // cluster's real nodes are left to their own kubelets, and Node manifests written for KWOK join as they are.
  const profile = options.kubelet?.profile ?? defaultProfile();
  const kubelet: SimulatorOptions['kubelet'] = {
    ...options.kubelet,
    profile: { ...profile, annotations: { ...profile.annotations, [FAKE_NODE_ANNOTATION]: 'fake' } },
    manages: (node) => node.metadata.annotations?.[FAKE_NODE_ANNOTATION] === 'fake',
  };
  try {
    const { controllers } = await startComponents(
      {
        host,
        identity: `${hostname()}_${randomUUID()}`,
        electionClient: new HttpClient(baseUrl, transport, fetchFn),
        onClose: (fn) => closers.push(fn),
        restoredNodes: new Map(),
      },
      { ...options, kubelet },
      selected,
    );
    return {
      controllerNames: () => controllers.names(),
      close: async () => {
        for (const fn of closers.reverse()) await fn();
        closers.length = 0;
      },
    };
  } catch (err) {
    for (const fn of closers.reverse()) await fn();
    throw err;
  }
}

/**
 * Discovery, once the server answers: a server still starting (refused, 5xx) is waited for, up to a minute, as
 * kube-controller-manager waits for its API server; a refusal of the credentials (401, 403) fails at once.
 */
async function reach(baseUrl: string, transport: HttpTransport, connection: Connection): Promise<DiscoveredResource[]> {
  const deadline = wallClock.now() + REACH_TIMEOUT_MS;
  for (;;) {
    try {
      return await discoverResources(transport);
    } catch (err) {
      if (err instanceof ApiError && (err.code === 401 || err.code === 403))
        throw new Error(
          `${baseUrl} answered ${err.code} ${err.code === 401 ? 'Unauthorized' : 'Forbidden'}: ${
            err.code === 401 && connection.token === undefined && connection.clientCert === undefined
              ? "the kubeconfig's user has no token or client certificate"
              : err.message
          }`,
        );
      const cause = (err as { cause?: { message?: string; code?: string } }).cause;
      // A certificate the kubeconfig's CA does not verify will not verify later either.
      if (wallClock.now() >= deadline || /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME/.test(cause?.code ?? '')) {
        // fetch says only "fetch failed"; the cause says why (refused, a certificate it cannot verify …).
        throw new Error(
          `cannot reach ${baseUrl}: ${(err as Error).message}${cause?.message ? `: ${cause.message}` : ''}`,
        );
      }
      await new Promise<void>((resolve) => wallClock.setTimer(1000, resolve));
    }
  }
}
