import type { Duplex } from 'node:stream';
import type { KubeObject } from './types.js';

/**
 * What the API server asks of a node's kubelet, as kube-apiserver proxies pods/log and pods/exec to port
 * 10250: the server checks the request against the pod (container names, a node assigned), the kubelet
 * answers from the container's own state. Methods throw an ApiError carrying the Status to send.
 */
export interface KubeletConnector {
  /** The lines of one container instance (the current one, or the previous with `previous`). */
  logs(pod: KubeObject, container: string, previous: boolean): LogSource;
  /** Checks the container can be exec'd into now and returns the process to run. */
  exec(pod: KubeObject, container: string): ExecTarget;
  /** Checks the container is running and returns a way onto its main process's streams. */
  attach(pod: KubeObject, container: string): AttachTarget;
  /** Checks the pod's sandbox runs and returns a way into its network namespace. */
  portForward(pod: KubeObject): PortForwardTarget;
  /**
   * A TCP connection to the pod's IP and port, as the API server's pods and services proxy dials it; rejects with
   * the dial's error (`dial tcp 10.244.0.5:81: connect: connection refused`) when nothing listens there.
   */
  dial(pod: KubeObject, port: number): Promise<Duplex>;
  /** Whether the node's kubelet runs in this process (else, with etcd, maybe in another: kubeletEndpointOf). */
  runs(node: string): boolean;
  /** The nodes whose kubelets run here, each with whether it is failed (for GET /sim/v1/nodes). */
  kubelets(): Array<{ node: string; failed: boolean }>;
  /** Stops a node's kubelet (no heartbeats, its pods stop progressing); false when there is no such node. */
  failNode(name: string): boolean;
  /** Restarts a stopped kubelet; false when there is no such node. */
  recoverNode(name: string): boolean;
}

/**
 * Where a node's kubelet serves its API when it runs in another process (sim serve over etcd): the host is this
 * annotation, which the kubelet sets to its process's address (a simulated node's InternalIP is no address of this
 * machine), and the port is status.daemonEndpoints.kubeletEndpoint.Port, as kube-apiserver reads it.
 */
export const KUBELET_ADDRESS_ANNOTATION = 'kube-sim.dev/kubelet-address';

export interface KubeletEndpoint {
  host: string;
  port: number;
  /** HTTPS (the serving certificate signed by the cluster CA) rather than HTTP. */
  tls?: boolean;
}

/** The endpoint a Node's kubelet publishes for API servers in other processes, if it publishes one. */
export function kubeletEndpointOf(node: KubeObject | undefined): KubeletEndpoint | undefined {
  const host = node?.metadata.annotations?.[KUBELET_ADDRESS_ANNOTATION];
  const status = node?.status as { daemonEndpoints?: { kubeletEndpoint?: { Port?: unknown } } } | undefined;
  const port = status?.daemonEndpoints?.kubeletEndpoint?.Port;
  if (!host || typeof port !== 'number' || !Number.isInteger(port) || port <= 0 || port > 65535) return undefined;
  return { host, port };
}

export interface LogLine {
  /** Cluster time the line was written (ms since the epoch). */
  at: number;
  text: string;
}

export interface LogSource {
  /** Every line of the instance so far, oldest first. */
  lines(): LogLine[];
  /**
   * Delivers further lines as they are written and calls `end` once the container instance has exited (or the
   * pod is gone). Undefined when the instance has already ended. Returns a function that unsubscribes.
   */
  follow?(onLine: (line: LogLine) => void, end: () => void): () => void;
}

/** The process side of an exec: bytes in and out, and the exit code when it is done. */
export interface ExecStreams {
  /** Output; a returned promise asks the process to wait before writing more (the client reads slowly). */
  stdout(data: string | Uint8Array): void | Promise<void>;
  stderr(data: string | Uint8Array): void | Promise<void>;
  /** Standard input when the client sent stdin=true: chunks as they arrive, until the client closes it. */
  stdin?: ExecInput;
  /** The client asked for a terminal: one output stream, keystrokes in raw mode. */
  tty?: boolean;
  /** Resolves when the client goes away, so long-running commands (sleep) can stop. */
  closed: Promise<void>;
}

/** An exec's standard input as the client sends it. */
export interface ExecInput {
  /**
   * The next chunk, waiting for one; undefined once the client has closed its stdin (v5.channel.k8s.io's close
   * signal, SPDY's half-close) or gone away. Over v4.channel.k8s.io stdin ends only with the connection.
   */
  read(): Promise<Uint8Array | undefined>;
}

export interface ExecTarget {
  run(command: string[], streams: ExecStreams): Promise<number>;
}

export interface AttachTarget {
  /** Streams the process's output from now on; resolves when it exits or the client goes away. */
  run(streams: ExecStreams): Promise<void>;
}

export interface PortForwardTarget {
  /**
   * Connects `stream` to `port` inside the pod; resolves when that connection is over, rejects with kubelet's message
   * (`error forwarding port 80 to pod …`) when it cannot be made.
   */
  forward(port: number, stream: Duplex): Promise<void>;
}
