import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type protobufjs from 'protobufjs';
import { yaml } from '../api/yaml.js';
import { isPlainObject } from '../api/types.js';
import type { Registry } from '../registry/registry.js';
import { KUBERNETES_VERSION } from '../api/version.js';
import type { OpenApi } from './openapi.js';

/**
 * OpenAPI v2 (Swagger 2.0) at /openapi/v2, as JSON or in gnostic's protobuf encoding. kubectl 1.27 and 1.28 fetch
 * it (protobuf only) before every apply, create, patch and explain, and give up when it is missing; later kubectl
 * reads /openapi/v3. So this document is the v3 group-version documents rewritten in v2's dialect: one source for
 * paths and schemas, `#/definitions/` for `#/components/schemas/`, parameters and bodies in v2's shape.
 */
/** What the protobuf form is answered as: kube-openapi's name for it (Go's mime parser, like fastify's, refuses '@'). */
export const OPENAPI_V2_PROTOBUF = 'application/com.github.proto-openapi.spec.v2.v1.0+protobuf';
/** What clients ask for it as: kubectl still sends the older name, with '@'. */
export const OPENAPI_V2_PROTOBUF_ACCEPTED = [
  'application/com.github.proto-openapi.spec.v2@v1.0+protobuf',
  OPENAPI_V2_PROTOBUF,
];

const V3_REF = '#/components/schemas/';
const V2_REF = '#/definitions/';
const PRODUCES = ['application/json', 'application/yaml', 'application/vnd.kubernetes.protobuf'];
const OPERATIONS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch'] as const;

type Json = Record<string, unknown>;

/** A v3 schema in v2's dialect: plain `$ref`s (v3 wraps them in allOf to give them siblings), no oneOf/anyOf/nullable. */
function schemaV2(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(schemaV2);
  if (!isPlainObject(schema)) return schema;
  const out: Json = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === '$ref' && typeof value === 'string') out.$ref = value.replace(V3_REF, V2_REF);
    else if (
      key === 'allOf' &&
      Array.isArray(value) &&
      value.length === 1 &&
      isPlainObject(value[0]) &&
      typeof value[0].$ref === 'string'
    ) {
      out.$ref = value[0].$ref.replace(V3_REF, V2_REF);
    } else if (key === 'oneOf' || key === 'anyOf' || key === 'nullable') {
      // Quantity and IntOrString are oneOf in v3; v2 (as kube-apiserver publishes it) calls both a string.
      if (key === 'oneOf' && out.type === undefined) out.type = 'string';
    } else if (key === 'properties' && isPlainObject(value)) {
      out.properties = Object.fromEntries(Object.entries(value).map(([name, s]) => [name, schemaV2(s)]));
    } else if (key === 'items' || key === 'additionalProperties' || key === 'not') out[key] = schemaV2(value);
    else out[key] = value;
  }
  // A reference carries nothing else in v2 but its description; the zero default v3 adds to it goes.
  if (typeof out.$ref === 'string')
    return out.description === undefined ? { $ref: out.$ref } : { description: out.description, $ref: out.$ref };
  return out;
}

/** A v3 parameter ({schema: {type}}) as a v2 one (type beside the name). */
function parameterV2(p: unknown): Json {
  const param = isPlainObject(p) ? p : {};
  const { schema, ...rest } = param;
  return { ...(isPlainObject(schema) ? schema : {}), ...rest };
}

function operationV2(op: Json): Json {
  const out: Json = {};
  const requestBody = isPlainObject(op.requestBody) ? op.requestBody : undefined;
  const bodyContent = isPlainObject(requestBody?.content) ? requestBody.content : {};
  for (const [key, value] of Object.entries(op)) {
    if (key === 'requestBody') continue;
    if (key === 'parameters' && Array.isArray(value)) {
      const params = value.map(parameterV2);
      const [bodySchema] = Object.values(bodyContent).map((c) => (isPlainObject(c) ? c.schema : undefined));
      if (bodySchema) params.unshift({ name: 'body', in: 'body', required: true, schema: schemaV2(bodySchema) });
      out.parameters = params;
    } else if (key === 'responses' && isPlainObject(value)) {
      out.responses = Object.fromEntries(
        Object.entries(value).map(([code, r]) => {
          const response = isPlainObject(r) ? r : {};
          const [schema] = Object.values(isPlainObject(response.content) ? response.content : {}).map((c) =>
            isPlainObject(c) ? c.schema : undefined,
          );
          return [
            code,
            schema
              ? { description: response.description, schema: schemaV2(schema) }
              : { description: response.description },
          ];
        }),
      );
    } else out[key] = value;
  }
  out.consumes = Object.keys(bodyContent).length > 0 ? Object.keys(bodyContent) : ['*/*'];
  out.produces = PRODUCES;
  out.schemes = ['https'];
  return out;
}

function pathItemV2(item: Json): Json {
  const out: Json = {};
  for (const [key, value] of Object.entries(item)) {
    if (key === 'parameters' && Array.isArray(value)) out.parameters = value.map(parameterV2);
    else if ((OPERATIONS as readonly string[]).includes(key) && isPlainObject(value)) out[key] = operationV2(value);
    else out[key] = value;
  }
  return out;
}

// gnostic's openapi_v2 messages (github.com/google/gnostic/openapiv2/OpenAPIv2.proto), as far as this document
// uses them; field numbers as in that file. Only the encoder reads this, once, on the first protobuf request.
const GNOSTIC_PROTO = `
syntax = "proto3";
package openapi.v2;
message Any { string yaml = 2; }
message NamedAny { string name = 1; Any value = 2; }
message Info { string title = 1; string version = 2; string description = 3; }
message Document {
  string swagger = 1; Info info = 2; string host = 3; string base_path = 4; repeated string schemes = 5;
  repeated string consumes = 6; repeated string produces = 7; Paths paths = 8; Definitions definitions = 9;
  repeated NamedAny vendor_extension = 16;
}
message Definitions { repeated NamedSchema additional_properties = 1; }
message NamedSchema { string name = 1; Schema value = 2; }
message Properties { repeated NamedSchema additional_properties = 1; }
message TypeItem { repeated string value = 1; }
message ItemsItem { repeated Schema schema = 1; }
message AdditionalPropertiesItem { oneof oneof { Schema schema = 1; bool boolean = 2; } }
message Schema {
  string _ref = 1; string format = 2; string title = 3; string description = 4; Any default = 5;
  double multiple_of = 6; double maximum = 7; bool exclusive_maximum = 8; double minimum = 9; bool exclusive_minimum = 10;
  int64 max_length = 11; int64 min_length = 12; string pattern = 13; int64 max_items = 14; int64 min_items = 15;
  bool unique_items = 16; int64 max_properties = 17; int64 min_properties = 18; repeated string required = 19;
  repeated Any enum = 20; AdditionalPropertiesItem additional_properties = 21; TypeItem type = 22; ItemsItem items = 23;
  repeated Schema all_of = 24; Properties properties = 25; bool read_only = 27; Any example = 30;
  repeated NamedAny vendor_extension = 31;
}
message Paths { repeated NamedAny vendor_extension = 1; repeated NamedPathItem path = 2; }
message NamedPathItem { string name = 1; PathItem value = 2; }
message PathItem {
  string _ref = 1; Operation get = 2; Operation put = 3; Operation post = 4; Operation delete = 5; Operation options = 6;
  Operation head = 7; Operation patch = 8; repeated ParametersItem parameters = 9; repeated NamedAny vendor_extension = 10;
}
message Operation {
  repeated string tags = 1; string summary = 2; string description = 3; string operation_id = 5; repeated string produces = 6;
  repeated string consumes = 7; repeated ParametersItem parameters = 8; Responses responses = 9; repeated string schemes = 10;
  bool deprecated = 11; repeated NamedAny vendor_extension = 13;
}
message ParametersItem { oneof oneof { Parameter parameter = 1; JsonReference json_reference = 2; } }
message JsonReference { string _ref = 1; string description = 2; }
message Parameter { oneof oneof { BodyParameter body_parameter = 1; NonBodyParameter non_body_parameter = 2; } }
message BodyParameter { string description = 1; string name = 2; string in = 3; bool required = 4; Schema schema = 5; }
message NonBodyParameter {
  oneof oneof { QueryParameterSubSchema query_parameter_sub_schema = 3; PathParameterSubSchema path_parameter_sub_schema = 4; }
}
message QueryParameterSubSchema {
  bool required = 1; string in = 2; string description = 3; string name = 4; string type = 6; bool unique_items = 20;
}
message PathParameterSubSchema { bool required = 1; string in = 2; string description = 3; string name = 4; string type = 5; bool unique_items = 19; }
message Responses { repeated NamedResponseValue response_code = 1; }
message NamedResponseValue { string name = 1; ResponseValue value = 2; }
message ResponseValue { oneof oneof { Response response = 1; JsonReference json_reference = 2; } }
message Response { string description = 1; SchemaItem schema = 2; }
message SchemaItem { oneof oneof { Schema schema = 1; } }
`;

/** A value gnostic keeps as YAML text (extensions, defaults, enum members). */
const anyOf = (value: unknown): Json => ({ yaml: yaml().stringify(value) });

function extensions(obj: Json): Json[] {
  return Object.entries(obj)
    .filter(([key]) => key.startsWith('x-'))
    .map(([name, value]) => ({ name, value: anyOf(value) }));
}

/** A v2 schema as gnostic's Schema message. */
function gnosticSchema(s: unknown): Json {
  const schema = isPlainObject(s) ? s : {};
  const out: Json = {};
  if (typeof schema.$ref === 'string') out._ref = schema.$ref;
  for (const key of ['format', 'title', 'description', 'pattern'] as const)
    if (typeof schema[key] === 'string') out[key] = schema[key];
  for (const [json, proto] of [
    ['maximum', 'maximum'],
    ['minimum', 'minimum'],
    ['maxLength', 'max_length'],
    ['minLength', 'min_length'],
    ['maxItems', 'max_items'],
    ['minItems', 'min_items'],
    ['maxProperties', 'max_properties'],
    ['minProperties', 'min_properties'],
    ['multipleOf', 'multiple_of'],
  ] as const) {
    if (typeof schema[json] === 'number') out[proto] = schema[json];
  }
  for (const [json, proto] of [
    ['uniqueItems', 'unique_items'],
    ['exclusiveMaximum', 'exclusive_maximum'],
    ['exclusiveMinimum', 'exclusive_minimum'],
    ['readOnly', 'read_only'],
  ] as const) {
    if (typeof schema[json] === 'boolean') out[proto] = schema[json];
  }
  if (schema.default !== undefined) out.default = anyOf(schema.default);
  if (Array.isArray(schema.required)) out.required = schema.required.filter((r) => typeof r === 'string');
  if (Array.isArray(schema.enum)) out.enum = schema.enum.map(anyOf);
  if (typeof schema.type === 'string') out.type = { value: [schema.type] };
  if (isPlainObject(schema.items)) out.items = { schema: [gnosticSchema(schema.items)] };
  if (Array.isArray(schema.allOf)) out.all_of = schema.allOf.map(gnosticSchema);
  if (isPlainObject(schema.properties))
    out.properties = {
      additional_properties: Object.entries(schema.properties).map(([name, v]) => ({ name, value: gnosticSchema(v) })),
    };
  if (isPlainObject(schema.additionalProperties))
    out.additional_properties = { schema: gnosticSchema(schema.additionalProperties) };
  else if (typeof schema.additionalProperties === 'boolean')
    out.additional_properties = { boolean: schema.additionalProperties };
  const ext = extensions(schema);
  if (ext.length > 0) out.vendor_extension = ext;
  return out;
}

function gnosticParameter(p: Json): Json {
  if (p.in === 'body')
    return {
      parameter: {
        body_parameter: {
          name: p.name,
          in: 'body',
          required: p.required === true,
          schema: gnosticSchema(p.schema),
          ...(typeof p.description === 'string' ? { description: p.description } : {}),
        },
      },
    };
  const sub: Json = {
    name: p.name,
    in: p.in,
    required: p.required === true,
    type: p.type,
    unique_items: p.uniqueItems === true,
  };
  if (typeof p.description === 'string') sub.description = p.description;
  return {
    parameter: {
      non_body_parameter: p.in === 'path' ? { path_parameter_sub_schema: sub } : { query_parameter_sub_schema: sub },
    },
  };
}

function gnosticOperation(op: Json): Json {
  const out: Json = {};
  for (const key of ['tags', 'produces', 'consumes', 'schemes'] as const)
    if (Array.isArray(op[key])) out[key] = op[key];
  if (typeof op.description === 'string') out.description = op.description;
  if (typeof op.operationId === 'string') out.operation_id = op.operationId;
  if (Array.isArray(op.parameters)) out.parameters = op.parameters.map((p) => gnosticParameter(p as Json));
  if (isPlainObject(op.responses)) {
    out.responses = {
      response_code: Object.entries(op.responses).map(([name, r]) => {
        const response = r as Json;
        return {
          name,
          value: {
            response: {
              description: response.description ?? '',
              ...(response.schema ? { schema: { schema: gnosticSchema(response.schema) } } : {}),
            },
          },
        };
      }),
    };
  }
  const ext = extensions(op);
  if (ext.length > 0) out.vendor_extension = ext;
  return out;
}

function gnosticDocument(doc: Json): Json {
  const paths = isPlainObject(doc.paths) ? doc.paths : {};
  const definitions = isPlainObject(doc.definitions) ? doc.definitions : {};
  return {
    swagger: doc.swagger,
    info: doc.info,
    paths: {
      path: Object.entries(paths).map(([name, item]) => {
        const value: Json = {};
        for (const [key, v] of Object.entries(item as Json)) {
          if (key === 'parameters' && Array.isArray(v)) value.parameters = v.map((p) => gnosticParameter(p as Json));
          else if ((OPERATIONS as readonly string[]).includes(key)) value[key] = gnosticOperation(v as Json);
        }
        return { name, value };
      }),
    },
    definitions: {
      additional_properties: Object.entries(definitions).map(([name, s]) => ({ name, value: gnosticSchema(s) })),
    },
  };
}

let documentType: protobufjs.Type | undefined;
function gnosticDocumentType(): protobufjs.Type {
  if (documentType) return documentType;
  // protobufjs (with its .proto parser) is loaded on the first protobuf request only, as for protobuf bodies.
  const protobuf = createRequire(import.meta.url)('protobufjs') as typeof protobufjs;
  documentType = protobuf.parse(GNOSTIC_PROTO, { keepCase: true }).root.lookupType('openapi.v2.Document');
  return documentType;
}

/** The /openapi/v2 document of every group-version served, in JSON and protobuf, each made once per registry state. */
export class OpenApiV2 {
  private swaggerDoc?: Json;
  private json?: { text: string; etag: string };
  private protobuf?: { bytes: Buffer; etag: string };

  constructor(
    private readonly registry: Registry,
    private readonly v3: OpenApi,
  ) {
    registry.onChange(() => {
      this.swaggerDoc = undefined;
      this.json = undefined;
      this.protobuf = undefined;
    });
  }

  /** The Swagger document both encodings are made from, built once per registry state. */
  private swagger(): Json {
    this.swaggerDoc ??= this.buildSwagger();
    return this.swaggerDoc;
  }

  private buildSwagger(): Json {
    const paths: Json = {};
    const definitions: Json = {};
    for (const g of this.registry.groupVersions()) {
      const path = g.group === '' ? `api/${g.version}` : `apis/${g.group}/${g.version}`;
      const v3 = JSON.parse(this.v3.document(path)!.text) as {
        paths: Record<string, Json>;
        components: { schemas: Record<string, unknown> };
      };
      for (const [p, item] of Object.entries(v3.paths)) paths[p] = pathItemV2(item);
      for (const [name, schema] of Object.entries(v3.components.schemas)) definitions[name] ??= schemaV2(schema);
    }
    const sortedDefinitions = Object.fromEntries(
      Object.keys(definitions)
        .sort()
        .map((k) => [k, definitions[k]]),
    );
    return {
      swagger: '2.0',
      info: { title: 'Kubernetes', version: KUBERNETES_VERSION.gitVersion },
      paths,
      definitions: sortedDefinitions,
    };
  }

  document(): { text: string; etag: string } {
    if (this.json) return this.json;
    const text = JSON.stringify(this.swagger());
    this.json = { text, etag: etagOf(text) };
    return this.json;
  }

  protobufDocument(): { bytes: Buffer; etag: string } {
    if (this.protobuf) return this.protobuf;
    const type = gnosticDocumentType();
    const bytes = Buffer.from(type.encode(type.fromObject(gnosticDocument(this.swagger()))).finish());
    this.protobuf = { bytes, etag: etagOf(bytes) };
    return this.protobuf;
  }
}

function etagOf(content: string | Buffer): string {
  return `"${createHash('sha512').update(content).digest('hex').toUpperCase()}"`;
}
