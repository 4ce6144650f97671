import { generateKeyPairSync } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import forge from 'node-forge';

/** A throwaway self-signed certificate for 127.0.0.1 (the key from node:crypto, the certificate from node-forge). */
function selfSigned(): { key: string; cert: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const key = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(publicKey.export({ type: 'spki', format: 'pem' }).toString());
  cert.serialNumber = '01';
  cert.validity.notBefore = new Date(Date.now() - 60_000);
  cert.validity.notAfter = new Date(Date.now() + 24 * 3600_000);
  const subject = [{ name: 'commonName', value: 'kube-sim-test' }];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] }]);
  cert.sign(forge.pki.privateKeyFromPem(key), forge.md.sha256.create());
  return { key, cert: forge.pki.certificateToPem(cert) };
}

/**
 * kubectl (client-go) sends credentials — tokens, impersonation — only over TLS. This terminates TLS in front of a
 * plain-http `sim serve` and forwards each request (and upgrade) unchanged, so kubectl tests of --auth need no
 * server TLS.
 * Resolves with the https URL (use kubectl --insecure-skip-tls-verify) and a close function.
 */
export async function tlsProxy(target: string): Promise<{ url: string; close(): Promise<void> }> {
  const upstream = new URL(target);
  const server: Server = createServer(selfSigned(), (req, res) => {
    // rawHeaders keeps repeated headers (several Impersonate-Group lines) apart, as kubectl sent them.
    const forward = httpRequest({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.rawHeaders }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      // A watch answers its headers long before its first event: pass them on now, as the server sent them.
      res.flushHeaders();
      answer.pipe(res);
    });
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  // Upgrades (kubectl exec's WebSocket): replay the request line and headers upstream, then splice the sockets.
  const tunnels = new Set<Duplex>();
  server.on('upgrade', (req: IncomingMessage, client: Duplex, head: Buffer) => {
    const backend = connect(Number(upstream.port), upstream.hostname, () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      backend.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) backend.write(head);
      backend.pipe(client);
      client.pipe(backend);
    });
    for (const socket of [client, backend]) {
      tunnels.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        tunnels.delete(socket);
        client.destroy();
        backend.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of tunnels) socket.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
