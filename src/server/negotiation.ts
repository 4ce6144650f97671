import { Errors } from '../api/errors.js';
import { goParseBool } from '../api/query-params.js';

/**
 * Content negotiation as kube-apiserver does it: JSON or YAML bodies out, and the `as=Table` /
 * `as=PartialObjectMetadata` transformations kubectl and metadata informers ask for.
 */
export interface MediaType {
  type: string;
  params: Record<string, string>;
}

export function parseMediaTypes(header: string | undefined): MediaType[] {
  if (!header) return [];
  return header.split(',').map((part) => {
    const [type, ...params] = part.split(';').map((s) => s.trim());
    const parsed: Record<string, string> = {};
    for (const p of params) {
      const eq = p.indexOf('=');
      if (eq > 0) parsed[p.slice(0, eq).trim().toLowerCase()] = p.slice(eq + 1).trim();
    }
    return { type: (type ?? '').toLowerCase(), params: parsed };
  });
}

export type Transform = 'none' | 'table' | 'partial';

export interface Negotiated {
  format: 'json' | 'yaml';
  transform: Transform;
  /** JSON indented with two spaces (json.MarshalIndent), without the trailing newline of compact answers. */
  pretty?: boolean;
}

const NO_ACCEPT: Negotiated = Object.freeze({ format: 'json', transform: 'none' });
/** Clients send the same few Accept headers on every request: each is parsed once (the table is reset past 256). */
const negotiatedByAccept = new Map<string, Negotiated>();

/** Picks the first acceptable representation; only protobuf (which we never produce) alone is refused with 406. */
export function negotiate(accept: string | undefined): Negotiated {
  if (!accept) return NO_ACCEPT;
  let negotiated = negotiatedByAccept.get(accept);
  if (negotiated === undefined) {
    negotiated = Object.freeze(negotiateUncached(accept));
    if (negotiatedByAccept.size >= 256) negotiatedByAccept.clear();
    negotiatedByAccept.set(accept, negotiated);
  }
  return negotiated;
}

function negotiateUncached(accept: string): Negotiated {
  const types = parseMediaTypes(accept);
  if (types.length === 0) return { format: 'json', transform: 'none' };
  for (const t of types) {
    const transform: Transform | undefined =
      t.params.as === undefined
        ? 'none'
        : t.params.as === 'Table' && (t.params.g ?? 'meta.k8s.io') === 'meta.k8s.io'
          ? 'table'
          : (t.params.as === 'PartialObjectMetadata' || t.params.as === 'PartialObjectMetadataList') &&
              (t.params.g ?? 'meta.k8s.io') === 'meta.k8s.io'
            ? 'partial'
            : undefined;
    if (transform === undefined) continue;
    if (t.type === 'application/json' || t.type === '*/*' || t.type === 'application/*')
      return { format: 'json', transform };
    if (t.type === 'application/yaml') return { format: 'yaml', transform };
  }
  throw Errors.notAcceptable();
}

/** The media type of a request body, without parameters. */
export function bodyMediaType(header: string | undefined): string {
  if (header === 'application/json') return header; // what nearly every write sends
  return (header ?? '').split(';')[0]!.trim().toLowerCase();
}

/**
 * apiserver's isPrettyPrint: `?pretty=` read with strconv.ParseBool (not the conversion other boolean parameters get:
 * a value that is no Go bool means false), else pretty for people's tools, by User-Agent: curl, Wget and browsers.
 */
export function isPrettyPrint(pretty: string | string[] | undefined, userAgent: string | undefined): boolean {
  const value = Array.isArray(pretty) ? pretty[0] : pretty;
  if (value !== undefined && value !== '') return goParseBool(value) ?? false;
  const agent = userAgent ?? '';
  return agent.startsWith('curl') || agent.startsWith('Wget') || agent.startsWith('Mozilla/5.0');
}

/** A compact JSON answer as the pretty one apiserver writes instead (json.Indent of it: two spaces, no newline). */
export function prettyJson(compact: string): string {
  return JSON.stringify(JSON.parse(compact), null, 2);
}
