#!/usr/bin/env node
// Regenerates schema.ts from a kubectl binary: the gzipped FileDescriptorProtos that client-go's generated
// code embeds give the field numbers and types, and the Go runtime type data (struct tags, pointer kinds) says
// how each field comes out in JSON. Usage: node src/server/protobuf/generate-schema.mjs /path/to/kubectl > schema.ts
import { readFileSync } from 'node:fs';
import { inflateRawSync } from 'node:zlib';
import descriptor from 'protobufjs/ext/descriptor/index.js';

const bin = readFileSync(process.argv[2]);

// ---- ELF sections --------------------------------------------------------------------------------------
const shoff = Number(bin.readBigUInt64LE(0x28));
const shentsize = bin.readUInt16LE(0x3a),
  shnum = bin.readUInt16LE(0x3c),
  shstrndx = bin.readUInt16LE(0x3e);
const sections = [];
for (let i = 0; i < shnum; i++) {
  const o = shoff + i * shentsize;
  sections.push({
    nameOff: bin.readUInt32LE(o),
    addr: Number(bin.readBigUInt64LE(o + 16)),
    off: Number(bin.readBigUInt64LE(o + 24)),
    size: Number(bin.readBigUInt64LE(o + 32)),
  });
}
const cstr = (o) => bin.toString('latin1', o, bin.indexOf(0, o));
for (const s of sections) s.name = cstr(sections[shstrndx].off + s.nameOff);
const section = (n) => sections.find((s) => s.name === n);
const v2o = (va) => {
  for (const s of sections) if (s.addr && va >= s.addr && va < s.addr + s.size) return va - s.addr + s.off;
  throw new Error(`address ${va.toString(16)} not in a section`);
};

// ---- embedded descriptors --------------------------------------------------------------------------------
const files = new Map();
const magic = Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0]);
for (let i = bin.indexOf(magic); i >= 0; i = bin.indexOf(magic, i + 1)) {
  let raw;
  try {
    // The deflate stream after the 10-byte gzip header (no optional fields): gunzip would fail on what follows it.
    raw = inflateRawSync(bin.subarray(i + 10, i + 2_000_000), { finishFlush: 2 });
  } catch {
    continue;
  }
  if (raw[0] !== 0x0a) continue;
  let fd;
  try {
    fd = descriptor.FileDescriptorProto.decode(raw);
  } catch {
    continue;
  }
  if (fd.name?.endsWith('generated.proto') && fd.name.startsWith('k8s.io/')) files.set(fd.name, fd);
}

// ---- Go runtime types ---------------------------------------------------------------------------------
const rodata = section('.rodata'),
  typelink = section('.typelink');
const typesBase = rodata.addr;
const u8 = (va) => bin[v2o(va)];
const i32 = (va) => bin.readInt32LE(v2o(va));
const u32 = (va) => bin.readUInt32LE(v2o(va));
const u64 = (va) => Number(bin.readBigUInt64LE(v2o(va)));
function varint(o) {
  let v = 0,
    sh = 0;
  for (;;) {
    const b = bin[o++];
    v += (b & 0x7f) * 2 ** sh;
    sh += 7;
    if (b < 0x80) return [v, o];
  }
}
function readName(va) {
  let o = v2o(va);
  const flags = bin[o];
  let n;
  [n, o] = varint(o + 1);
  const name = bin.toString('utf8', o, o + n);
  o += n;
  let tag = '';
  if (flags & 2) {
    [n, o] = varint(o);
    tag = bin.toString('utf8', o, o + n);
  }
  return { name, tag };
}
const kindOf = (t) => u8(t + 23) & 31;
const typeName = (t) => {
  const n = readName(typesBase + i32(t + 40)).name;
  return u8(t + 20) & 2 ? n.slice(1) : n;
};
const K = { Ptr: 22, Slice: 23, Array: 17, Map: 21, Struct: 25 };
function pkgPath(t) {
  if (!(u8(t + 20) & 1)) return undefined;
  const size = { [K.Struct]: 80, [K.Ptr]: 56, [K.Slice]: 56, [K.Array]: 72, [K.Map]: 88 }[kindOf(t)] ?? 48;
  return readName(typesBase + u32(t + size)).name;
}
const goStructs = new Map();
const seen = new Set();
const stack = [];
for (let o = typelink.off; o < typelink.off + typelink.size; o += 4) stack.push(typesBase + bin.readInt32LE(o));
while (stack.length) {
  const t = stack.pop();
  if (seen.has(t)) continue;
  seen.add(t);
  let k;
  try {
    k = kindOf(t);
  } catch {
    continue;
  }
  if (k === K.Ptr || k === K.Slice) stack.push(u64(t + 48));
  else if (k === K.Array || k === K.Map) stack.push(u64(t + 48), u64(t + 56));
  else if (k === K.Struct) {
    const fp = u64(t + 56),
      n = u64(t + 64);
    if (n > 10000) continue;
    const fields = [];
    for (let i = 0; i < n; i++) {
      const ft = u64(fp + 24 * i + 8);
      stack.push(ft);
      const { name, tag } = readName(u64(fp + 24 * i));
      fields.push({ name, tag, kind: kindOf(ft), type: typeName(ft) });
    }
    const pp = pkgPath(t);
    if (pp?.startsWith('k8s.io/')) goStructs.set(`${pp}.${typeName(t).split('.').pop()}`, fields);
  }
}

// ---- merge ----------------------------------------------------------------------------------------------
const messages = new Map(); // full proto name → { pkg, name, goPkg, fields }
for (const fd of files.values()) {
  const goPkg = fd.options?.goPackage ?? fd.name.replace(/\/generated\.proto$/, '');
  for (const m of fd.messageType)
    messages.set(`${fd.package}.${m.name}`, { pkg: fd.package, name: m.name, goPkg, desc: m });
}
const SCALARS = {
  1: 'double',
  2: 'float',
  3: 'int64',
  4: 'uint64',
  5: 'int32',
  8: 'bool',
  9: 'string',
  12: 'bytes',
  13: 'uint32',
  17: 'sint32',
  18: 'sint64',
};
function fieldType(f) {
  if (f.typeName) return f.typeName.replace(/^\./, '');
  const s = SCALARS[f.type];
  if (!s) throw new Error(`unhandled scalar type ${f.type} in ${f.name}`);
  return s;
}
function goField(goFields, f) {
  // Matched by field number: embedded structs (EphemeralContainerCommon) have no name= in their tag.
  return goFields?.find((g) => Number(/protobuf:"[a-z0-9]+,(\d+)/.exec(g.tag)?.[1]) === f.number);
}

// Kinds to start from: the served built-ins, what kubectl's typed commands post, and kinds `kubectl create` makes.
const ROOTS = process.argv.slice(3).length
  ? process.argv.slice(3)
  : [
      'k8s.io.api.core.v1.Namespace',
      'k8s.io.api.core.v1.Node',
      'k8s.io.api.core.v1.Pod',
      'k8s.io.api.core.v1.Service',
      'k8s.io.api.core.v1.Endpoints',
      'k8s.io.api.core.v1.ConfigMap',
      'k8s.io.api.core.v1.Secret',
      'k8s.io.api.core.v1.ServiceAccount',
      'k8s.io.api.core.v1.PersistentVolumeClaim',
      'k8s.io.api.core.v1.PersistentVolume',
      'k8s.io.api.core.v1.Event',
      'k8s.io.api.core.v1.ResourceQuota',
      'k8s.io.api.core.v1.LimitRange',
      'k8s.io.api.core.v1.PodTemplate',
      'k8s.io.api.core.v1.ReplicationController',
      'k8s.io.api.core.v1.Binding',
      'k8s.io.api.apps.v1.Deployment',
      'k8s.io.api.apps.v1.ReplicaSet',
      'k8s.io.api.apps.v1.StatefulSet',
      'k8s.io.api.apps.v1.DaemonSet',
      'k8s.io.api.apps.v1.ControllerRevision',
      'k8s.io.api.batch.v1.Job',
      'k8s.io.api.batch.v1.CronJob',
      'k8s.io.api.coordination.v1.Lease',
      'k8s.io.api.rbac.v1.Role',
      'k8s.io.api.rbac.v1.RoleBinding',
      'k8s.io.api.rbac.v1.ClusterRole',
      'k8s.io.api.rbac.v1.ClusterRoleBinding',
      'k8s.io.api.events.v1.Event',
      'k8s.io.api.policy.v1.Eviction',
      'k8s.io.api.policy.v1.PodDisruptionBudget',
      'k8s.io.api.authorization.v1.SelfSubjectAccessReview',
      'k8s.io.api.authorization.v1.SelfSubjectRulesReview',
      'k8s.io.api.authorization.v1.SubjectAccessReview',
      'k8s.io.api.authorization.v1.LocalSubjectAccessReview',
      'k8s.io.api.authentication.v1.TokenRequest',
      'k8s.io.api.authentication.v1.TokenReview',
      'k8s.io.api.authentication.v1.SelfSubjectReview',
      'k8s.io.api.networking.v1.Ingress',
      'k8s.io.api.scheduling.v1.PriorityClass',
      'k8s.io.api.autoscaling.v1.Scale',
      'k8s.io.api.autoscaling.v1.HorizontalPodAutoscaler',
      'k8s.io.api.networking.v1.IngressClass',
      'k8s.io.api.networking.v1.NetworkPolicy',
      'k8s.io.api.certificates.v1.CertificateSigningRequest',
      'k8s.io.api.discovery.v1.EndpointSlice',
      'k8s.io.api.admissionregistration.v1.MutatingWebhookConfiguration',
      'k8s.io.api.admissionregistration.v1.ValidatingWebhookConfiguration',
      'k8s.io.api.admissionregistration.v1.ValidatingAdmissionPolicy',
      'k8s.io.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding',
      'k8s.io.api.flowcontrol.v1.FlowSchema',
      'k8s.io.api.flowcontrol.v1.PriorityLevelConfiguration',
      'k8s.io.api.node.v1.RuntimeClass',
      'k8s.io.api.storage.v1.StorageClass',
      'k8s.io.api.storage.v1.CSIDriver',
      'k8s.io.api.storage.v1.CSINode',
      'k8s.io.api.storage.v1.CSIStorageCapacity',
      'k8s.io.api.storage.v1.VolumeAttachment',
      'k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions',
      'k8s.io.apimachinery.pkg.apis.meta.v1.Status',
      'k8s.io.apimachinery.pkg.runtime.Unknown',
    ];
const order = [];
const included = new Set();
const queue = [...ROOTS];
while (queue.length) {
  const name = queue.shift();
  if (included.has(name)) continue;
  const m = messages.get(name);
  if (!m) throw new Error(`no message ${name}`);
  included.add(name);
  order.push(name);
  for (const f of m.desc.field) {
    if (!f.typeName) continue;
    const t = f.typeName.replace(/^\./, '');
    const entry = m.desc.nestedType.find((n) => `${name}.${n.name}` === t && n.options?.mapEntry);
    if (entry) {
      const v = entry.field.find((x) => x.number === 2);
      if (v.typeName) queue.push(v.typeName.replace(/^\./, ''));
    } else queue.push(t);
  }
}

// Go types with their own JSON form (decode.ts converts them): their Go fields do not match the message.
const SPECIAL = new Set([
  'k8s.io.apimachinery.pkg.apis.meta.v1.Time',
  'k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime',
  'k8s.io.apimachinery.pkg.api.resource.Quantity',
  'k8s.io.api.authorization.v1.ExtraValue',
  'k8s.io.api.authentication.v1.ExtraValue',
  'k8s.io.api.certificates.v1.ExtraValue',
]);
const GROUPS = {
  core: '',
  apps: 'apps',
  batch: 'batch',
  coordination: 'coordination.k8s.io',
  rbac: 'rbac.authorization.k8s.io',
  events: 'events.k8s.io',
  policy: 'policy',
  authorization: 'authorization.k8s.io',
  authentication: 'authentication.k8s.io',
  networking: 'networking.k8s.io',
  scheduling: 'scheduling.k8s.io',
  autoscaling: 'autoscaling',
  certificates: 'certificates.k8s.io',
  discovery: 'discovery.k8s.io',
  admissionregistration: 'admissionregistration.k8s.io',
  flowcontrol: 'flowcontrol.apiserver.k8s.io',
  node: 'node.k8s.io',
  storage: 'storage.k8s.io',
};
const kinds = [];
for (const root of ROOTS) {
  const m = /^k8s\.io\.api\.([a-z]+)\.(v[0-9a-z]+)\.([A-Za-z]+)$/.exec(root);
  if (m)
    kinds.push(
      `  ${JSON.stringify(`${GROUPS[m[1]] ? `${GROUPS[m[1]]}/` : ''}${m[2]}/${m[3]}`)}: ${JSON.stringify(root)},`,
    );
  else if (root.endsWith('meta.v1.DeleteOptions'))
    kinds.push(`  "meta.k8s.io/v1/DeleteOptions": ${JSON.stringify(root)},`);
}
const warnings = [];
const out = new Map(); // pkg → lines
for (const name of order) {
  const m = messages.get(name);
  const goFields = goStructs.get(`${m.goPkg}.${m.name}`);
  if (!goFields && !SPECIAL.has(name)) warnings.push(`no Go struct for ${name}`);
  const lines = [];
  for (const f of m.desc.field) {
    const entry =
      f.typeName &&
      m.desc.nestedType.find((n) => `${name}.${n.name}` === f.typeName.replace(/^\./, '') && n.options?.mapEntry);
    let type;
    let flags = '';
    if (entry) {
      const key = entry.field.find((x) => x.number === 1),
        value = entry.field.find((x) => x.number === 2);
      if (fieldType(key) !== 'string') throw new Error(`non-string map key in ${name}.${f.name}`);
      type = `map<${fieldType(value)}>`;
    } else {
      type = fieldType(f);
      if (f.label === 3) flags += 'r';
    }
    const g = goField(goFields, f);
    let json = f.name;
    if (goFields && !g && !SPECIAL.has(name)) warnings.push(`no Go field for ${name}.${f.name}`);
    if (g) {
      const jt = /json:"([^"]*)"/.exec(g.tag)?.[1] ?? '';
      const [jn, ...opts] = jt.split(',');
      if (opts.includes('inline')) flags += 'i';
      else if (jn && jn !== '-' && jn !== f.name) json = jn;
      // A pointer is on the wire only when set, and so is kept even when zero; so is a value field without
      // omitempty. (Messages, lists and maps are kept whenever they are on the wire.)
      const plain = !f.typeName && f.label !== 3;
      if (plain && g.kind === K.Ptr) flags += 'p';
      else if (plain && !opts.includes('omitempty')) flags += 'k';
    }
    const tail =
      json !== f.name
        ? `, ${JSON.stringify(flags)}, ${JSON.stringify(json)}`
        : flags
          ? `, ${JSON.stringify(flags)}`
          : '';
    lines.push(`    [${JSON.stringify(f.name)}, ${f.number}, ${JSON.stringify(type)}${tail}],`);
  }
  if (!out.has(m.pkg)) out.set(m.pkg, []);
  out.get(m.pkg).push(`   ${JSON.stringify(m.name)}: [\n${lines.join('\n')}\n   ],`);
}
for (const w of warnings) process.stderr.write(`warning: ${w}\n`);
const body = [...out.entries()]
  .map(([pkg, msgs]) => `  ${JSON.stringify(pkg)}: {\n${msgs.join('\n')}\n  },`)
  .join('\n');
process.stdout.write(`// Generated by generate-schema.mjs from the protobuf descriptors and Go struct tags in ${process.argv[2].split('/').pop()}.
// Do not edit. Each field: [name, field number, type, flags, JSON name when not the name]; flags: r repeated,
// i inlined in the parent's JSON (Go ",inline"), p a Go pointer (kept when zero), k a Go value without omitempty
// (kept when zero). Types are protobuf scalars, map<value type> (string keys) or full message names.
export type FieldSpec = readonly [name: string, id: number, type: string, flags?: string, json?: string];

export const SCHEMA: Readonly<Record<string, Readonly<Record<string, readonly FieldSpec[]>>>> = {
${body}
};

/** apiVersion/kind → message, for the kinds a request body may carry. */
export const KINDS: Readonly<Record<string, string>> = {
${kinds.join('\n')}
};
`);
