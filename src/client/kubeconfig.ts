import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { yaml } from '../api/yaml.js';
import { makeDirectories } from '../api/directories.js';
import { isPlainObject } from '../api/types.js';

/** Where an API server is and how to talk to it: a bearer token, and how to trust an https server's certificate. */
export interface Connection {
  server: string;
  token?: string;
  /** PEM of the CA that signed the server's certificate. */
  caCert?: string;
  insecureSkipTlsVerify?: boolean;
  /** PEM of a client certificate and its key (kind's and kubeadm's admin kubeconfigs authenticate so). */
  clientCert?: string;
  clientKey?: string;
}

/**
 * A kubeconfig with one cluster, user and context named kube-sim. For a plain-http server it says
 * insecure-skip-tls-verify: @kubernetes/client-node (1.0 on) refuses http:// clusters without it, and kubectl
 * ignores it when there is no TLS.
 */
export function kubeconfigYaml(
  { server, token, caCert, insecureSkipTlsVerify }: Connection,
  name = contextName(),
): string {
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
- name: ${name}
  cluster:
    server: ${server}${skipVerify}
users:
- name: ${name}
  user:${user}
contexts:
- name: ${name}
  context:
    cluster: ${name}
    user: ${name}
    namespace: default
current-context: ${name}
`;
}

/** The context (and cluster and user) kube-sim writes: `kube-sim`, or `kube-sim-NAME` for `sim serve --name NAME`. */
export function contextName(name?: string): string {
  return name ? `kube-sim-${name}` : 'kube-sim';
}

/** Whether a context is one kube-sim wrote (sim serve --name, sim kubeconfig --merge). */
export function isKubeSimContext(name: string): boolean {
  return name === 'kube-sim' || name.startsWith('kube-sim-');
}

/** The kubeconfig files kubectl reads, in its order: $KUBECONFIG's list, else ~/.kube/config. */
export function kubeconfigFiles(env: NodeJS.ProcessEnv = process.env): string[] {
  const list = (env.KUBECONFIG ?? '').split(delimiter).filter((f) => f !== '');
  return list.length > 0 ? list : [join(env.HOME ?? homedir(), '.kube', 'config')];
}

/**
 * The file new entries go to, as kubectl (clientcmd's default filename) and kind choose it: the only file, else
 * the first of $KUBECONFIG's list that exists, else its last.
 */
export function kubeconfigFileForMerge(env: NodeJS.ProcessEnv = process.env): string {
  const files = kubeconfigFiles(env);
  return files.length === 1 ? files[0]! : (files.find((f) => existsSync(f)) ?? files[files.length - 1]!);
}

export interface MergeResult {
  file: string;
  context: string;
  /** The current context before, if there was one and it was another. */
  previous?: string;
  switched: boolean;
}

/**
 * Adds (or replaces) the cluster, user and context `name` in a kubeconfig file, as `kind create cluster` does,
 * keeping everything else in it; makes it the current context when `switchContext`. The file is written whole
 * to a temporary file and renamed over the old one (mode 0600), so a crash never leaves half a kubeconfig.
 */
export function mergeKubeconfig(
  file: string,
  name: string,
  connection: Connection,
  switchContext: boolean,
): MergeResult {
  let config: Obj = {};
  if (existsSync(file)) {
    let parsed: unknown;
    try {
      parsed = yaml().parse(readFileSync(file, 'utf8'));
    } catch (err) {
      throw new Error(`kubeconfig ${file}: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (parsed !== null && parsed !== undefined && !isPlainObject(parsed))
      throw new Error(`kubeconfig ${file}: not a kubeconfig`);
    config = (parsed as Obj | null) ?? {};
  }
  const ours = yaml().parse(kubeconfigYaml(connection, name)) as Obj;
  const out: Obj = { apiVersion: 'v1', kind: 'Config', ...config };
  for (const list of ['clusters', 'users', 'contexts']) {
    const kept = (Array.isArray(config[list]) ? (config[list] as unknown[]) : []).filter(
      (e) => !(isPlainObject(e) && e.name === name),
    );
    out[list] = [...kept, ...(ours[list] as unknown[])];
  }
  const before = text(config['current-context']);
  if (switchContext || before === undefined) out['current-context'] = name;
  makeDirectories(dirname(resolve(file)));
  const temporary = `${file}.kube-sim-${process.pid}.tmp`;
  writeFileSync(temporary, yaml().stringify(out), { mode: 0o600 });
  renameSync(temporary, file);
  const result: MergeResult = { file, context: name, switched: out['current-context'] === name && before !== name };
  if (before !== undefined && before !== name) result.previous = before;
  return result;
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
  return readKubeconfigFiles([file], undefined, true)!.connection;
}

/**
 * The server and credentials of a context (the current one unless named) of the kubeconfig files kubectl would
 * merge: the first file that sets current-context decides it, the first that defines an entry defines it, and
 * relative paths are relative to that file. Undefined when no file exists or none sets a current context
 * (kubectl's "no configuration"); with `required`, a missing file is an error too.
 */
export function readKubeconfigFiles(
  files: readonly string[],
  wanted?: string,
  required = false,
): { connection: Connection; context: string; file: string } | undefined {
  const loaded: Array<{ file: string; config: Obj }> = [];
  for (const file of files) {
    if (!required && !existsSync(file)) continue;
    let config: unknown;
    try {
      config = yaml().parse(readFileSync(file, 'utf8'));
    } catch (err) {
      throw new Error(`kubeconfig ${file}: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (config === null && !required) continue;
    if (!isPlainObject(config)) throw new Error(`kubeconfig ${file}: not a kubeconfig`);
    loaded.push({ file, config });
  }
  const where = files.length === 1 ? `kubeconfig ${files[0]}` : `kubeconfig ${files.join(delimiter)}`;
  const contextName = wanted ?? loaded.map((l) => text(l.config['current-context'])).find((c) => c !== undefined);
  if (!contextName) {
    if (required) throw new Error(`${where}: current-context is not set`);
    return undefined;
  }
  const find = (list: string, name: string): { entry: Obj; file: string } | undefined => {
    for (const { file, config } of loaded) {
      const entry = named(config, list, name);
      if (entry) return { entry, file };
    }
    return undefined;
  };
  const context = find('contexts', contextName)?.entry;
  if (!context) throw new Error(`${where}: context "${contextName}" does not exist`);
  const clusterName = text(context.cluster) ?? '';
  const found = find('clusters', clusterName);
  const cluster = found?.entry;
  const server = cluster && text(cluster.server);
  if (!server) throw new Error(`${where}: cluster "${clusterName}" of context "${contextName}" has no server`);
  const relative = (file: string, path: string): string => resolve(dirname(file), path);
  const connection: Connection = { server };
  const caData = text(cluster['certificate-authority-data']);
  const caFile = text(cluster['certificate-authority']);
  if (caData) connection.caCert = Buffer.from(caData, 'base64').toString('utf8');
  else if (caFile) connection.caCert = readFileSync(relative(found.file, caFile), 'utf8');
  if (cluster['insecure-skip-tls-verify'] === true) connection.insecureSkipTlsVerify = true;
  const userFound = find('users', text(context.user) ?? '');
  const user = userFound?.entry;
  const token =
    user &&
    (text(user.token) ??
      (text(user.tokenFile)
        ? readFileSync(relative(userFound.file, text(user.tokenFile)!), 'utf8').trim()
        : undefined));
  if (token) connection.token = token;
  if (user && userFound) {
    const pem = (dataKey: string, fileKey: string): string | undefined => {
      const data = text(user[dataKey]);
      if (data) return Buffer.from(data, 'base64').toString('utf8');
      const path = text(user[fileKey]);
      return path ? readFileSync(relative(userFound.file, path), 'utf8') : undefined;
    };
    const cert = pem('client-certificate-data', 'client-certificate');
    const key = pem('client-key-data', 'client-key');
    if (cert && key) {
      connection.clientCert = cert;
      connection.clientKey = key;
    }
  }
  return { connection, context: contextName, file: found.file };
}
