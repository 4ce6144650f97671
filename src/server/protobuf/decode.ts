import { createRequire } from 'node:module';
import type protobufjs from 'protobufjs/light.js';
import { ApiError, Errors } from '../../api/errors.js';
import { parseJson } from '../body.js';
import { KINDS, SCHEMA, type FieldSpec } from './schema.js';

/**
 * Request bodies in Kubernetes' protobuf encoding (application/vnd.kubernetes.protobuf), which kubectl 1.32+
 * uses for its typed commands: the magic `k8s\0`, then a runtime.Unknown envelope whose typeMeta names the kind
 * and whose raw field holds the object's own message. The object comes out as the JSON the same client would
 * have sent: JSON field names, Kubernetes' own JSON forms for Time, Quantity, IntOrString …, and Go's omitempty
 * (schema.ts records which zero values the JSON keeps).
 */

export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

export const PROTOBUF_MAGIC = Buffer.from('k8s\0', 'latin1');

const META = 'k8s.io.apimachinery.pkg.apis.meta.v1';
const UNKNOWN = 'k8s.io.apimachinery.pkg.runtime.Unknown';
const TIME = `${META}.Time`;
const MICRO_TIME = `${META}.MicroTime`;
const FIELDS_V1 = `${META}.FieldsV1`;
const QUANTITY = 'k8s.io.apimachinery.pkg.api.resource.Quantity';
const INT_OR_STRING = 'k8s.io.apimachinery.pkg.util.intstr.IntOrString';
const RAW_EXTENSION = 'k8s.io.apimachinery.pkg.runtime.RawExtension';

type Protobuf = typeof protobufjs;

interface Compiled {
  root: protobufjs.Root;
  fields: Map<string, readonly FieldSpec[]>;
}

let compiled: Compiled | undefined;

/** protobufjs types for the schema, built on first use (a few milliseconds) rather than at every server start. */
function schema(): Compiled {
  if (compiled) return compiled;
  // protobufjs itself is loaded here too: most sessions never send protobuf, and every start would pay its loading.
  const protobuf = createRequire(import.meta.url)('protobufjs/light.js') as Protobuf;
  const root = new protobuf.Root();
  const fields = new Map<string, readonly FieldSpec[]>();
  const ref = (type: string): string => (type.includes('.') ? `.${type}` : type);
  for (const [pkg, messages] of Object.entries(SCHEMA)) {
    const ns = root.define(pkg);
    for (const [name, specs] of Object.entries(messages)) {
      const type = new protobuf.Type(name);
      for (const [field, id, fieldType, flags = ''] of specs) {
        const map = /^map<(.+)>$/.exec(fieldType);
        type.add(
          map
            ? new protobuf.MapField(field, id, 'string', ref(map[1]!))
            : new protobuf.Field(field, id, ref(fieldType), flags.includes('r') ? 'repeated' : 'optional'),
        );
      }
      ns.add(type);
      fields.set(`${pkg}.${name}`, specs);
    }
  }
  root.resolveAll();
  compiled = { root, fields };
  return compiled;
}

/** The protobufjs type of a schema message (tests encode with it). */
export function protobufType(typeName: string): protobufjs.Type {
  return schema().root.lookupType(typeName);
}

type Plain = Record<string, unknown>;

/** Wire bytes → a plain object holding only the fields present on the wire (int64 as numbers, bytes as Buffers). */
function decodeMessage(typeName: string, bytes: Uint8Array, what: string): Plain {
  const type = protobufType(typeName);
  try {
    return type.toObject(type.decode(bytes), { longs: Number }) as Plain;
  } catch (err) {
    throw Errors.badRequest(`unable to decode the protobuf ${what}: ${(err as Error).message}`);
  }
}

/**
 * Decodes a protobuf request body to the JSON-shaped object it stands for; anything that is not a well-formed
 * body of a known kind is a 400.
 */
export function decodeProtobuf(body: Buffer): Json {
  if (body.length < PROTOBUF_MAGIC.length || !body.subarray(0, PROTOBUF_MAGIC.length).equals(PROTOBUF_MAGIC)) {
    throw Errors.badRequest('the protobuf request body does not start with the Kubernetes protobuf prefix "k8s\\x00"');
  }
  const envelope = decodeMessage(UNKNOWN, body.subarray(PROTOBUF_MAGIC.length), 'envelope (runtime.Unknown)');
  const typeMeta = (envelope.typeMeta ?? {}) as Plain;
  const apiVersion = typeof typeMeta.apiVersion === 'string' ? typeMeta.apiVersion : '';
  const kind = typeof typeMeta.kind === 'string' ? typeMeta.kind : '';
  if (envelope.contentEncoding)
    throw Errors.badRequest(`unsupported protobuf content encoding ${JSON.stringify(envelope.contentEncoding)}`);
  const contentType = typeof envelope.contentType === 'string' ? envelope.contentType : '';
  if (contentType !== '' && contentType !== 'application/vnd.kubernetes.protobuf') {
    throw Errors.badRequest(`unsupported content type ${JSON.stringify(contentType)} inside the protobuf envelope`);
  }
  if (!kind) throw Errors.badRequest('the protobuf envelope does not name a kind');
  // DeleteOptions is registered in every group version, so it may arrive under any of them.
  const typeName = KINDS[`${apiVersion}/${kind}`] ?? (kind === 'DeleteOptions' ? `${META}.DeleteOptions` : undefined);
  if (!typeName)
    throw Errors.badRequest(`no kind "${kind}" is registered for version "${apiVersion}" in the protobuf decoder`);
  const raw = envelope.raw instanceof Uint8Array ? envelope.raw : new Uint8Array(0);
  let object: Json;
  try {
    object = convert(typeName, decodeMessage(typeName, raw, `${kind} object`));
  } catch (err) {
    if (err instanceof ApiError) throw err;
    // e.g. a Time too far out for a Date
    throw Errors.badRequest(`unable to convert the protobuf ${kind} object: ${(err as Error).message}`);
  }
  return { kind, apiVersion, ...(object as { [key: string]: Json }) };
}

const isZero = (v: unknown): boolean =>
  v === '' || v === 0 || v === false || (v instanceof Uint8Array && v.length === 0);

function base64(v: unknown): string {
  return v instanceof Uint8Array ? Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') : '';
}

function scalar(type: string, v: unknown): Json {
  if (type === 'bytes') return base64(v);
  return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? v : null;
}

/** RFC 3339 in UTC, as metav1.Time (whole seconds: its protobuf decoding drops nanos) or MicroTime writes it. */
function time(v: Plain, micro: boolean): Json {
  // The zero time is marshalled as an empty message, and is null in JSON.
  if (v.seconds === undefined && v.nanos === undefined) return null;
  const seconds = Number(v.seconds ?? 0);
  const iso = new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/, '');
  if (!micro) return `${iso}Z`;
  const micros = Math.floor(Number(v.nanos ?? 0) / 1000);
  return `${iso}.${String(micros).padStart(6, '0')}Z`;
}

/** The JSON a RawExtension or FieldsV1 carries (what Go clients put there: ControllerRevision data, managedFields). */
function rawJson(v: Plain, what: string): Json {
  const raw = v.raw ?? v.Raw;
  if (!(raw instanceof Uint8Array) || raw.length === 0) return null;
  const bytes = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  try {
    // parseJson bounds the nesting depth, as for JSON bodies.
    return parseJson(bytes.toString('utf8')) as Json;
  } catch (err) {
    throw Errors.badRequest(`the ${what} in the protobuf body is not valid JSON: ${(err as Error).message}`);
  }
}

function convert(typeName: string, value: Plain): Json {
  switch (typeName) {
    case TIME:
      return time(value, false);
    case MICRO_TIME:
      return time(value, true);
    case QUANTITY:
      return typeof value.string === 'string' ? value.string : '0';
    case INT_OR_STRING:
      return value.type === 1 ? String(value.strVal ?? '') : Number(value.intVal ?? 0);
    case RAW_EXTENSION:
      return rawJson(value, 'RawExtension');
    case FIELDS_V1:
      return rawJson(value, 'FieldsV1');
  }
  // Go slice types (ExtraValue is []string) travel as a message with one repeated field.
  if (typeName.endsWith('.ExtraValue')) return Array.isArray(value.items) ? (value.items as Json[]) : [];
  const specs = schema().fields.get(typeName) ?? [];
  const out: { [key: string]: Json } = {};
  for (const [name, , type, flags = '', json = name] of specs) {
    const v = value[name];
    if (v === undefined || v === null) continue;
    const message = type.includes('.');
    const map = /^map<(.+)>$/.exec(type);
    if (map) {
      const valueType = map[1]!;
      const entries: { [key: string]: Json } = {};
      for (const [k, item] of Object.entries(v as Plain)) {
        entries[k] = valueType.includes('.') ? convert(valueType, item as Plain) : scalar(valueType, item);
      }
      out[json] = entries;
    } else if (flags.includes('r')) {
      out[json] = (v as unknown[]).map((item) => (message ? convert(type, item as Plain) : scalar(type, item)));
    } else if (message) {
      const converted = convert(type, v as Plain);
      // Go's ",inline" (Volume's VolumeSource, Probe's ProbeHandler …) flattens the member into its parent.
      if (flags.includes('i') && converted !== null && typeof converted === 'object' && !Array.isArray(converted))
        Object.assign(out, converted);
      else out[json] = converted;
    } else {
      // Go writes every non-pointer field; JSON drops the zero ones unless the field is a pointer or has no omitempty.
      if (isZero(v) && !flags.includes('p') && !flags.includes('k')) continue;
      out[json] = scalar(type, v);
    }
  }
  return out;
}
