import { rfc3339 } from '../../clock/clock.js';
import { Errors, FieldErrors, type StatusCause } from '../../api/errors.js';
import { deepCopy, deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { checkDns1123Subdomain, checkPathSegmentName } from '../../api/validation.js';
import { ageOf, col, humanDuration } from '../printers.js';
import type { KindInfo, StrategyContext } from '../types.js';
import { UNAUTHENTICATED_ADMIN } from './authorization.js';

/**
 * certificates.k8s.io/v1 CertificateSigningRequest: stored with its requester's identity, validated as kube-apiserver
 * does, approved or denied through /approval (`kubectl certificate approve|deny`); issuing is a signer's work.
 */
type Obj = Record<string, unknown>;

const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});

const USAGES = [
  'any',
  'cert sign',
  'client auth',
  'code signing',
  'content commitment',
  'crl sign',
  'data encipherment',
  'decipher only',
  'digital signature',
  'email protection',
  'encipher only',
  'ipsec end system',
  'ipsec tunnel',
  'ipsec user',
  'key agreement',
  'key encipherment',
  'microsoft sgc',
  'netscape sgc',
  'ocsp signing',
  's/mime',
  'server auth',
  'signing',
  'timestamping',
];
const CONDITION_STATUSES = ['False', 'True', 'Unknown'];
const APPROVAL_TYPES = ['Approved', 'Denied'];

/** Go's %#v of a []byte, as field.Invalid renders a CSR's request. */
function goBytes(bytes: Buffer): string {
  return `[]byte{${[...bytes].map((b) => `0x${b.toString(16)}`).join(', ')}}`;
}

/** The first DER element's length covers the data: enough to tell a request from garbage without an X.509 parser. */
function derProblem(der: Buffer): string | undefined {
  if (der.length < 2 || der[0] !== 0x30) return "asn1: structure error: tags don't match";
  let length = der[1]!;
  let offset = 2;
  if (length & 0x80) {
    const bytes = length & 0x7f;
    if (bytes === 0 || bytes > 4 || der.length < 2 + bytes) return 'asn1: syntax error: data truncated';
    length = 0;
    for (let i = 0; i < bytes; i++) length = length * 256 + der[2 + i]!;
    offset = 2 + bytes;
  }
  return offset + length > der.length ? 'asn1: syntax error: data truncated' : undefined;
}

/** ParseCSR: a PEM CERTIFICATE REQUEST block whose DER parses. */
function requestProblem(request: unknown): { bytes: Buffer; problem?: string } {
  const bytes = typeof request === 'string' ? Buffer.from(request, 'base64') : Buffer.alloc(0);
  const pem = /-----BEGIN ([A-Z ]+)-----\r?\n([\s\S]*?)-----END \1-----/.exec(bytes.toString('latin1'));
  if (pem?.[1] !== 'CERTIFICATE REQUEST') return { bytes, problem: 'PEM block type must be CERTIFICATE REQUEST' };
  const problem = derProblem(Buffer.from(pem[2]!.replace(/\s+/g, ''), 'base64'));
  return problem ? { bytes, problem } : { bytes };
}

/** ValidateSignerName: `domain/path`, a fully qualified domain and a path segment. */
function validateSignerName(signer: string): StatusCause[] {
  const at = 'spec.signerName';
  if (signer === '') return [FieldErrors.required(at, '')];
  const segments = signer.split('/');
  if (segments.length !== 2)
    return [
      FieldErrors.invalid(
        at,
        signer,
        "must be a fully qualified domain and path of the form 'example.com/signer-name'",
      ),
    ];
  const [domain, path] = segments as [string, string];
  const causes: StatusCause[] = [];
  if (domain.split('.').length < 2)
    causes.push(FieldErrors.invalid(at, domain, 'should be a domain with at least two segments separated by dots'));
  for (const p of checkDns1123Subdomain(domain.toLowerCase())) causes.push(FieldErrors.invalid(at, domain, p));
  const pathProblems = checkPathSegmentName(path);
  if (pathProblems.length > 0)
    causes.push(FieldErrors.invalid(at, signer, `validating path segment: ${pathProblems.join(',')}`));
  return causes;
}

/** validateConditions: known statuses, Approved and Denied only True and never both, no type twice. */
function validateConditions(o: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const conditions = list(obj(o.status).conditions);
  const seen = new Set<string>();
  conditions.forEach((c, i) => {
    const at = `status.conditions[${i}]`;
    const cond = obj(c);
    const type = typeof cond.type === 'string' ? cond.type : '';
    if (type === '') causes.push(FieldErrors.required(`${at}.type`, ''));
    if (!CONDITION_STATUSES.includes(String(cond.status)))
      causes.push(FieldErrors.notSupported(`${at}.status`, cond.status ?? '', CONDITION_STATUSES));
    if (APPROVAL_TYPES.includes(type) && cond.status !== 'True')
      causes.push(FieldErrors.notSupported(`${at}.status`, cond.status ?? '', ['True']));
    if (seen.has(type)) causes.push(FieldErrors.duplicate(`${at}.type`, type));
    seen.add(type);
  });
  if (seen.has('Approved') && seen.has('Denied'))
    causes.push(
      FieldErrors.invalid('status.conditions', conditions, 'Approved and Denied conditions are mutually exclusive'),
    );
  return causes;
}

function validateRequest(o: KubeObject): StatusCause[] {
  const spec = obj(o.spec);
  const causes: StatusCause[] = [];
  const { bytes, problem } = requestProblem(spec.request);
  if (problem)
    causes.push({
      reason: 'FieldValueInvalid',
      message: `Invalid value: ${goBytes(bytes)}: ${problem}`,
      field: 'spec.request',
    });
  const usages = list(spec.usages);
  if (usages.length === 0) causes.push(FieldErrors.required('spec.usages', ''));
  const seen = new Set<string>();
  usages.forEach((u, i) => {
    if (!USAGES.includes(String(u))) causes.push(FieldErrors.notSupported(`spec.usages[${i}]`, u, USAGES));
    if (seen.has(String(u))) causes.push(FieldErrors.duplicate(`spec.usages[${i}]`, u));
    seen.add(String(u));
  });
  const signer = typeof spec.signerName === 'string' ? spec.signerName : '';
  if (signer === 'kubernetes.io/legacy-unknown')
    causes.push(
      FieldErrors.invalid('spec.signerName', signer, 'the legacy signerName is not allowed via this API version'),
    );
  else causes.push(...validateSignerName(signer));
  const expiration = spec.expirationSeconds;
  if (typeof expiration === 'number' && expiration < 600)
    causes.push(
      FieldErrors.invalid(
        'spec.expirationSeconds',
        expiration,
        'may not specify a duration less than 600 seconds (10 minutes)',
      ),
    );
  causes.push(...validateConditions(o));
  return causes;
}

/** The conditions of one of the approval types, as they stand. */
function approvals(o: KubeObject): Obj[] {
  return list(obj(o.status).conditions)
    .map(obj)
    .filter((c) => APPROVAL_TYPES.includes(String(c.type)));
}

/** A /status write may not touch Approved or Denied (that is /approval's), nor change an issued certificate. */
function validateStatusUpdate(next: KubeObject, old: KubeObject): StatusCause[] {
  const causes = validateConditions(next);
  const before = approvals(old);
  const after = approvals(next);
  for (const type of APPROVAL_TYPES) {
    const a = before.find((c) => c.type === type);
    const b = after.find((c) => c.type === type);
    if (!a && b)
      causes.push(FieldErrors.forbidden('status.conditions', `updates may not add a condition of type "${type}"`));
    else if (a && !b)
      causes.push(FieldErrors.forbidden('status.conditions', `updates may not remove a condition of type "${type}"`));
    else if (a && b && !deepEqual(a, b))
      causes.push(FieldErrors.forbidden('status.conditions', `updates may not modify a condition of type "${type}"`));
  }
  const certificate = obj(old.status).certificate;
  if (typeof certificate === 'string' && certificate !== '' && obj(next.status).certificate !== certificate)
    causes.push(FieldErrors.forbidden('status.certificate', 'updates may not modify existing certificate content'));
  return causes;
}

/**
 * /approval: only the conditions change; new ones get their timestamps (populateConditionTimestamps), and an
 * Approved or Denied condition once there stays as it is.
 */
function approve(next: KubeObject, old: KubeObject, ctx: StrategyContext): KubeObject {
  const now = rfc3339(ctx.clock.now());
  const previous = list(obj(old.status).conditions).map(obj);
  const conditions = list(obj(next.status).conditions).map((c) => {
    const cond = { ...obj(c) };
    if (!cond.lastUpdateTime) cond.lastUpdateTime = now;
    if (!cond.lastTransitionTime) {
      const same = previous.find((p) => p.type === cond.type && p.status === cond.status);
      cond.lastTransitionTime = same?.lastTransitionTime ?? now;
    }
    return cond;
  });
  const causes: StatusCause[] = [];
  for (const before of previous.filter((c) => APPROVAL_TYPES.includes(String(c.type)))) {
    const after = conditions.find((c) => c.type === before.type);
    if (!after)
      causes.push(
        FieldErrors.forbidden(
          'status.conditions',
          `updates may not remove a condition of type "${String(before.type)}"`,
        ),
      );
    else if (after.status !== before.status)
      causes.push(
        FieldErrors.forbidden(
          'status.conditions',
          `updates may not modify a condition of type "${String(before.type)}"`,
        ),
      );
  }
  if (causes.length > 0)
    throw Errors.invalid('certificates.k8s.io', 'CertificateSigningRequest', old.metadata.name ?? '', causes);
  const status: Obj = { ...obj(old.status) };
  if (conditions.length > 0) status.conditions = conditions;
  else delete status.conditions;
  return { ...deepCopy(old), metadata: { ...old.metadata, ...pick(next.metadata) }, status };
}

/** The metadata a subresource write may change along (labels and annotations, as the main resource's). */
function pick(meta: KubeObject['metadata']): Partial<KubeObject['metadata']> {
  const out: Partial<KubeObject['metadata']> = {};
  if (meta.labels !== undefined) out.labels = meta.labels;
  if (meta.annotations !== undefined) out.annotations = meta.annotations;
  return out;
}

/** extractCSRStatus: Denied, Approved or Pending, then Failed and Issued. */
function condition(o: KubeObject): string {
  const types = new Set(list(obj(o.status).conditions).map((c) => String(obj(c).type)));
  let status = types.has('Denied') ? 'Denied' : types.has('Approved') ? 'Approved' : 'Pending';
  if (types.has('Failed')) status += ',Failed';
  const certificate = obj(o.status).certificate;
  if (typeof certificate === 'string' && certificate !== '') status += ',Issued';
  return status;
}

export const certificateSigningRequests: KindInfo = {
  group: 'certificates.k8s.io',
  version: 'v1',
  kind: 'CertificateSigningRequest',
  resource: 'certificatesigningrequests',
  singular: 'certificatesigningrequest',
  namespaced: false,
  shortNames: ['csr'],
  status: true,
  extraSubresources: [{ name: 'approval', kind: 'CertificateSigningRequest', verbs: ['get', 'patch', 'update'] }],
  strategy: {
    // The requester's identity, whatever the body says (csrStrategy.PrepareForCreate).
    prepareForCreate(o, _ctx, requester) {
      const user = requester?.user ?? UNAUTHENTICATED_ADMIN;
      const spec = obj(o.spec);
      if (!isPlainObject(o.spec)) o.spec = spec;
      spec.username = user.username;
      if (user.uid) spec.uid = user.uid;
      else delete spec.uid;
      if (user.groups.length > 0) spec.groups = [...user.groups];
      else delete spec.groups;
      if (user.extra && Object.keys(user.extra).length > 0) spec.extra = deepCopy(user.extra);
      else delete spec.extra;
      o.status = {};
    },
    // The main resource changes metadata only: spec and status are /status's and /approval's.
    prepareForUpdate(next, old) {
      next.spec = old.spec;
      if (old.status === undefined) delete next.status;
      else next.status = old.status;
    },
    validate: validateRequest,
    statusValidation: 'metadata',
    validateStatusUpdate,
    subresources: { approval: approve },
  },
  noAge: true,
  columns: [
    col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
      description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
    }),
    col('SignerName', (o) => String(obj(o.spec).signerName || '<none>'), {
      description: 'Requested signer for the request. It is a qualified name in the form: `scope-hostname.io/name`.',
    }),
    col('Requestor', (o) => String(obj(o.spec).username ?? ''), {
      description: 'Name of the user which made this request.',
    }),
    col(
      'RequestedDuration',
      (o) => {
        const seconds = obj(o.spec).expirationSeconds;
        return typeof seconds === 'number' ? humanDuration(seconds * 1000) : '<none>';
      },
      {
        description:
          'expirationSeconds is the requested duration of validity of the issued certificate. The certificate signer may issue a certificate with a different validity duration so a client must check the delta between the notBefore and and notAfter fields in the issued certificate to determine the actual duration.',
      },
    ),
    col('Condition', condition, { description: 'State of this request.' }),
  ],
};
