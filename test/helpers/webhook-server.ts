import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { issueServingCertificate, newCertificateAuthority } from '../../src/api/x509.js';

/**
 * A real HTTPS webhook server for tests, as an operator's would be: its own CA and serving certificate, made at test
 * time (ECDSA P-256, with the project's x509 module), and a handler per path that answers AdmissionReviews (or ConversionReviews). It records the
 * reviews it got; a handler may wait before answering (a slow webhook) or answer anything at all.
 */
export interface Certificates {
  /** PEM of the CA that signed the serving certificate. */
  caPem: string;
  /** The CA as a webhook's clientConfig.caBundle wants it: base64 of the PEM. */
  caBundle: string;
  cert: string;
  key: string;
}

/** An address of this machine other than loopback (Endpoints may not point at 127.0.0.0/8), or undefined. */
export function hostAddress(): string | undefined {
  for (const addresses of Object.values(networkInterfaces()))
    for (const a of addresses ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return undefined;
}

/** A CA and a serving certificate it signed for `dnsNames`, `ips` and 127.0.0.1. */
export function makeCertificates(dnsNames: string[] = ['localhost'], ips: string[] = []): Certificates {
  const now = Date.now();
  const validity = { notBefore: now - 3600_000, notAfter: now + 30 * 86_400_000 };
  const ca = newCertificateAuthority(`webhook-test-ca-${randomBytes(4).toString('hex')}`, validity);
  const serving = issueServingCertificate(
    ca.issuer,
    dnsNames[0] ?? 'webhook',
    { dns: dnsNames, ips: ['127.0.0.1', ...ips] },
    validity,
  );
  return { caPem: ca.cert, caBundle: Buffer.from(ca.cert).toString('base64'), ...serving };
}

export type ReviewRequest = Record<string, unknown> & {
  uid: string;
  operation: string;
  object?: Record<string, unknown> | null;
  oldObject?: Record<string, unknown> | null;
};

/** What a handler answers: a response for the review (uid filled in), or a raw HTTP answer. */
export type HandlerResult =
  | { response: Record<string, unknown>; delayMs?: number }
  | { status: number; body: string; contentType?: string; delayMs?: number }
  | { review: unknown; delayMs?: number };

export type Handler = (request: ReviewRequest, review: Record<string, unknown>) => HandlerResult;

export interface WebhookServer {
  url: string;
  port: number;
  certs: Certificates;
  /** The reviews received, by path, in order. */
  received(path: string): Array<Record<string, unknown>>;
  handle(path: string, handler: Handler): void;
  close(): Promise<void>;
}

/** Allows, with a JSONPatch when `patch` is given (base64 as the AdmissionReview carries it). */
export function allow(patch?: unknown[], extra: Record<string, unknown> = {}): HandlerResult {
  const response: Record<string, unknown> = { allowed: true, ...extra };
  if (patch) {
    response.patchType = 'JSONPatch';
    response.patch = Buffer.from(JSON.stringify(patch)).toString('base64');
  }
  return { response };
}

export function deny(message: string, code = 403, reason = 'Forbidden'): HandlerResult {
  return { response: { allowed: false, status: { code, reason, message } } };
}

export async function startWebhookServer(
  t: { after(fn: () => unknown): void },
  certs: Certificates = makeCertificates(),
  host = '127.0.0.1',
): Promise<WebhookServer> {
  const handlers = new Map<string, Handler>();
  const received = new Map<string, Array<Record<string, unknown>>>();
  const timers = new Set<NodeJS.Timeout>();
  const server: Server = createServer({ cert: certs.cert, key: certs.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = new URL(req.url ?? '/', 'https://x').pathname;
      let review: Record<string, unknown>;
      try {
        review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      } catch {
        res.writeHead(400).end('not JSON');
        return;
      }
      (received.get(path) ?? received.set(path, []).get(path)!).push(review);
      const handler = handlers.get(path);
      if (!handler) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('404 page not found');
        return;
      }
      const request = (review.request ?? {}) as ReviewRequest;
      const result = handler(request, review);
      const send = (): void => {
        if (res.destroyed) return;
        if ('status' in result) {
          res.writeHead(result.status, { 'content-type': result.contentType ?? 'text/plain' }).end(result.body);
          return;
        }
        const body =
          'review' in result
            ? result.review
            : {
                apiVersion: review.apiVersion,
                kind: review.kind,
                response: { uid: request.uid, ...result.response },
              };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      };
      if (result.delayMs) {
        const timer = setTimeout(() => {
          timers.delete(timer);
          send();
        }, result.delayMs);
        timers.add(timer);
      } else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as AddressInfo).port;
  const close = async (): Promise<void> => {
    for (const timer of timers) clearTimeout(timer);
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  t.after(close);
  return {
    url: `https://${host}:${port}`,
    port,
    certs,
    received: (path) => received.get(path) ?? [],
    handle: (path, handler) => handlers.set(path, handler),
    close,
  };
}
