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
  /** Stops a node's kubelet (no heartbeats, its pods stop progressing); false when there is no such node. */
  failNode(name: string): boolean;
  /** Restarts a stopped kubelet; false when there is no such node. */
  recoverNode(name: string): boolean;
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
  stdout(text: string): void;
  stderr(text: string): void;
  /** Standard input, when the client sent stdin=true; resolves to the text read until the client closed it. */
  readStdin?(): Promise<string>;
  /** With a terminal (tty=true): each chunk of keystrokes as it arrives. */
  onStdin?(listener: (chunk: string) => void): void;
  /** The client asked for a terminal: one output stream, keystrokes in raw mode. */
  tty?: boolean;
  /** Resolves when the client goes away, so long-running commands (sleep) can stop. */
  closed: Promise<void>;
}

export interface ExecTarget {
  run(command: string[], streams: ExecStreams): Promise<number>;
}
