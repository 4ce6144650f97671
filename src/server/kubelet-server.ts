import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { Errors } from '../api/errors.js';
import type { KubeletConnector } from '../api/kubelet-connector.js';
import type { KubeObject } from '../api/types.js';
import { onUpgrade, rejectUpgrade } from './connections.js';
import { PodConnect, podLog, type ConnectSubresource } from './pod-connect.js';
import type { ServedCluster } from './served-cluster.js';
import { registerNodeFaults, sendError, statusJson, toApiError } from './server.js';

/**
 * A kubelets process's own API (kubelet's port 10250), which API servers in other processes reach for pods/log,
 * exec, attach and portforward (kubelet-proxy.ts): kubelet's paths, answered by the same code as in one process,
 * from this process's kubelets and its view of the pod. The API server has authenticated, authorized and admitted
 * the request already; this endpoint listens on the process's own address only.
 */
const UPGRADES: Record<string, ConnectSubresource> = { exec: 'exec', attach: 'attach', portForward: 'portforward' };

export function buildKubeletServer(
  cluster: ServedCluster,
  kubelet: KubeletConnector,
  options: { https?: { cert: string; key: string }; logger?: (line: string) => void } = {},
): FastifyInstance {
  const app = Fastify({
    logger: false,
    forceCloseConnections: true,
    ...(options.https ? { https: options.https } : {}),
  }) as unknown as FastifyInstance;
  const pods = cluster.registry.lookup('', 'v1', 'pods')!;
  app.setErrorHandler((err, _request, reply) => sendError(reply, toApiError(err)));
  app.setNotFoundHandler((_request, reply) => sendError(reply, Errors.pathNotFound()));
  app.get<{ Params: { namespace: string; pod: string; container: string } }>(
    '/containerLogs/:namespace/:pod/:container',
    (request, reply) => {
      const { namespace, pod, container } = request.params;
      const query = { ...(request.query as Record<string, string | string[] | undefined>), container };
      podLog(cluster, kubelet, pods, namespace, pod, query, reply, false);
    },
  );
  registerNodeFaults(app, cluster, kubelet, false);
  const connect = new PodConnect(cluster, kubelet, false);
  onUpgrade(
    app.server,
    (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const reject = (err: ReturnType<typeof toApiError>, contentType = 'application/json'): void =>
        rejectUpgrade(
          socket,
          err.code,
          contentType,
          contentType === 'application/json' ? statusJson(err) : err.message,
        );
      try {
        const url = new URL(req.url ?? '/', 'http://localhost');
        const [kind, namespace, name, container] = url.pathname
          .split('/')
          .filter((s) => s !== '')
          .map(decodeURIComponent);
        if (kind === 'podNetwork' && namespace && name && container)
          return dial(namespace, name, container, socket, head);
        const subresource = kind === undefined ? undefined : UPGRADES[kind];
        if (!subresource || !namespace || !name) return reject(Errors.pathNotFound());
        if (container !== undefined) url.searchParams.set('container', container);
        connect.serve(subresource, pods, namespace, name, url, req, socket, head, reject);
      } catch (err) {
        reject(toApiError(err));
      }
    },
    options.logger,
  );
  /** kube-sim's /podNetwork/NS/POD/PORT: a connection into this process's simulated pod network (kubelet-proxy.ts). */
  const dial = (namespace: string, name: string, port: string, socket: Duplex, head: Buffer): void => {
    const refuse = (message: string): void => rejectUpgrade(socket, 502, 'text/plain', message);
    let pod: KubeObject;
    try {
      pod = cluster.api.get(pods, namespace, name);
    } catch (err) {
      return refuse(toApiError(err).message);
    }
    kubelet.dial(pod, Number(port)).then(
      (connection) => {
        socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n');
        if (head.length > 0) connection.write(head);
        connection.pipe(socket);
        socket.pipe(connection);
        const end = (): void => {
          connection.destroy();
          socket.destroy();
        };
        connection.once('close', end);
        socket.once('close', end);
        connection.on('error', end);
        socket.on('error', end);
      },
      (err: unknown) => refuse(err instanceof Error ? err.message : String(err)),
    );
  };
  app.addHook('preClose', (done) => {
    connect.close();
    done();
  });
  return app;
}
