import { Agent, request as httpsRequest, type RequestOptions } from 'node:https';
import { isIP } from 'node:net';
import { ApiError } from '../api/errors.js';
import { goJsonSyntaxError, interpretKind } from '../api/go-json.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import { wallClock, type Clock } from '../clock/clock.js';
import type { SeededRandom } from '../clock/random.js';
import type { MemoryStore } from '../storage/memory-store.js';

/**
 * The HTTPS client of admission and conversion webhooks (k8s.io/apiserver's util/webhook ClientManager): a
 * webhook's clientConfig — a `url`, or a `service` that resolves to one of its endpoints (or to a host:port mapped
 * with `sim serve --map-service`, so a webhook server on the host backs an in-cluster Service) — verified against
 * its `caBundle`, with the timeout the webhook asks for. Failures read as Go's HTTP client and REST client word them.
 */
export interface WebhookClientConfig {
  url?: string;
  service?: { namespace?: string; name?: string; path?: string; port?: number };
  /** Base64 of PEM certificates; the system's roots when absent. */
  caBundle?: string;
}

/** A webhook's clientConfig as its API object gives it (a service's port defaults to 443). */
export function clientConfigOf(raw: unknown): WebhookClientConfig {
  const client = isPlainObject(raw) ? raw : {};
  const config: WebhookClientConfig = {};
  if (typeof client.url === 'string') config.url = client.url;
  if (isPlainObject(client.service)) {
    const s = client.service;
    config.service = {
      namespace: String(s.namespace ?? ''),
      name: String(s.name ?? ''),
      port: typeof s.port === 'number' ? s.port : 443,
    };
    if (typeof s.path === 'string') config.service.path = s.path;
  }
  if (typeof client.caBundle === 'string' && client.caBundle !== '') config.caBundle = client.caBundle;
  return config;
}

/** `sim serve --map-service NAMESPACE/NAME[:PORT]=HOST:PORT`: where a Service's webhook server really listens. */
export interface ServiceMapping {
  namespace: string;
  name: string;
  /** The Service port it stands for; any port when unset. */
  port?: number;
  host: string;
  hostPort: number;
}

/** Parses one --map-service value; throws with a message for the user. */
export function parseServiceMapping(text: string): ServiceMapping {
  const match = /^([a-z0-9][a-z0-9.-]*)\/([a-z0-9][a-z0-9.-]*)(?::(\d+))?=(\[[^\]]+\]|[^:=]+):(\d+)$/.exec(text.trim());
  if (!match) throw new Error(`--map-service: "${text}" is not NAMESPACE/NAME[:PORT]=HOST:PORT`);
  const mapping: ServiceMapping = {
    namespace: match[1]!,
    name: match[2]!,
    host: match[4]!.replace(/^\[|\]$/g, ''),
    hostPort: Number(match[5]),
  };
  if (match[3] !== undefined) mapping.port = Number(match[3]);
  return mapping;
}

/**
 * A failed call (webhookutil.ErrCallingWebhook's reason): a transport error reads `Post "URL": …`; an answer
 * other than 2xx carries the Status it amounts to.
 */
export class WebhookCallError extends Error {
  constructor(
    message: string,
    readonly status?: ApiError,
  ) {
    super(message);
    this.name = 'WebhookCallError';
  }
}

/** A reused connection that turned out closed before the request got any answer. */
class StaleConnection extends Error {}

/** What the server wrote back, parsed. */
export type WebhookAnswer = Record<string, unknown>;

const MAX_RESPONSE_BYTES = 32 * 1024 * 1024;
/** Connections kept open to one webhook server. */
const MAX_SOCKETS = 64;
const SERVICES = '/services';
const ENDPOINTS = '/endpoints';

interface Target {
  /** The URL as Go prints it in errors (for a Service: https://NAME.NAMESPACE.svc:PORT/PATH). */
  url: string;
  host: string;
  port: number;
  path: string;
  /** The name the certificate must carry. */
  serverName: string | undefined;
}

export class WebhookClients {
  private readonly agents = new Map<string, Agent>();
  private inFlight = 0;

  constructor(
    private readonly store: MemoryStore,
    private readonly random: SeededRandom,
    private readonly mappings: readonly ServiceMapping[],
    clock: Clock,
  ) {
    // Cluster time stands still while a webhook answers: a settle waits for the write it holds up.
    clock.addIdleCheck?.(() => this.inFlight === 0);
  }

  /**
   * POSTs `body` as JSON and resolves with the JSON answer. `timeoutSeconds` bounds the whole exchange, on the wall
   * clock (the webhook server is a real process), and is passed on as `?timeout=Ns` as kube-apiserver does for
   * admission webhooks (unless `sendTimeout` is false: a conversion call is bounded by its request alone).
   */
  async post(
    config: WebhookClientConfig,
    body: unknown,
    timeoutSeconds: number | undefined,
    sendTimeout = true,
  ): Promise<WebhookAnswer> {
    const query =
      sendTimeout && timeoutSeconds !== undefined && timeoutSeconds > 0 ? `?timeout=${timeoutSeconds}s` : '';
    const target = this.resolve(config, query);
    const shown = `${target.url}${query}`;
    const payload = Buffer.from(JSON.stringify(body));
    const options: RequestOptions = {
      method: 'POST',
      host: target.host,
      port: target.port,
      path: `${target.path}${query}`,
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, */*',
        'content-length': payload.length,
        'user-agent': 'kube-apiserver-admission',
      },
      agent: this.agent(target, config.caBundle),
    };
    if (target.serverName !== undefined) options.servername = target.serverName;
    this.inFlight++;
    try {
      // A kept-alive connection the server closed while idle fails before any answer: Go's transport sends the
      // request again on another connection (errServerClosedIdle), and so does this client.
      for (let attempt = 1; ; attempt++) {
        try {
          return await this.exchange(options, payload, shown, target, timeoutSeconds);
        } catch (err) {
          if (!(err instanceof StaleConnection)) throw err;
          if (attempt > MAX_SOCKETS) throw new WebhookCallError(`Post "${shown}": EOF`);
        }
      }
    } finally {
      this.inFlight--;
    }
  }

  private exchange(
    options: RequestOptions,
    payload: Buffer,
    shown: string,
    target: Target,
    timeoutSeconds: number | undefined,
  ): Promise<WebhookAnswer> {
    return new Promise<WebhookAnswer>((resolve, reject) => {
      let settled = false;
      let answered = false;
      const fail = (err: Error): void => {
        if (settled) return;
        settled = true;
        timer?.cancel();
        reject(err);
      };
      const req = httpsRequest(options, (res) => {
        answered = true;
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            req.destroy();
            fail(new WebhookCallError(`Post "${shown}": response body too large`));
            return;
          }
          chunks.push(chunk);
        });
        res.on('error', (err) => fail(transportError(shown, err, target)));
        res.on('end', () => {
          if (settled) return;
          settled = true;
          timer?.cancel();
          const body = Buffer.concat(chunks);
          const text = body.toString('utf8');
          const code = res.statusCode ?? 0;
          if (code < 200 || code > 299) {
            reject(responseError(code, text, String(res.headers['content-type'] ?? '')));
            return;
          }
          // The REST client's decoding: the body's apiVersion and kind first, in Go's words when it has none.
          const syntax = goJsonSyntaxError(body);
          if (syntax !== undefined) {
            reject(new WebhookCallError(`couldn't get version/kind; json parse error: ${syntax}`));
            return;
          }
          const parsed: unknown = JSON.parse(text);
          const kind = interpretKind(parsed);
          if ('error' in kind) {
            reject(new WebhookCallError(kind.error));
            return;
          }
          resolve(isPlainObject(parsed) ? parsed : {});
        });
      });
      const timer =
        timeoutSeconds !== undefined && timeoutSeconds > 0
          ? wallClock.setTimer(timeoutSeconds * 1000, () => {
              fail(new WebhookCallError(`Post "${shown}": context deadline exceeded`));
              req.destroy();
            })
          : undefined;
      req.on('error', (err) => {
        const code = (err as { code?: string }).code;
        if (!answered && req.reusedSocket && (code === 'ECONNRESET' || err.message === 'socket hang up'))
          fail(new StaleConnection());
        else fail(transportError(shown, err, target));
      });
      req.end(payload);
    });
  }

  /** Closes the kept-alive connections (the cluster is closing). */
  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }

  private agent(target: Target, caBundle: string | undefined): Agent {
    const key = `${target.host}:${target.port}|${target.serverName ?? ''}|${caBundle ?? ''}`;
    let agent = this.agents.get(key);
    if (!agent) {
      const ca = caBundle ? Buffer.from(caBundle, 'base64').toString('utf8') : undefined;
      agent = new Agent({ keepAlive: true, maxSockets: MAX_SOCKETS, ...(ca ? { ca } : {}) });
      this.agents.set(key, agent);
    }
    return agent;
  }

  /** Where the webhook is: its URL, or its Service's endpoint (webhookutil's service resolver). */
  private resolve(config: WebhookClientConfig, query: string): Target {
    if (config.url !== undefined) {
      let url: URL;
      try {
        url = new URL(config.url);
      } catch {
        throw new WebhookCallError(`parse "${config.url}": invalid URL`);
      }
      const host = url.hostname.replace(/^\[|\]$/g, '');
      return {
        url: config.url,
        host,
        port: url.port ? Number(url.port) : 443,
        path: `${url.pathname}${url.search}`,
        serverName: isIP(host) ? undefined : host,
      };
    }
    const service = config.service ?? {};
    const namespace = service.namespace ?? '';
    const name = service.name ?? '';
    const port = service.port ?? 443;
    const path = service.path ?? '/';
    const serverName = `${name}.${namespace}.svc`;
    const url = `https://${serverName}:${port}${path}`;
    const mapped = this.mappings.find(
      (m) => m.namespace === namespace && m.name === name && (m.port === undefined || m.port === port),
    );
    if (mapped) return { url, host: mapped.host, port: mapped.hostPort, path, serverName };
    const endpoint = this.serviceEndpoint(namespace, name, port, `${url}${query}`);
    return { url, host: endpoint.host, port: endpoint.port, path, serverName };
  }

  /**
   * proxy.ResolveEndpoint: the Service's port `port`, then a ready address of an Endpoints subset that serves that
   * port's name (a random subset and address, as kube-apiserver picks them); an ExternalName Service is its name.
   */
  private serviceEndpoint(namespace: string, name: string, port: number, url: string): { host: string; port: number } {
    const fail = (why: string): never => {
      throw new WebhookCallError(`Post "${url}": ${why}`, new ApiError(503, 'ServiceUnavailable', why));
    };
    const svc = this.store.get(SERVICES, namespace, name);
    if (!svc) fail(`service "${name}" not found`);
    const spec = (isPlainObject(svc!.spec) ? svc!.spec : {}) as Record<string, unknown>;
    const type = typeof spec.type === 'string' ? spec.type : 'ClusterIP';
    if (type === 'ExternalName' && typeof spec.externalName === 'string') return { host: spec.externalName, port };
    if (!['ClusterIP', 'NodePort', 'LoadBalancer'].includes(type)) fail(`unsupported service type "${type}"`);
    const ports = Array.isArray(spec.ports) ? spec.ports.filter(isPlainObject) : [];
    const svcPort = ports.find((p) => p.port === port);
    if (!svcPort) fail(`no service port ${port} found for service "${name}"`);
    const endpoints = this.store.get(ENDPOINTS, namespace, name);
    const subsets = subsetsOf(endpoints);
    if (subsets.length === 0) fail(`no endpoints available for service "${name}"`);
    const start = Math.floor(this.random.next() * subsets.length);
    for (let i = 0; i < subsets.length; i++) {
      const subset = subsets[(start + i) % subsets.length]!;
      if (subset.addresses.length === 0) continue;
      const match = subset.ports.find((p) => (p.name ?? '') === (svcPort!.name ?? ''));
      if (!match) continue;
      const address = subset.addresses[Math.floor(this.random.next() * subset.addresses.length)]!;
      return { host: address, port: match.port };
    }
    return fail(`no endpoints available for service "${name}"`);
  }
}

function subsetsOf(
  endpoints: KubeObject | undefined,
): Array<{ addresses: string[]; ports: Array<{ name?: string; port: number }> }> {
  const subsets = endpoints && Array.isArray(endpoints.subsets) ? endpoints.subsets.filter(isPlainObject) : [];
  return subsets.map((s) => ({
    addresses: (Array.isArray(s.addresses) ? s.addresses.filter(isPlainObject) : [])
      .map((a) => a.ip)
      .filter((ip): ip is string => typeof ip === 'string'),
    ports: (Array.isArray(s.ports) ? s.ports.filter(isPlainObject) : []).flatMap((p) =>
      typeof p.port === 'number' ? [{ ...(typeof p.name === 'string' ? { name: p.name } : {}), port: p.port }] : [],
    ),
  }));
}

/** A Node transport error as Go's net/http and crypto/tls word theirs. */
function transportError(
  url: string,
  err: Error & { code?: string; address?: string; port?: number },
  target: Target,
): WebhookCallError {
  const at = `${err.address ?? target.host}:${err.port ?? target.port}`;
  let why: string;
  switch (err.code) {
    case 'ECONNREFUSED':
      why = `dial tcp ${at}: connect: connection refused`;
      break;
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      why = `dial tcp ${at}: connect: no route to host`;
      break;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      why = `dial tcp: lookup ${target.host}: no such host`;
      break;
    case 'ECONNRESET':
      why = 'EOF';
      break;
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
    case 'UNABLE_TO_GET_ISSUER_CERT':
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
      why = 'tls: failed to verify certificate: x509: certificate signed by unknown authority';
      break;
    case 'CERT_HAS_EXPIRED':
    case 'CERT_NOT_YET_VALID':
      why = 'tls: failed to verify certificate: x509: certificate has expired or is not yet valid';
      break;
    case 'ERR_TLS_CERT_ALTNAME_INVALID': {
      const cert = (err as { cert?: { subjectaltname?: string } }).cert;
      const names = (cert?.subjectaltname ?? '')
        .split(', ')
        .map((n) => n.replace(/^(DNS|IP Address):/, ''))
        .filter((n) => n !== '');
      why = `tls: failed to verify certificate: x509: certificate is valid for ${names.join(', ')}, not ${target.serverName ?? target.host}`;
      break;
    }
    case 'EPROTO':
      why = /wrong version number|packet length too long/.test(err.message)
        ? 'http: server gave HTTP response to HTTPS client'
        : `tls: ${err.message}`;
      break;
    default:
      why = err.message === 'socket hang up' ? 'EOF' : err.message;
  }
  return new WebhookCallError(`Post "${url}": ${why}`);
}

/**
 * An answer other than 2xx (the REST client's transformResponse): a Status in the body is the error; anything else
 * is apierrors.NewGenericServerResponse of the code.
 */
function responseError(code: number, text: string, contentType: string): WebhookCallError {
  try {
    const parsed: unknown = JSON.parse(text);
    if (isPlainObject(parsed) && parsed.kind === 'Status' && typeof parsed.message === 'string') {
      const status = new ApiError(
        typeof parsed.code === 'number' ? parsed.code : code,
        typeof parsed.reason === 'string' ? parsed.reason : '',
        parsed.message,
      );
      return new WebhookCallError(parsed.message, status);
    }
  } catch {
    // not a Status: a generic answer below
  }
  const serverMessage = contentType.startsWith('text/') ? text.slice(0, 1024).trim() : 'unknown';
  const [reason, message] = genericResponse(code, serverMessage);
  return new WebhookCallError(message, new ApiError(code, reason, message));
}

function genericResponse(code: number, serverMessage: string): [string, string] {
  switch (code) {
    case 400:
      return ['BadRequest', 'the server rejected our request for an unknown reason'];
    case 401:
      return ['Unauthorized', 'the server has asked for the client to provide credentials'];
    case 403:
      return ['Forbidden', serverMessage];
    case 404:
      return ['NotFound', 'the server could not find the requested resource'];
    case 405:
      return ['MethodNotAllowed', 'the server does not allow this method on the requested resource'];
    case 409:
      return ['AlreadyExists', 'the server reported a conflict'];
    case 415:
      return ['UnsupportedMediaType', serverMessage];
    case 422:
      return ['Invalid', 'the server rejected our request due to an error in our request'];
    case 429:
      return ['TooManyRequests', 'the server has received too many requests and has asked us to try again later'];
    case 503:
      return ['ServiceUnavailable', 'the server is currently unable to handle the request'];
    case 504:
      return [
        'Timeout',
        'the server was unable to return a response in the time allotted, but may still be processing the request',
      ];
    default:
      return code >= 500
        ? [
            'InternalError',
            `an error on the server (${JSON.stringify(serverMessage)}) has prevented the request from succeeding`,
          ]
        : ['', `the server responded with the status code ${code} but did not return more information`];
  }
}
