import { readFileSync } from 'node:fs';
import {
  isKubeSimContext,
  kubeconfigFiles,
  readKubeconfig,
  readKubeconfigFiles,
  type Connection,
} from '../client/kubeconfig.js';

/** The flags every command that talks to a running server takes. */
export interface RemoteFlags {
  server?: string;
  kubeconfig?: string;
  context?: string;
  token?: string;
  certificateAuthority?: string;
  insecureSkipTlsVerify?: boolean;
}

export interface FoundServer {
  connection: Connection;
  /** Where it came from, for messages: "--server", "context kube-sim-dev of /home/me/.kube/config". */
  from: string;
}

/** sim serve's default address, which is also where kubectl looks when it has no kubeconfig. */
export const DEFAULT_SERVER = 'http://127.0.0.1:8080';

/**
 * The server to talk to and its credentials, as kubectl puts them together, the flags over what a kubeconfig says:
 * --server; else --kubeconfig FILE's current context (or --context); else, when `defaults` allows, the kubeconfig
 * kubectl reads ($KUBECONFIG, ~/.kube/config), but only a context kube-sim wrote (kube-sim, kube-sim-NAME) unless
 * --context names another: a command that changes the cluster must not land on the cluster the user last used.
 * With no kubeconfig at all, sim serve's default address. Undefined (no defaults, nothing given): none.
 */
export function findServer(flags: RemoteFlags, defaults: boolean, env = process.env): FoundServer | undefined {
  let found: FoundServer | undefined;
  if (flags.kubeconfig !== undefined) {
    if (flags.context !== undefined) {
      const read = readKubeconfigFiles([flags.kubeconfig], flags.context, true)!;
      found = { connection: read.connection, from: `context ${read.context} of ${flags.kubeconfig}` };
    } else found = { connection: readKubeconfig(flags.kubeconfig), from: flags.kubeconfig };
  } else if (defaults && flags.server === undefined) {
    const files = kubeconfigFiles(env);
    const read = readKubeconfigFiles(files, flags.context);
    if (read && flags.context === undefined && !isKubeSimContext(read.context))
      throw new Error(
        `the current context "${read.context}" (${read.file}) is not a kube-sim one: give --server URL, --context NAME or --kubeconfig FILE (sim serve --name NAME makes a context kube-sim-NAME)`,
      );
    found = read
      ? { connection: read.connection, from: `context ${read.context} of ${read.file}` }
      : {
          connection: { server: DEFAULT_SERVER },
          from: `sim serve's default address (no kubeconfig at ${files.join(', ')})`,
        };
  }
  if (flags.server !== undefined)
    found = { connection: { ...found?.connection, server: flags.server }, from: '--server' };
  if (!found) {
    if (flags.token !== undefined || flags.certificateAuthority !== undefined || flags.insecureSkipTlsVerify)
      throw new Error('--token, --certificate-authority and --insecure-skip-tls-verify need --server or --kubeconfig');
    return undefined;
  }
  if (flags.token !== undefined) found.connection.token = flags.token;
  if (flags.certificateAuthority !== undefined)
    found.connection.caCert = readFileSync(flags.certificateAuthority, 'utf8');
  if (flags.insecureSkipTlsVerify) found.connection.insecureSkipTlsVerify = true;
  return found;
}
