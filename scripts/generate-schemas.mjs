#!/usr/bin/env node
// Regenerates src/api/schema/builtin-schemas.json, the facts behind the served OpenAPI v3 documents,
// `kubectl explain`, field validation and strategic merge patch: for every type reachable from the built-in
// kinds, its Go-qualified name, description, fields (JSON name, type, description, enum values) and required
// fields. Nothing here is copied from Kubernetes: it is read from two npm packages the project installs as
// devDependencies:
//   - kubernetes-models (and @kubernetes-models/apimachinery): one .d.ts per type, whose folder gives the Go
//     package, whose JSDoc gives the descriptions (with "Possible enum values"), whose string-literal unions give
//     enums and whose optional marks give `required`;
//   - @kubernetes/client-node: getAttributeTypeMap() of its generated models gives the integer formats
//     (int32/int64) the .d.ts files flatten to `number`.
// Patch strategies, merge keys and list types are not in either package: they live in the hand-written table
// src/api/schema/patch-meta.ts, merged in at run time.
//
// Usage: node scripts/generate-schemas.mjs  (writes the JSON; `npm run generate:schemas`)
import { readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const MODELS = join(ROOT, 'node_modules/kubernetes-models');
const APIMACHINERY = join(ROOT, 'node_modules/@kubernetes-models/apimachinery');
const OUT = join(ROOT, 'src/api/schema/builtin-schemas.json');

/** The group-versions whose kinds are described (served today or likely to be soon). */
const ROOT_GROUP_VERSIONS = new Set([
  'v1',
  'apps/v1',
  'batch/v1',
  'autoscaling/v1',
  'autoscaling/v2',
  'policy/v1',
  'networking.k8s.io/v1',
  'rbac.authorization.k8s.io/v1',
  'coordination.k8s.io/v1',
  'events.k8s.io/v1',
  'authorization.k8s.io/v1',
  'authentication.k8s.io/v1',
  'discovery.k8s.io/v1',
  'scheduling.k8s.io/v1',
  'storage.k8s.io/v1',
  'node.k8s.io/v1',
  'admissionregistration.k8s.io/v1',
  'apiregistration.k8s.io/v1',
  'certificates.k8s.io/v1',
  'flowcontrol.apiserver.k8s.io/v1',
]);
/** Meta types every group-version document carries. */
const EXTRA_ROOTS = [
  'io.k8s.apimachinery.pkg.apis.meta.v1.Status',
  'io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions',
  'io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent',
  'io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList',
];

function walk(dir, out = []) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== '_schemas' && entry.name !== 'node_modules') walk(path, out);
    } else if (entry.name.endsWith('.d.ts') && entry.name !== 'index.d.ts') out.push(path);
  }
  return out;
}

/** Go-qualified schema name for a .d.ts file (the name kube-apiserver's OpenAPI uses). */
function goName(file) {
  if (file.startsWith(APIMACHINERY)) {
    const rel = relative(APIMACHINERY, file)
      .replace(/\.d\.ts$/, '')
      .split('/');
    return `io.k8s.apimachinery.pkg.${rel.join('.')}`;
  }
  const rel = relative(MODELS, file)
    .replace(/\.d\.ts$/, '')
    .split('/');
  if (rel.length === 2) return `io.k8s.api.core.${rel[0]}.${rel[1]}`;
  const [group, version, name] = rel;
  if (group === 'apiextensions.k8s.io')
    return `io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.${version}.${name}`;
  if (group === 'apiregistration.k8s.io') return `io.k8s.kube-aggregator.pkg.apis.apiregistration.${version}.${name}`;
  return `io.k8s.api.${group.split('.')[0]}.${version}.${name}`;
}

function jsdoc(lines) {
  return lines
    .map((l) => l.replace(/^\s*\/?\*\*?\/?\s?/, '').replace(/\s*\*\/\s*$/, ''))
    .join('\n')
    .replace(/\*\\\//g, '*/')
    .trim();
}

/** Parses `export interface IName [extends TypeMeta] { ... }` (and `export declare type IName = ...`) of one file. */
function parseFile(file) {
  const text = readFileSync(file, 'utf8');
  const aliasMatch = /export (?:type )?\{ I(\w+) as (I\w+)/.exec(text);
  if (!aliasMatch) return undefined;
  const alias = aliasMatch[2];
  const lines = text.split('\n');
  let i = 0;
  let pendingDoc = [];
  let typeDoc = '';
  for (; i < lines.length; i++) {
    const line = lines[i];
    if (/^\/\*\*/.test(line)) {
      pendingDoc = [];
      for (; i < lines.length; i++) {
        pendingDoc.push(lines[i]);
        if (lines[i].includes('*/')) break;
      }
      continue;
    }
    const iface = /^export interface I\w+( extends TypeMeta)? \{/.exec(line);
    if (iface) {
      typeDoc = jsdoc(pendingDoc);
      const props = [];
      let doc = [];
      for (i++; i < lines.length && !/^\}/.test(lines[i]); i++) {
        const l = lines[i];
        if (/^\s*\/\*\*/.test(l)) {
          doc = [];
          for (; i < lines.length; i++) {
            doc.push(lines[i]);
            if (lines[i].includes('*/')) break;
          }
          continue;
        }
        const m = /^\s*"([^"]+)"(\?)?: (.*)$/.exec(l);
        if (!m) continue;
        let type = m[3];
        let depth = (type.match(/\{/g) ?? []).length - (type.match(/\}/g) ?? []).length;
        while (depth > 0 || !/;\s*$/.test(type)) {
          const next = lines[++i];
          type += ` ${next.trim()}`;
          depth += (next.match(/\{/g) ?? []).length - (next.match(/\}/g) ?? []).length;
          if (depth <= 0 && /;\s*$/.test(next)) break;
        }
        props.push({ name: m[1], optional: m[2] === '?', type: type.replace(/;\s*$/, '').trim(), doc: jsdoc(doc) });
        doc = [];
      }
      return { alias, file, doc: typeDoc, typeMeta: iface[1] !== undefined, props };
    }
    const scalar = /^export declare type I\w+ = (.*);$/.exec(line);
    if (scalar) return { alias, file, doc: jsdoc(pendingDoc), scalar: scalar[1], props: [] };
    if (!/^\s*$/.test(line) && !/^import /.test(line)) pendingDoc = [];
  }
  return undefined;
}

const parsed = new Map(); // alias -> parsed file
for (const file of [...walk(MODELS), ...walk(APIMACHINERY)]) {
  const p = parseFile(file);
  if (p) parsed.set(p.alias, p);
}
const nameOfAlias = (alias) => {
  const p = parsed.get(alias);
  return p ? goName(p.file) : undefined;
};

// ---- integer formats from @kubernetes/client-node ---------------------------------------------------------
const clientNode = await import('@kubernetes/client-node');
function pascal(s) {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
function clientModel(name, props) {
  const parts = name.split('.');
  const short = parts[parts.length - 1];
  const version = parts[parts.length - 2];
  const pkg = parts[parts.length - 3];
  const candidates = [`${pascal(version)}${short}`, `${pascal(pkg)}${pascal(version)}${short}`];
  if (pkg === 'core') candidates.push(`Core${pascal(version)}${short}`);
  for (const c of candidates) {
    const model = clientNode[c];
    if (typeof model?.getAttributeTypeMap !== 'function') continue;
    const map = model.getAttributeTypeMap();
    const names = new Set(map.map((a) => a.baseName));
    if (props.every((p) => names.has(p.name) || p.name === 'apiVersion' || p.name === 'kind') || props.length === 0)
      return map;
  }
  return undefined;
}

// ---- type expressions ------------------------------------------------------------------------------------
/** Compact type: "string", "boolean", "integer:int32", "number:double", "@<schema>", "[]<type>", "{}<type>", "object". */
function compactType(expr, propName, attr) {
  expr = expr.trim();
  let m;
  if ((m = /^Array<(.*)>$/.exec(expr)))
    return `[]${compactType(m[1], propName, attr && { ...attr, type: attr.type.replace(/^Array<(.*)>$/, '$1') })}`;
  if ((m = /^\{ \[key: string\]: (.*?);? \}$/.exec(expr)))
    return `{}${compactType(m[1], propName, attr && { ...attr, type: attr.type.replace(/^\{ \[key: string\]: (.*); \}$/, '$1') })}`;
  if (/^"[^"]*"( \| "[^"]*")*$/.test(expr)) return 'string';
  if (expr === 'string') return attr?.format === 'byte' ? 'string:byte' : 'string';
  if (expr === 'boolean') return 'boolean';
  if (expr === 'number') {
    if (attr?.format === 'double' || attr?.format === 'float') return `number:${attr.format}`;
    return `integer:${attr?.format === 'int64' ? 'int64' : 'int32'}`;
  }
  if ((m = /^(IIoK8s\w+)$/.exec(expr))) {
    const target = nameOfAlias(m[1]);
    if (!target) throw new Error(`unresolved type ${expr} of ${propName}`);
    return `@${target}`;
  }
  if (expr === 'any' || expr === 'object' || expr === '{}') return 'object';
  if (expr.startsWith('{')) {
    // An object type written inline (a kind embedded with optional apiVersion/kind, e.g. volumeClaimTemplates):
    // the model whose fields have the same names and types.
    const fields = [...expr.matchAll(/"([^"]+)"\??: ([^;]+);/g)]
      .map((x) => `${x[1]}:${x[2].trim()}`)
      .sort()
      .join(',');
    for (const [name, p] of byName) {
      const own = p.props
        .map((x) => `${x.name}:${x.name === 'apiVersion' || x.name === 'kind' ? 'string' : x.type}`)
        .sort()
        .join(',');
      if (own === fields) return `@${name}`;
    }
  }
  throw new Error(`unknown type expression ${expr} of ${propName}`);
}

function enumOf(expr) {
  const m = /^"[^"]*"( \| "[^"]*")*$/.exec(expr.trim());
  if (!m) return undefined;
  return [...expr.matchAll(/"([^"]*)"/g)].map((x) => x[1]);
}

const byName = new Map();
for (const p of parsed.values()) byName.set(goName(p.file), p);

const out = {};
const queue = [];
const gvks = [];
for (const p of parsed.values()) {
  if (!p.typeMeta) continue;
  const apiVersion = p.props.find((x) => x.name === 'apiVersion');
  const kind = p.props.find((x) => x.name === 'kind');
  const av = apiVersion && /^"(.*)"$/.exec(apiVersion.type)?.[1];
  const k = kind && /^"(.*)"$/.exec(kind.type)?.[1];
  if (!av || !k || !ROOT_GROUP_VERSIONS.has(av)) continue;
  gvks.push({ name: goName(p.file), av, kind: k });
  queue.push(goName(p.file));
}
queue.push(...EXTRA_ROOTS);

const STANDARD = {
  apiVersion:
    'APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources',
  kind: 'Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds',
};

const SCALARS = {
  'io.k8s.apimachinery.pkg.api.resource.Quantity': 'quantity',
  'io.k8s.apimachinery.pkg.util.intstr.IntOrString': 'int-or-string',
  'io.k8s.apimachinery.pkg.apis.meta.v1.Time': 'date-time',
  'io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime': 'date-time',
  'io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1': 'object',
  'io.k8s.apimachinery.pkg.runtime.RawExtension': 'object',
};

while (queue.length > 0) {
  const name = queue.shift();
  if (out[name]) continue;
  const p = byName.get(name);
  if (!p) throw new Error(`no model for ${name}`);
  if (SCALARS[name]) {
    out[name] = { d: p.doc, s: SCALARS[name] };
    continue;
  }
  if (p.scalar) throw new Error(`unexpected scalar type ${name}: ${p.scalar}`);
  const attrs = clientModel(name, p.props);
  const entry = { d: p.doc, p: [] };
  const required = [];
  for (const prop of p.props) {
    const attr = attrs?.find((a) => a.baseName === prop.name);
    let type;
    if (p.typeMeta && (prop.name === 'apiVersion' || prop.name === 'kind')) type = 'string';
    else type = compactType(prop.type, `${name}.${prop.name}`, attr);
    const field = [prop.name, type, prop.doc || (p.typeMeta ? (STANDARD[prop.name] ?? '') : '')];
    const values = p.typeMeta && (prop.name === 'apiVersion' || prop.name === 'kind') ? undefined : enumOf(prop.type);
    if (values) field.push(values);
    entry.p.push(field);
    if (!prop.optional && !(p.typeMeta && (prop.name === 'apiVersion' || prop.name === 'kind')))
      required.push(prop.name);
    for (const ref of type.matchAll(/@([\w.-]+)/g)) queue.push(ref[1]);
  }
  if (required.length > 0) entry.r = required;
  const gvk = gvks.find((g) => g.name === name);
  if (gvk) {
    const [group, version] = gvk.av.includes('/') ? gvk.av.split('/') : ['', gvk.av];
    entry.k = [group, version, gvk.kind];
  }
  out[name] = entry;
}

// Status, DeleteOptions and WatchEvent are served in every group-version as the shared meta kinds.
const sorted = Object.fromEntries(
  Object.keys(out)
    .sort()
    .map((k) => [k, out[k]]),
);
const header = {
  generatedBy: 'scripts/generate-schemas.mjs',
  from: `kubernetes-models ${JSON.parse(readFileSync(join(MODELS, 'package.json'), 'utf8')).version}, @kubernetes/client-node ${JSON.parse(readFileSync(join(ROOT, 'node_modules/@kubernetes/client-node/package.json'), 'utf8')).version}`,
  format:
    'types: name -> {d: description, p: [[json name, type, description, enum?]], r: required, k: [group, version, kind], s: scalar kind}; type: string | string:byte | boolean | integer:int32 | integer:int64 | number:double | object | @<type> | []<type> | {}<type>',
};
if (!existsSync(dirname(OUT))) throw new Error(`missing ${dirname(OUT)}`);
writeFileSync(OUT, `${JSON.stringify({ ...header, types: sorted })}\n`);
console.error(`wrote ${Object.keys(sorted).length} types to ${relative(ROOT, OUT)}`);
