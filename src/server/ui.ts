import { readdir, readFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** Where the live view is served: a page that is a client of this server like any other. */
export const UI_PATH = '/sim/ui/';

/**
 * The page's files are public (they hold no cluster data; the page asks for a token before it reads any), so a
 * browser can load them without the bearer token it cannot send on a navigation.
 */
export function isUiRequest(url: string | undefined): boolean {
  return url !== undefined && (url === '/sim/ui' || url.startsWith(UI_PATH) || url.startsWith('/sim/ui?'));
}

/** The bundle `npm install` builds (scripts/build-ui.mjs), from dist/src/server/ to dist/ui/. */
const UI_DIR = new URL('../../ui/', import.meta.url);

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
};

/** What the page may load and connect to: this server only (its API, its WebSocket watches). */
const CONTENT_SECURITY_POLICY =
  "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'";

interface Asset {
  body: Buffer;
  contentType: string;
  etag: string;
}

/**
 * The files of dist/ui, read on the first request for the page and kept: serving the page costs `sim serve`'s
 * start-up nothing. Only the files the build wrote are served, by their plain names (no paths, so nothing outside).
 */
class UiAssets {
  private names: Promise<Set<string>> | undefined;
  private readonly files = new Map<string, Promise<Asset>>();

  async get(name: string): Promise<Asset | undefined> {
    this.names ??= readdir(UI_DIR).then(
      (list) => new Set(list),
      () => new Set<string>(),
    );
    const names = await this.names;
    if (!names.has(name)) {
      if (names.size === 0) this.names = undefined; // not built yet: look again next time
      return undefined;
    }
    let file = this.files.get(name);
    if (!file) {
      file = readFile(new URL(name, UI_DIR)).then((body) => ({
        body,
        contentType: CONTENT_TYPES[name.slice(name.lastIndexOf('.'))] ?? 'application/octet-stream',
        etag: `"${createHash('sha1').update(body).digest('base64url')}"`,
      }));
      this.files.set(name, file);
      file.catch(() => this.files.delete(name));
    }
    return file;
  }
}

const NOT_BUILT = `<!doctype html><meta charset="utf-8"><title>kube-sim</title>
<p>The live view is not built: run <code>npm install</code> (or <code>npm run build</code>) in kube-sim's directory.</p>\n`;

/** GET /sim/ui/ and its files. */
export function registerUiRoutes(app: FastifyInstance): void {
  const assets = new UiAssets();
  app.get('/sim/ui', (request, reply) => {
    const query = (request.raw.url ?? '').split('?')[1];
    void reply.redirect(query ? `${UI_PATH}?${query}` : UI_PATH, 301);
  });
  app.get(`${UI_PATH}*`, async (request: FastifyRequest, reply: FastifyReply) => {
    const rest = (request.params as { '*': string })['*'];
    const name = rest === '' ? 'index.html' : rest;
    const asset = /^[\w.-]+$/.test(name) ? await assets.get(name) : undefined;
    if (!asset) {
      if (name === 'index.html')
        return void reply.code(503).header('content-type', 'text/html; charset=utf-8').send(NOT_BUILT);
      return void reply.code(404).header('content-type', 'text/plain; charset=utf-8').send('404 page not found\n');
    }
    void reply
      .header('etag', asset.etag)
      .header('cache-control', 'no-cache')
      .header('x-content-type-options', 'nosniff')
      .header('content-security-policy', CONTENT_SECURITY_POLICY);
    if (request.headers['if-none-match'] === asset.etag) return void reply.code(304).send();
    void reply.code(200).header('content-type', asset.contentType).send(asset.body);
  });
}
