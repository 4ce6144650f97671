import { createHash } from 'node:crypto';
import type { KubeObject } from '../api/types.js';
import type { AttachTarget, ExecInput, LogSource, PortForwardTarget } from '../api/kubelet-connector.js';
import type { HttpApps } from './http-app.js';

/**
 * The container runtime's side of attach and port-forward for a simulated pod. A simulated container's main
 * process is its log: attaching streams the lines it writes from then on, until it exits. A forwarded connection
 * reaches the simulated app of a port a Ready container declares (http-app.ts); any other is refused, with the
 * message containerd gives for a port nobody listens on.
 */

/** Attaches to the container instance whose log is `source`. */
export function attachToLog(source: LogSource): AttachTarget {
  return {
    run: (io) =>
      new Promise<void>((resolve) => {
        const follow = source.follow;
        if (!follow) return resolve();
        // A terminal turns each newline into CR LF (onlcr).
        const newline = io.tty ? '\r\n' : '\n';
        let stop: (() => void) | undefined;
        const done = (): void => {
          stop?.();
          resolve();
        };
        stop = follow((line) => io.stdout(`${line.text}${newline}`), done);
        void io.closed.then(done);
        // The simulated process reads no input: what the client types is taken and dropped, so that unread stdin
        // never holds the connection back.
        void drain(io.stdin);
      }),
  };
}

async function drain(input: ExecInput | undefined): Promise<void> {
  if (!input) return;
  for (let chunk = await input.read(); chunk !== undefined; chunk = await input.read()) {
    // dropped
  }
}

/** The pod sandbox's id (64 hex digits, as containerd's), derived from the pod's uid. */
function sandboxId(pod: KubeObject): string {
  return createHash('sha256')
    .update(`sandbox/${pod.metadata.uid ?? ''}`)
    .digest('hex');
}

/** The pod's network namespace, where containerd connects forwarded connections to localhost:PORT. */
export function portForwardInto(pod: KubeObject, apps: HttpApps): PortForwardTarget {
  const sandbox = sandboxId(pod);
  const h = createHash('sha256')
    .update(`netns/${pod.metadata.uid ?? ''}`)
    .digest('hex');
  const netns = `/var/run/netns/cni-${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
  return {
    forward: (port, stream) =>
      apps.serve(pod, port, stream) ??
      Promise.reject(
        new Error(
          `error forwarding port ${port} to pod ${sandbox}, uid : failed to execute portforward in network namespace "${netns}": failed to connect to localhost:${port} inside namespace "${sandbox}", IPv4: dial tcp4 127.0.0.1:${port}: connect: connection refused IPv6 dial tcp6 [::1]:${port}: connect: connection refused `,
        ),
      ),
  };
}
