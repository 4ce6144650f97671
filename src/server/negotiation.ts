import { Errors } from '../api/errors.js';

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
}

/** Picks the first acceptable representation; only protobuf (which we never produce) alone is refused with 406. */
export function negotiate(accept: string | undefined): Negotiated {
  const types = parseMediaTypes(accept);
  if (types.length === 0) return { format: 'json', transform: 'none' };
  for (const t of types) {
    const transform: Transform | undefined =
      t.params.as === undefined
        ? 'none'
        : t.params.as === 'Table' && (t.params.g ?? 'meta.k8s.io') === 'meta.k8s.io'
          ? 'table'
          : (t.params.as === 'PartialObjectMetadata' || t.params.as === 'PartialObjectMetadataList') && (t.params.g ?? 'meta.k8s.io') === 'meta.k8s.io'
            ? 'partial'
            : undefined;
    if (transform === undefined) continue;
    if (t.type === 'application/json' || t.type === '*/*' || t.type === 'application/*') return { format: 'json', transform };
    if (t.type === 'application/yaml') return { format: 'yaml', transform };
  }
  throw Errors.notAcceptable();
}

/** The media type of a request body, without parameters. */
export function bodyMediaType(header: string | undefined): string {
  return (header ?? '').split(';')[0]!.trim().toLowerCase();
}
