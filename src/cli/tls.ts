import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { isIP, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Server as TlsServer } from 'node:tls';
import forge from 'node-forge';
import { wallClock } from '../clock/clock.js';

/** PEM texts for `sim serve --tls`: the CA clients trust, and the server's certificate (signed by it) and key. */
export interface ServingTls {
  caCert: string;
  cert: string;
  key: string;
  /** Where the CA is kept (under --data), or undefined when it lives only as long as the process. */
  caDir?: string;
}

const DAY_MS = 24 * 3600 * 1000;
const CA_NAME = [{ name: 'commonName', value: 'kube-sim-ca' }];

/**
 * Key material comes from the OS's secure random source, never the seeded RNG: --seed must not make a CA key
 * guessable. Validity is wall-clock time (clients check it against theirs), not cluster time, which may be virtual.
 */
function rsaKeyPair(): forge.pki.rsa.KeyPair {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const forgeKey = forge.pki.privateKeyFromPem(
    privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
  ) as forge.pki.rsa.PrivateKey;
  return { privateKey: forgeKey, publicKey: forge.pki.setRsaPublicKey(forgeKey.n, forgeKey.e) };
}

function serialNumber(): string {
  // Positive (high bit clear), 16 random bytes, as RFC 5280 asks of a serial.
  const bytes = randomBytes(16);
  bytes[0]! &= 0x7f;
  return bytes.toString('hex');
}

function newCertificate(publicKey: forge.pki.PublicKey, validDays: number): forge.pki.Certificate {
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  cert.serialNumber = serialNumber();
  const now = wallClock.now();
  // An hour of slack for clients whose clock is a little behind.
  cert.validity.notBefore = new Date(now - 3600 * 1000);
  cert.validity.notAfter = new Date(now + validDays * DAY_MS);
  return cert;
}

function createCa(): { cert: string; key: string } {
  const keys = rsaKeyPair();
  const cert = newCertificate(keys.publicKey, 3650);
  cert.setSubject(CA_NAME);
  cert.setIssuer(CA_NAME);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(keys.privateKey, forge.md.sha256.create());
  return { cert: forge.pki.certificateToPem(cert), key: forge.pki.privateKeyToPem(keys.privateKey) };
}

/** A serving certificate for 127.0.0.1, ::1, localhost and the bind address, signed by the CA. */
function createServingCert(ca: { cert: string; key: string }, host: string): { cert: string; key: string } {
  const caCert = forge.pki.certificateFromPem(ca.cert);
  const caKey = forge.pki.privateKeyFromPem(ca.key);
  const keys = rsaKeyPair();
  const cert = newCertificate(keys.publicKey, 365);
  cert.setSubject([{ name: 'commonName', value: 'kube-apiserver' }]);
  cert.setIssuer(caCert.subject.attributes);
  const ips = new Set(['127.0.0.1', '::1']);
  const dns = new Set(['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc']);
  if (host !== '' && host !== '0.0.0.0' && host !== '::') (isIP(host) ? ips : dns).add(host);
  cert.setExtensions([
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true },
    {
      name: 'subjectAltName',
      altNames: [...[...dns].map((value) => ({ type: 2, value })), ...[...ips].map((ip) => ({ type: 7, ip }))],
    },
    { name: 'authorityKeyIdentifier', keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
  ]);
  cert.sign(caKey, forge.md.sha256.create());
  return { cert: forge.pki.certificateToPem(cert), key: forge.pki.privateKeyToPem(keys.privateKey) };
}

/** Where --data keeps the CA: PATH/tls for a data directory, PATH.tls beside a snapshot file. */
export function tlsDir(dataPath: string): string {
  const isFile = existsSync(dataPath) ? statSync(dataPath).isFile() : dataPath.endsWith('.json');
  return isFile ? `${dataPath}.tls` : join(dataPath, 'tls');
}

/**
 * The CA and a fresh serving certificate for `sim serve --tls`. With --data the CA is kept (ca.crt, ca.key with
 * mode 0600) so that kubeconfigs written earlier stay valid across restarts; without it the CA is new every start.
 * The serving certificate is made anew each start, so a changed --host is always in it.
 */
export function servingTls(host: string, dataPath?: string): ServingTls {
  let ca: { cert: string; key: string } | undefined;
  let caDir: string | undefined;
  if (dataPath !== undefined) {
    caDir = tlsDir(dataPath);
    const certFile = join(caDir, 'ca.crt');
    const keyFile = join(caDir, 'ca.key');
    if (existsSync(certFile) && existsSync(keyFile)) {
      ca = { cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') };
      const notAfter = forge.pki.certificateFromPem(ca.cert).validity.notAfter.getTime();
      if (notAfter < wallClock.now() + DAY_MS)
        throw new Error(
          `the CA in ${certFile} expires on ${new Date(notAfter).toISOString()}: remove ${caDir} to have a new one made`,
        );
    } else {
      ca = createCa();
      mkdirSync(caDir, { recursive: true, mode: 0o700 });
      writeFileSync(keyFile, ca.key, { mode: 0o600 });
      writeFileSync(certFile, ca.cert);
    }
  }
  ca ??= createCa();
  const serving = createServingCert(ca, host);
  return { caCert: ca.cert, cert: serving.cert, key: serving.key, caDir };
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
 * sweep rather than a timer per connection. `destroyPending` drops the ones still being looked at (a closing server
 * waits for every open connection).
 */
export function answerPlainHttp(server: TlsServer, idleMs = 120_000): { destroyPending(): void } {
  const tlsListeners = server.listeners('connection') as Array<(this: TlsServer, socket: Socket) => void>;
  server.removeAllListeners('connection');
  // Connections not yet handed to TLS (or answered and not yet closed), with when they arrived.
  const pending = new Map<Socket, number>();
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
      for (const socket of pending.keys()) socket.destroy();
    },
  };
}
