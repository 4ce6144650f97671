import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { isPlainObject } from '../api/types.js';

/** Where an API server is and how to talk to it: a bearer token, and how to trust an https server's certificate. */
export interface Connection {
  server: string;
  token?: string;
  /** PEM of the CA that signed the server's certificate. */
  caCert?: string;
  insecureSkipTlsVerify?: boolean;
}

/**
 * A kubeconfig with one cluster, user and context named kube-sim. For a plain-http server it says
 * insecure-skip-tls-verify: @kubernetes/client-node (1.0 on) refuses http:// clusters without it, and kubectl
 * ignores it when there is no TLS.
 */
export function kubeconfigYaml({ server, token, caCert, insecureSkipTlsVerify }: Connection): string {
  // An https server: trust its CA (sim serve --tls makes one); plain http: skip verification as above.
  const skipVerify =
    caCert !== undefined
      ? `\n    certificate-authority-data: ${Buffer.from(caCert).toString('base64')}`
      : server.startsWith('http:') || insecureSkipTlsVerify
        ? '\n    insecure-skip-tls-verify: true'
        : '';
  // A bearer token (sim serve --auth); kubectl sends it over TLS only.
  const user = token === undefined ? ' {}' : `\n    token: ${JSON.stringify(token)}`;
  return `apiVersion: v1
kind: Config
clusters:
- name: kube-sim
  cluster:
    server: ${server}${skipVerify}
users:
- name: kube-sim
  user:${user}
contexts:
- name: kube-sim
  context:
    cluster: kube-sim
    user: kube-sim
    namespace: default
current-context: kube-sim
`;
}

type Obj = Record<string, unknown>;

/** The entry called `name` of a kubeconfig list (clusters, users, contexts), or undefined. */
function named(config: Obj, list: string, name: string): Obj | undefined {
  const entries = Array.isArray(config[list]) ? (config[list] as unknown[]) : [];
  const entry = entries.find((e): e is Obj => isPlainObject(e) && e.name === name);
  return entry && isPlainObject(entry[list.slice(0, -1)]) ? (entry[list.slice(0, -1)] as Obj) : undefined;
}

const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/**
 * The server and credentials of a kubeconfig's current context, as kubectl reads them: the cluster's server,
 * certificate-authority-data or certificate-authority (a path relative to the file) and insecure-skip-tls-verify,
 * the user's token or tokenFile. Client certificates and exec plugins are not read (kube-sim authenticates bearer
 * tokens only). Throws a message for the user when the file or its current context is unusable.
 */
export function readKubeconfig(file: string): Connection {
  let config: unknown;
  try {
    config = parseYaml(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`kubeconfig ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (!isPlainObject(config)) throw new Error(`kubeconfig ${file}: not a kubeconfig`);
  const contextName = text(config['current-context']);
  if (!contextName) throw new Error(`kubeconfig ${file}: current-context is not set`);
  const context = named(config, 'contexts', contextName);
  if (!context) throw new Error(`kubeconfig ${file}: context "${contextName}" does not exist`);
  const clusterName = text(context.cluster) ?? '';
  const cluster = named(config, 'clusters', clusterName);
  const server = cluster && text(cluster.server);
  if (!server)
    throw new Error(`kubeconfig ${file}: cluster "${clusterName}" of context "${contextName}" has no server`);
  const relative = (path: string): string => resolve(dirname(file), path);
  const connection: Connection = { server };
  const caData = text(cluster['certificate-authority-data']);
  const caFile = text(cluster['certificate-authority']);
  if (caData) connection.caCert = Buffer.from(caData, 'base64').toString('utf8');
  else if (caFile) connection.caCert = readFileSync(relative(caFile), 'utf8');
  if (cluster['insecure-skip-tls-verify'] === true) connection.insecureSkipTlsVerify = true;
  const user = named(config, 'users', text(context.user) ?? '');
  const token =
    user &&
    (text(user.token) ??
      (text(user.tokenFile) ? readFileSync(relative(text(user.tokenFile)!), 'utf8').trim() : undefined));
  if (token) connection.token = token;
  return connection;
}
