import type { WebSocket, RawData } from 'ws';
import type { ExecStreams } from '../api/kubelet-connector.js';
import { wallClock } from '../clock/clock.js';
import { guardWebSocket } from './connections.js';
import { ExecInputQueue } from './exec-input.js';
import type { SpdyConnection, SpdyStream } from './spdy.js';

/**
 * One exec or attach session (kubelet's remotecommand), whatever carries it: the session turns the client's stdin,
 * resizes and hang-up into the container process's streams, and its output and exit into what the client reads.
 * Two transports carry it, with the same behaviour: WebSocket channels (v5/v4.channel.k8s.io, kubectl 1.30+) and
 * SPDY streams (v4 … v1 of channel.k8s.io, kubectl 1.27-1.29 and every client-go tool built before 1.30).
 */

/** PodExecOptions / PodAttachOptions' streams. */
export interface StreamOptions {
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  tty: boolean;
}

/** A metav1.Status, as the error channel carries it. */
export type SessionStatus = Record<string, unknown>;

/** What runs in the container (an exec'd command, or the attached main process) and the Status its end makes. */
export interface ContainerProcess {
  run(streams: ExecStreams): Promise<number>;
  status(exitCode: number): SessionStatus;
  /** The Status of a process that could not run: kubelet's `Internal error occurred: error executing …`. */
  failure(error: unknown): SessionStatus;
}

/** A transport's side: where output goes (a promise: wait before writing more) and how the end is told. */
export interface SessionOutput {
  stdout(data: Uint8Array): void | Promise<void>;
  stderr(data: Uint8Array): void | Promise<void>;
  /** The process is over: send its Status and close. */
  end(status: SessionStatus): void;
}

/** How the session slows the transport's stdin down while the process is behind reading it. */
export interface InputFlow {
  pause(): void;
  resume(): void;
}

/** apierrors.NewInternalError, as kubelet writes it on the error channel. */
export function internalErrorStatus(message: string): SessionStatus {
  return {
    metadata: {},
    status: 'Failure',
    message: `Internal error occurred: ${message}`,
    reason: 'InternalError',
    details: { causes: [{ message }] },
    code: 500,
  };
}

export class CommandSession {
  private readonly input?: ExecInputQueue;
  private onHangup!: () => void;
  private readonly hungUp = new Promise<void>((resolve) => (this.onHangup = resolve));
  private over = false;

  constructor(
    private readonly options: StreamOptions,
    private readonly output: SessionOutput,
    flow?: InputFlow,
  ) {
    if (options.stdin) this.input = new ExecInputQueue(flow);
  }

  /** Bytes of the client's stdin. */
  stdin(chunk: Uint8Array): void {
    this.input?.push(chunk);
  }

  /** The client closed its stdin (SPDY: FIN on the stdin stream; WebSocket v5: the 0xff 0x00 close signal). */
  stdinEnd(): void {
    this.input?.end();
  }

  /** A terminal resize. The simulated processes draw nothing that depends on the size, so it is only read. */
  resize(_size: object): void {}

  /** The client went away: the process is told (a `sleep` stops) and nothing more is sent. */
  hangup(): void {
    this.over = true;
    this.input?.end();
    this.onHangup();
  }

  /** Runs the process to its end and tells the transport; resolves when that is done. */
  async run(process: ContainerProcess): Promise<void> {
    const tty = this.options.tty;
    const write =
      (send: (data: Uint8Array) => void | Promise<void>) =>
      (data: string | Uint8Array): void | Promise<void> => {
        if (this.over || data.length === 0) return;
        return send(typeof data === 'string' ? Buffer.from(data) : data);
      };
    let status: SessionStatus;
    try {
      const code = await process.run({
        stdout: write((d) => this.output.stdout(d)),
        // A terminal has one output stream.
        stderr: write((d) => (tty ? this.output.stdout(d) : this.output.stderr(d))),
        tty,
        ...(this.input ? { stdin: this.input } : {}),
        closed: this.hungUp,
      });
      status = process.status(code);
    } catch (err) {
      status = process.failure(err);
    }
    if (this.over) return;
    this.over = true;
    this.output.end(status);
  }
}

// ---------------------------------------------------------------------------------------------------
// WebSocket: one binary message per chunk, its first byte the channel

export const WEBSOCKET_PROTOCOLS = ['v5.channel.k8s.io', 'v4.channel.k8s.io'];

enum Channel {
  Stdin = 0,
  Stdout = 1,
  Stderr = 2,
  Error = 3,
  Resize = 4,
  /** v5: a control message; `0xff 0x00` says the client closed its stdin. */
  Close = 255,
}

/** Serves a session over an accepted WebSocket (subprotocol v5.channel.k8s.io or v4.channel.k8s.io). */
export function serveOverWebSocket(ws: WebSocket, options: StreamOptions, process: ContainerProcess): Promise<void> {
  const v5 = ws.protocol === 'v5.channel.k8s.io';
  /** Sends one frame; past a megabyte not yet sent, the promise holds the writer until the client reads. */
  const frame = (channel: Channel, data: Uint8Array): void | Promise<void> => {
    if (ws.readyState !== ws.OPEN) return;
    const payload = Buffer.concat([Buffer.from([channel]), data]);
    if (ws.bufferedAmount < 1024 * 1024) return ws.send(payload);
    return new Promise<void>((resolve) => ws.send(payload, () => resolve()));
  };
  const session = new CommandSession(
    options,
    {
      stdout: (data) => frame(Channel.Stdout, data),
      stderr: (data) => frame(Channel.Stderr, data),
      end: (status) => {
        void frame(Channel.Error, Buffer.from(JSON.stringify(status)));
        if (ws.readyState === ws.OPEN) ws.close(1000);
      },
    },
    { pause: () => ws.pause(), resume: () => ws.resume() },
  );
  guardWebSocket(ws).on('close', () => session.hangup());
  ws.on('message', (data: RawData) => {
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    if (buf.length === 0) return;
    const channel = buf[0]!;
    if (channel === Channel.Stdin) session.stdin(buf.subarray(1));
    else if (channel === Channel.Resize) resizes(session, buf.subarray(1));
    else if (channel === Channel.Close && v5 && buf[1] === Channel.Stdin) session.stdinEnd();
  });
  // client-go's WebSocket executor before its readyChan fix (kubectl 1.30-1.32 at least) starts reading before it has
  // made its streams and drops what arrives for a stream not made yet ("Unknown stream id 1, discarding message",
  // then "closed all streams"): output sent right behind the 101 can be lost. On a real cluster the API server's hop
  // to the kubelet gives the client that moment; here the process starts a moment later.
  return new Promise<void>((resolve) => wallClock.setTimer(STREAM_SETUP_MS, resolve)).then(() => session.run(process));
}

/** How long a WebSocket session waits before its process starts (a round trip to a kubelet, on a real cluster). */
const STREAM_SETUP_MS = 10;

/** Writes to a stream; when the socket is behind, the promise holds the writer until it drains. */
function send(stream: SpdyStream | undefined, data: Uint8Array): void | Promise<void> {
  if (!stream || stream.destroyed || stream.write(data)) return;
  return new Promise<void>((resolve) => {
    const done = (): void => {
      stream.off('drain', done);
      stream.off('close', done);
      resolve();
    };
    stream.on('drain', done);
    stream.on('close', done);
  });
}

/** Resize messages: JSON TerminalSize objects, one after another (Go's json.Decoder reads them as a stream). */
function resizes(session: CommandSession, data: Buffer): void {
  for (const text of data.toString('utf8').split(/(?<=\})\s*(?=\{)/)) {
    try {
      const size: unknown = JSON.parse(text);
      if (typeof size === 'object' && size !== null) session.resize(size);
    } catch {
      // kubelet's decoder stops at the first malformed size; the session goes on without resizes.
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// SPDY: one stream per standard stream, told apart by the streamType header

/** The protocols kubelet's remotecommand server speaks over SPDY, newest first (remotecommand's SupportedStreamingProtocols). */
export const SPDY_PROTOCOLS = ['v4.channel.k8s.io', 'v3.channel.k8s.io', 'v2.channel.k8s.io', 'channel.k8s.io'];

/** How long the client has to open every stream it asked for (kubelet's DefaultStreamCreationTimeout). */
const STREAM_CREATION_TIMEOUT_MS = 30_000;

type StreamType = 'error' | 'stdin' | 'stdout' | 'stderr' | 'resize';

/**
 * Serves a session over a SPDY connection once the client has opened its streams: error, then stdin, stdout, stderr
 * and (with a terminal, v3 and later) resize, as asked for. The error stream carries the Status as JSON (v4) or, on
 * failure only, its message (v1-v3). The end is kubelet's: the Status, then every stream reset and GOAWAY.
 */
export function serveOverSpdy(
  accept: (handler: (stream: SpdyStream) => 'accept' | 'refuse') => SpdyConnection,
  protocol: string,
  requested: StreamOptions,
  process: ContainerProcess,
): void {
  // kubelet's NewOptions: a terminal has no separate stderr.
  const options = { ...requested, stderr: requested.stderr && !requested.tty };
  const resizable = options.tty && protocol !== 'v2.channel.k8s.io' && protocol !== 'channel.k8s.io';
  const expected = 1 + Number(options.stdin) + Number(options.stdout) + Number(options.stderr) + Number(resizable);
  const streams = new Map<StreamType, SpdyStream>();
  let received = 0;
  let started = false;
  const connection = accept((stream) => {
    const type = stream.header('streamtype');
    if (type === 'error' || type === 'stdin' || type === 'stdout' || type === 'stderr' || type === 'resize') {
      streams.set(type, stream);
      received++;
    }
    // kubelet counts every stream it replies to and starts once it has as many as the options ask for.
    if (!started && received >= expected) {
      started = true;
      timer.cancel();
      queueMicrotask(start);
    }
    return 'accept';
  });
  const timer = wallClock.setTimer(STREAM_CREATION_TIMEOUT_MS, () => {
    if (!started) connection.destroy();
  });
  connection.onClose(() => timer.cancel());

  const start = (): void => {
    if (connection.closed) return;
    const errorStream = streams.get('error');
    const stdin = streams.get('stdin');
    const session = new CommandSession(
      options,
      {
        stdout: (data) => send(streams.get('stdout'), data),
        stderr: (data) => send(streams.get('stderr'), data),
        end: (status) => {
          if (errorStream) {
            if (protocol === 'v4.channel.k8s.io') errorStream.write(JSON.stringify(status));
            else if (status.status !== 'Success') errorStream.write(String(status.message ?? ''));
          }
          // The writes above are queued on the socket before the resets close every stream.
          connection.close();
        },
      },
      // A paused stream holds its DATA; once it is full the connection stops reading the socket.
      stdin && { pause: () => stdin.pause(), resume: () => stdin.resume() },
    );
    connection.onClose(() => session.hangup());
    if (stdin) {
      stdin.on('data', (chunk: Buffer) => session.stdin(chunk));
      stdin.on('end', () => session.stdinEnd());
    }
    streams.get('resize')?.on('data', (chunk: Buffer) => resizes(session, chunk));
    void session.run(process);
  };
}
