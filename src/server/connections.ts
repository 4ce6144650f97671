import { STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import { wallClock } from '../clock/clock.js';

/**
 * Sockets at the edges of HTTP, where Node leaves their errors to us. Node's HTTP server guards a connection while it
 * parses and answers requests, but hands an upgrade's socket over with no 'error' listener at all: a client that
 * resets it (the Python client's websocket library closes without reading a refusal) raised an uncaught
 * ECONNRESET and took the process down. Every socket an upgrade hands over is guarded here from its first moment,
 * every WebSocket gets a listener for the protocol errors ws reports, and malformed or slow requests get Go's answers.
 */

/** Go's net/http StatusText where it differs from Node's (kube-apiserver writes Go's). */
const GO_STATUS_TEXT: Record<number, string> = {
  413: 'Request Entity Too Large',
  414: 'Request URI Too Long',
  416: 'Requested Range Not Satisfiable',
};

/** The reason phrase of a status line, as Go writes it: `404 Not Found`, `422 Unprocessable Entity`. */
export function statusText(code: number): string {
  return GO_STATUS_TEXT[code] ?? STATUS_CODES[code] ?? '';
}

/** kube-apiserver's ReadHeaderTimeout (32 s, "just shy of requestTimeoutUpperBound"): slow headers are cut off. */
export const READ_HEADER_TIMEOUT_MS = 32_000;
/** How long a refused upgrade's client has to read the answer and close before its connection is dropped. */
const LINGER_MS = 10_000;

const guarded = new WeakSet<Duplex>();

/** From now on an error on this socket (a reset, a broken pipe, a TLS alert) destroys it instead of the process. */
export function guardSocket(socket: Duplex): void {
  if (guarded.has(socket)) return;
  guarded.add(socket);
  socket.on('error', () => socket.destroy());
}

/**
 * Ends a connection after its answer without resetting it under the client: what the client still sends is read
 * and dropped (closing a socket with unread input makes the kernel send RST, and the client may lose the answer);
 * a client that neither reads nor closes is dropped after LINGER_MS.
 */
function endGracefully(socket: Duplex, answer: string): void {
  if (socket.destroyed) return;
  socket.resume();
  socket.end(answer);
  const timer = wallClock.setTimer(LINGER_MS, () => socket.destroy());
  socket.once('close', () => timer.cancel());
}

/** Answers an upgrade request with an HTTP error instead of switching protocols, and closes the connection. */
export function rejectUpgrade(socket: Duplex, code: number, contentType: string, body: string): void {
  endGracefully(
    socket,
    `HTTP/1.1 ${code} ${statusText(code)}\r\ncontent-type: ${contentType}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

/**
 * Routes the server's upgrade requests to `handler` with the socket already guarded. A handler that throws (a bug:
 * handlers answer their own errors) gets a plain 500 on the socket, never an uncaught exception.
 */
export function onUpgrade(server: Server, handler: UpgradeHandler, log?: (line: string) => void): void {
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    guardSocket(socket);
    try {
      handler(req, socket, head);
    } catch (err) {
      log?.(`internal error in an upgrade: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      rejectUpgrade(socket, 500, 'text/plain; charset=utf-8', 'Internal Server Error');
    }
  });
}

/**
 * An accepted WebSocket: ws emits 'error' for what a client gets wrong in the protocol (an unmasked or oversized
 * frame, invalid UTF-8 in a text frame), after it has sent the close frame; without a listener that is an uncaught
 * exception. The connection is dropped; the 'close' that follows ends whatever it served.
 */
export function guardWebSocket(ws: WebSocket): WebSocket {
  ws.on('error', () => ws.terminate());
  return ws;
}

/**
 * What Go's net/http writes when it cannot read a request (server.go, conn.serve): `431 Request Header Fields Too
 * Large` or `400 Bad Request` as text, and the connection closed. A header timeout closes without an answer, as
 * Go's ReadHeaderTimeout does; a reset has no one to answer.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  guardSocket(socket);
  if (err.code === 'ECONNRESET' || err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || !socket.writable) {
    socket.destroy();
    return;
  }
  const publicError = err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request';
  endGracefully(
    socket,
    `HTTP/1.1 ${publicError}\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n${publicError}`,
  );
}

/** Bounds a server's connections as kube-apiserver bounds its own: headers must arrive within READ_HEADER_TIMEOUT_MS. */
export function limitSlowClients(server: Server): void {
  server.headersTimeout = READ_HEADER_TIMEOUT_MS;
}
