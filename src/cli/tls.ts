import { existsSync, statSync } from 'node:fs';
import { isIP, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Server as TlsServer } from 'node:tls';
import { wallClock } from '../clock/clock.js';
import { ClusterCertificateAuthority, type CaPem } from '../cluster/certificate-authority.js';
import { issueServingCertificate, type Issuer } from '../api/x509.js';

/** PEM texts for `sim serve --tls`: the CA clients trust, and the server's certificate (signed by it) and key. */
export interface ServingTls {
  caCert: string;
  /** The CA's key: the cluster CA signs certificate signing requests with it. */
  caKey: string;
  cert: string;
  key: string;
  /** Where the CA is kept (under --data), or undefined when it lives only as long as the process. */
  caDir?: string;
}

const DAY_MS = 24 * 3600 * 1000;

/** A serving certificate for 127.0.0.1, ::1, localhost, kubernetes.default.svc and the bind address, signed by the CA. */
function createServingCert(issuer: Issuer, host: string): { cert: string; key: string } {
  const ips = new Set(['127.0.0.1', '::1']);
  const dns = new Set(['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc']);
  if (host !== '' && host !== '0.0.0.0' && host !== '::') (isIP(host) ? ips : dns).add(host);
  const now = wallClock.now();
  // An hour of slack for clients whose clock is a little behind.
  return issueServingCertificate(
    issuer,
    'kube-apiserver',
    { dns, ips },
    {
      notBefore: now - 3600 * 1000,
      notAfter: now + 365 * DAY_MS,
    },
  );
}

/** Where --data keeps the CA: PATH/tls for a data directory, PATH.tls beside a snapshot file. */
export function tlsDir(dataPath: string): string {
  const isFile = existsSync(dataPath) ? statSync(dataPath).isFile() : dataPath.endsWith('.json');
  return isFile ? `${dataPath}.tls` : join(dataPath, 'tls');
}

/**
 * The CA and a fresh serving certificate for `sim serve --tls`. With --data the CA is kept (ca.crt, ca.key with
 * mode 0600) so that kubeconfigs written earlier stay valid across restarts, and it is the cluster CA a plain
 * `sim serve --data` made before, if it made one; without --data the CA is new every start. The serving certificate
 * is made anew each start, so a changed --host is always in it. `given`: the CA to sign it with (etcd's, shared by
 * every API server of the cluster).
 */
export function servingTls(host: string, dataPath?: string, given?: CaPem): ServingTls {
  const caDir = dataPath !== undefined ? tlsDir(dataPath) : undefined;
  const ca = new ClusterCertificateAuthority(given ? { pem: given } : caDir !== undefined ? { dir: caDir } : {}).load();
  const notAfter = Date.parse(ca.cert.validTo);
  if (caDir !== undefined && notAfter < wallClock.now() + DAY_MS)
    throw new Error(
      `the CA in ${join(caDir, 'ca.crt')} expires on ${new Date(notAfter).toISOString()}: remove ${caDir} to have a new one made`,
    );
  const serving = createServingCert(ca.issuer, host);
  return { caCert: ca.pem.cert, caKey: ca.pem.key, cert: serving.cert, key: serving.key, caDir };
}

/** What Go's net/http answers on a TLS port when the first bytes look like plain HTTP (server.go, conn.serve). */
export const PLAIN_HTTP_ANSWER = 'HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n';
/** net/http's tlsRecordHeaderLooksLikeHTTP: only these five-byte starts count (DELETE, PATCH … just fail TLS). */
const HTTP_STARTS = new Set(['GET /', 'HEAD ', 'POST ', 'PUT /', 'OPTIO']);
const TLS_HANDSHAKE = 0x16;
const RECORD_HEADER_BYTES = 5;

/**
 * Makes an HTTPS server answer a plain HTTP request as kube-apiserver (Go) does, with a 400 and
 * "Client sent an HTTP request to an HTTPS server.", instead of dropping the connection. Each connection's first
 * bytes are looked at before TLS sees them: a TLS handshake (first byte 0x16, every real client) goes straight on
 * to the server's own TLS listener with the bytes put back; so do other non-HTTP starts, which then fail TLS as
 * before. A connection that sends nothing for `idleMs` (Node's TLS handshake timeout) is dropped by one shared
 * sweep rather than a timer per connection. `destroyPending` drops the ones still being looked at, and any accepted
 * after it while the listener closes (a closing server waits for every open connection).
 */
export function answerPlainHttp(server: TlsServer, idleMs = 120_000): { destroyPending(): void } {
  const tlsListeners = server.listeners('connection') as Array<(this: TlsServer, socket: Socket) => void>;
  server.removeAllListeners('connection');
  // Connections not yet handed to TLS (or answered and not yet closed), with when they arrived.
  const pending = new Map<Socket, number>();
  let closing = false;
  let sweeping = false;
  const sweep = (): void => {
    const cutoff = wallClock.now() - idleMs;
    for (const [socket, since] of pending) {
      if (socket.destroyed) pending.delete(socket);
      else if (since <= cutoff) socket.destroy();
    }
    sweeping = pending.size > 0;
    if (sweeping) wallClock.setTimer(idleMs / 4, sweep);
  };
  // Kept to the least per connection: paused-mode reads ('readable', then one read()) and no listeners left behind
  // on a TLS connection cost measurably less than a 'data' listener and pause().
  server.on('connection', (socket: Socket) => {
    if (closing) return void socket.destroy();
    pending.set(socket, wallClock.now());
    if (!sweeping) {
      sweeping = true;
      wallClock.setTimer(idleMs / 4, sweep);
    }
    // A reset while we look must not become an uncaught error (nothing else listens on the raw socket yet).
    const onError = (): void => void socket.destroy();
    socket.on('error', onError);
    let head: Buffer | undefined;
    const onReadable = (): void => {
      const chunk = socket.read() as Buffer | null;
      if (chunk === null) return;
      head = head ? Buffer.concat([head, chunk]) : chunk;
      if (head[0] !== TLS_HANDSHAKE && head.length < RECORD_HEADER_BYTES) return;
      socket.removeListener('readable', onReadable);
      if (head[0] !== TLS_HANDSHAKE && HTTP_STARTS.has(head.toString('latin1', 0, RECORD_HEADER_BYTES))) {
        // Read and drop the rest of the request, so that closing does not reset the connection under the answer.
        socket.end(PLAIN_HTTP_ANSWER);
        socket.resume();
        return;
      }
      pending.delete(socket);
      socket.removeListener('error', onError);
      // TLSSocket reads what the raw socket has buffered before it reads on (tls initRead).
      socket.unshift(head);
      for (const listener of tlsListeners) listener.call(server, socket);
    };
    socket.on('readable', onReadable);
  });
  return {
    destroyPending: () => {
      closing = true;
      for (const socket of pending.keys()) socket.destroy();
    },
  };
}
