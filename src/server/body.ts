import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { Errors } from '../api/errors.js';
import { PATCH_CONTENT_TYPES, type PatchType } from '../api/patch.js';
import { bodyMediaType } from './negotiation.js';

/** kube-apiserver's request body limit. */
export const MAX_BODY_BYTES = 3 * 1024 * 1024;
const MAX_JSON_DEPTH = 10_000;

const utf8 = new TextDecoder('utf-8', { fatal: true });

function text(body: Buffer): string {
  try {
    return utf8.decode(body);
  } catch {
    throw Errors.badRequest('the request body is not valid UTF-8');
  }
}

/** Nesting depth of a JSON text, counted without parsing (so a hostile body cannot exhaust the stack later). */
function checkDepth(source: string): void {
  // Each level opens with a character of its own: a text this short cannot nest too deep (most bodies).
  if (source.length <= MAX_JSON_DEPTH) return;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < source.length; i++) {
    const c = source.charCodeAt(i);
    if (inString) {
      if (c === 92)
        i++; // backslash escapes the next character
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) {
      if (++depth > MAX_JSON_DEPTH) throw Errors.badRequest(`json: exceeded max depth of ${MAX_JSON_DEPTH}`);
    } else if (c === 125 || c === 93) depth--;
  }
}

export function parseJson(source: string): unknown {
  checkDepth(source);
  try {
    return JSON.parse(source);
  } catch (err) {
    throw Errors.badRequest(`couldn't get version/kind; json parse error: ${(err as Error).message}`);
  }
}

/**
 * The yaml library exhausts memory (a fatal V8 error, not an exception) on flow collections nested about a
 * thousand deep, so YAML's `[`/`{` nesting is bounded before parsing; brackets inside quotes or comments are
 * counted too, which only errs on the safe side. Block nesting ends in a catchable stack overflow instead.
 */
const MAX_YAML_FLOW_DEPTH = 256;

function checkYamlFlowDepth(source: string): void {
  let depth = 0;
  for (let i = 0; i < source.length; i++) {
    const c = source.charCodeAt(i);
    if (c === 123 || c === 91) {
      if (++depth > MAX_YAML_FLOW_DEPTH) throw Errors.badRequest(`yaml: exceeded max depth of ${MAX_YAML_FLOW_DEPTH}`);
    } else if ((c === 125 || c === 93) && depth > 0) depth--;
  }
}

function parseYamlBody(source: string): unknown {
  // JSON is YAML, and what kubectl sends for server-side apply: parse it as JSON, with JSON's own depth bound.
  if (/^\s*[[{]/.test(source)) {
    checkDepth(source);
    try {
      return JSON.parse(source);
    } catch {
      // YAML flow syntax that is not JSON: parsed as YAML below.
    }
  }
  checkYamlFlowDepth(source);
  const docs = parseAllDocuments(source);
  if (Array.isArray(docs) && docs.length > 1)
    throw Errors.badRequest('the request body must contain a single YAML document');
  try {
    const value: unknown = parseYaml(source, { maxAliasCount: 100, uniqueKeys: false });
    checkDepth(JSON.stringify(value) ?? '');
    return value;
  } catch (err) {
    if (err instanceof Error && err.name === 'ApiError') throw err;
    throw Errors.badRequest(`error converting YAML to JSON: ${(err as Error).message.split('\n')[0]}`);
  }
}

export interface DecodedBody {
  value: unknown;
  /** Set when the body is a patch of this type (PATCH requests). */
  patchType?: PatchType;
}

/**
 * Decodes a request body by its Content-Type. A missing Content-Type is read as JSON (kubectl's
 * `scale --current-replicas` PUT sends none); protobuf is decoded by the protobuf module when installed.
 */
export function decodeBody(
  contentType: string | undefined,
  body: Buffer | undefined,
  options: { patch: boolean; protobuf?: (body: Buffer) => unknown },
): DecodedBody {
  const media = bodyMediaType(contentType);
  const raw = body ?? Buffer.alloc(0);
  if (options.patch) {
    const patchType = PATCH_CONTENT_TYPES[media];
    if (!patchType) throw Errors.unsupportedMediaType(media);
    const source = text(raw);
    const value = patchType === 'apply' ? parseYamlBody(source) : parseJson(source);
    return { value, patchType };
  }
  switch (media) {
    case '':
    case 'application/json':
      return { value: raw.length === 0 ? undefined : parseJson(text(raw)) };
    case 'application/yaml':
    case 'application/x-yaml':
    case 'text/yaml':
      return { value: parseYamlBody(text(raw)) };
    case 'application/vnd.kubernetes.protobuf':
      if (options.protobuf) return { value: options.protobuf(raw) };
      throw Errors.unsupportedMediaType(media);
    default:
      throw Errors.unsupportedMediaType(media);
  }
}
