import { yaml } from '../api/yaml.js';
import { Errors } from '../api/errors.js';
import { PATCH_CONTENT_TYPES, type PatchType } from '../api/patch.js';
import { goJsonSyntaxError, interpretKind, summarizeBody } from '../api/go-json.js';
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

/** How a JSON syntax error is worded for this kind of body, given Go's own text of it. */
type SyntaxWording = (goError: string) => string;

const versionKindWording: SyntaxWording = (e) => `couldn't get version/kind; json parse error: ${e}`;

/** Parses JSON; what is not JSON is a 400 worded as kube-apiserver words it (Go's scanner's text, in `wording`). */
export function parseJson(source: string, wording: SyntaxWording = versionKindWording): unknown {
  checkDepth(source);
  try {
    return JSON.parse(source);
  } catch (err) {
    const goError = goJsonSyntaxError(Buffer.from(source, 'utf8')) ?? (err as Error).message;
    throw Errors.badRequest(wording(goError));
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

function parseYamlBody(source: string, wording: SyntaxWording = (e) => e): unknown {
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
  const docs = yaml().parseAllDocuments(source);
  if (Array.isArray(docs) && docs.length > 1)
    throw Errors.badRequest('the request body must contain a single YAML document');
  try {
    const value: unknown = yaml().parse(source, { maxAliasCount: 100, uniqueKeys: false });
    checkDepth(JSON.stringify(value) ?? '');
    return value;
  } catch (err) {
    if (err instanceof Error && err.name === 'ApiError') throw err;
    throw Errors.badRequest(wording(`error converting YAML to JSON: ${(err as Error).message.split('\n')[0]}`));
  }
}

export interface DecodedBody {
  value: unknown;
  /** Set when the body is a patch of this type (PATCH requests). */
  patchType?: PatchType;
}

export interface DecodeOptions {
  patch: boolean;
  protobuf?: (body: Buffer) => unknown;
  /**
   * The kind a create or update body must be: what does not decode gets apiserver's transformDecodeError text,
   * `the object provided is unrecognized (must be of type Namespace): couldn't get version/kind; json parse error: …
   * (the body's first 30 bytes)`.
   */
  kind?: string;
  /** The body is DeleteOptions: what does not decode is a plain 400 with the decoder's text (delete.go). */
  deleteOptions?: boolean;
}

/** How each patch type's handler words a body that is not JSON (or YAML), from apiserver's patch.go. */
const PATCH_WORDING: Record<PatchType, SyntaxWording> = {
  json: (e) => `error decoding patch: ${e}`,
  merge: (e) => `error decoding patch: ${e}`,
  strategic: (e) => e,
  apply: (e) => `error decoding YAML: ${e}`,
};

/**
 * Decodes a request body by its Content-Type. A missing Content-Type is read as JSON (kubectl's
 * `scale --current-replicas` PUT sends none); protobuf is decoded by the protobuf module when installed.
 * Errors read as kube-apiserver's: Go's JSON decoder's words, in the wording of the handler that decodes the body.
 */
export function decodeBody(
  contentType: string | undefined,
  body: Buffer | undefined,
  options: DecodeOptions,
): DecodedBody {
  const media = bodyMediaType(contentType);
  const raw = body ?? Buffer.alloc(0);
  if (options.patch) {
    const patchType = PATCH_CONTENT_TYPES[media];
    if (!patchType) throw Errors.unsupportedMediaType(media);
    const source = text(raw);
    const wording = PATCH_WORDING[patchType];
    const value = patchType === 'apply' ? parseYamlBody(source, wording) : parseJson(source, wording);
    return { value, patchType };
  }
  const kind = options.kind;
  // transformDecodeError: what could not even be read for its kind names the expected kind and shows the body.
  const unrecognized: SyntaxWording = kind
    ? (e) => `the object provided is unrecognized (must be of type ${kind}): ${e} (${summarizeBody(raw)})`
    : (e) => e;
  let value: unknown;
  switch (media) {
    case '':
    case 'application/json':
      if (raw.length === 0 && !kind) return { value: undefined };
      value = parseJson(text(raw), (e) => unrecognized(versionKindWording(e)));
      break;
    case 'application/yaml':
    case 'application/x-yaml':
    case 'text/yaml':
      value = parseYamlBody(text(raw), unrecognized);
      break;
    case 'application/vnd.kubernetes.protobuf':
      if (options.protobuf) return { value: options.protobuf(raw) };
      throw Errors.unsupportedMediaType(media);
    default:
      throw Errors.unsupportedMediaType(media);
  }
  if (kind || options.deleteOptions) {
    const found = interpretKind(value);
    if ('error' in found) throw Errors.badRequest(unrecognized(found.error));
    // A JSON null decodes into the zero value of the type: an empty object.
    if (value === null) value = {};
  }
  return { value };
}
