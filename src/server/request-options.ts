import { Errors, FieldErrors, goQuote, type ApiError, type StatusCause } from '../api/errors.js';
import { optionalQueryBool } from '../api/query-params.js';
import { isPlainObject, type DeleteOptions } from '../api/types.js';
import { goJsonType } from '../api/go-json.js';

/**
 * The options of a request as kube-apiserver decodes and validates them before it touches storage: query
 * parameters converted as its ParameterCodec converts them (a bad one is a 400 with strconv's text), DeleteOptions
 * decoded from the body as Go decodes them (a bad one is a 400 with encoding/json's text, and nothing is deleted),
 * then apimachinery's ValidateListOptions / ValidateDeleteOptions / ValidateCreateOptions… (422 Invalid, of kind
 * ListOptions, DeleteOptions… in group meta.k8s.io).
 */

export type Query = Record<string, string | string[] | undefined>;

/** The first value of a parameter, as Go's url.Values.Get and the ParameterCodec read it. */
function first(query: Query, key: string): string | undefined {
  const v = query[key];
  return Array.isArray(v) ? v[0] : v;
}

function all(query: Query, key: string): string[] {
  const v = query[key];
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

/** An int64 parameter (limit, timeoutSeconds, gracePeriodSeconds): strconv.ParseInt's error when it is not one. */
export function int64Param(query: Query, key: string): number | undefined {
  const v = first(query, key);
  if (v === undefined || v === '') return undefined;
  if (!/^[+-]?\d+$/.test(v)) throw Errors.badRequest(`strconv.ParseInt: parsing ${goQuote(v)}: invalid syntax`);
  const n = Number(v);
  // Beyond int64 is out of range in Go; beyond 2^53 a JavaScript number is no longer exact either.
  if (!Number.isSafeInteger(n)) throw Errors.badRequest(`strconv.ParseInt: parsing ${goQuote(v)}: value out of range`);
  return n;
}

/** `metav1.GroupName`: the options kinds' group in their Invalid errors (`ListOptions.meta.k8s.io "" is invalid: …`). */
const META_GROUP = 'meta.k8s.io';

function invalidOptions(kind: string, causes: StatusCause[]): ApiError {
  return Errors.invalid(META_GROUP, kind, '', causes);
}

/**
 * apiserver's storage.APIObjectVersioner.ParseResourceVersion: "" and "0" mean any; anything else must be a uint64.
 * kube-apiserver answers a bad one with 500 (an InvalidError no handler converts; kubernetes/kubernetes#139485);
 * the 400 here carries the same text, `resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": …`.
 */
export function parseResourceVersion(rv: string | undefined): number | undefined {
  if (rv === undefined || rv === '' || rv === '0') return rv === '0' ? 0 : undefined;
  let why: string | undefined;
  if (!/^\d+$/.test(rv)) why = 'invalid syntax';
  else if (BigInt(rv) > 0xffffffffffffffffn) why = 'value out of range';
  if (why)
    throw Errors.badRequest(
      `resourceVersion: Invalid value: ${goQuote(rv)}: strconv.ParseUint: parsing ${goQuote(rv)}: ${why}`,
    );
  return Number(rv);
}

/** apimachinery's ValidateListOptions (the WatchList feature on, as kube-apiserver 1.32 has it): 422 ListOptions. */
export function validateListOptions(query: Query, watch: boolean): void {
  const match = first(query, 'resourceVersionMatch') ?? '';
  const rv = first(query, 'resourceVersion') ?? '';
  const cont = first(query, 'continue') ?? '';
  const sendInitialEvents = optionalQueryBool(query.sendInitialEvents);
  const causes: StatusCause[] = [];
  const field = 'resourceVersionMatch';
  if (watch) {
    if (sendInitialEvents !== undefined && match !== 'NotOlderThan')
      causes.push(
        FieldErrors.forbidden(field, 'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan'),
      );
    if (match !== '') {
      if (sendInitialEvents === undefined)
        causes.push(
          FieldErrors.forbidden(
            field,
            'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided',
          ),
        );
      if (match !== 'NotOlderThan') causes.push(FieldErrors.notSupported(field, match, ['NotOlderThan']));
      if (cont !== '')
        causes.push(FieldErrors.forbidden(field, 'resourceVersionMatch is forbidden when continue is provided'));
    }
  } else {
    if (match !== '') {
      if (rv === '')
        causes.push(
          FieldErrors.forbidden(field, 'resourceVersionMatch is forbidden unless resourceVersion is provided'),
        );
      if (cont !== '')
        causes.push(FieldErrors.forbidden(field, 'resourceVersionMatch is forbidden when continue is provided'));
      if (match !== 'Exact' && match !== 'NotOlderThan')
        causes.push(FieldErrors.notSupported(field, match, ['Exact', 'NotOlderThan', '']));
      if (match === 'Exact' && rv === '0')
        causes.push(FieldErrors.forbidden(field, 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'));
    }
    if (sendInitialEvents !== undefined)
      causes.push(FieldErrors.forbidden('sendInitialEvents', 'sendInitialEvents is forbidden for list'));
  }
  if (causes.length > 0) throw invalidOptions('ListOptions', causes);
}

/** Go's `%#v` of a []string, as field errors print a dryRun value: `[]string{"x", "y"}`. */
function goStringSlice(values: readonly string[]): string {
  return `[]string{${values.map(goQuote).join(', ')}}`;
}

/** ValidateDryRun: every value must be `All`. */
function dryRunCauses(values: readonly string[]): StatusCause[] {
  if (values.every((v) => v === 'All')) return [];
  return [
    {
      reason: 'FieldValueNotSupported',
      message: `Unsupported value: ${goStringSlice(values)}: supported values: "All"`,
      field: 'dryRun',
    },
  ];
}

export type WriteOptionsKind = 'CreateOptions' | 'UpdateOptions' | 'PatchOptions';

/**
 * ValidateCreateOptions / ValidateUpdateOptions / ValidatePatchOptions on the query: fieldManager at most 128
 * printable characters, dryRun only `All`, a known fieldValidation, and no `force` on a patch that is not an apply.
 */
export function validateWriteOptions(query: Query, kind: WriteOptionsKind, applyPatch: boolean): void {
  const causes: StatusCause[] = [];
  if (kind === 'PatchOptions' && !applyPatch && first(query, 'force') !== undefined)
    causes.push(FieldErrors.forbidden('force', 'may not be specified for non-apply patch'));
  const manager = first(query, 'fieldManager') ?? '';
  if (Buffer.byteLength(manager) > 128) causes.push(FieldErrors.tooLong('fieldManager', 128));
  let position = 0;
  // Printable ASCII (every manager name in practice) needs no look at each character.
  for (const ch of /^[\x20-\x7e]*$/.test(manager) ? '' : manager) {
    const code = ch.codePointAt(0)!;
    if (!isPrintable(code))
      causes.push(
        FieldErrors.invalid(
          'fieldManager',
          manager,
          `invalid character U+${code.toString(16).toUpperCase().padStart(4, '0')} (at position ${position})`,
        ),
      );
    position += Buffer.byteLength(ch);
  }
  causes.push(...dryRunCauses(all(query, 'dryRun')));
  const fieldValidation = first(query, 'fieldValidation') ?? '';
  if (!['', 'Ignore', 'Strict', 'Warn'].includes(fieldValidation))
    causes.push(FieldErrors.notSupported('fieldValidation', fieldValidation, ['', 'Ignore', 'Strict', 'Warn']));
  if (causes.length > 0) throw invalidOptions(kind, causes);
}

/** unicode.IsPrint, near enough: no control characters, no unassigned or separator code points but the space. */
function isPrintable(code: number): boolean {
  return /[\p{L}\p{M}\p{N}\p{P}\p{S} ]/u.test(String.fromCodePoint(code));
}

/** Whether the query asks for a dry run (the values are checked by validateWriteOptions or decodeDeleteOptions). */
export function dryRunRequested(query: Query): boolean {
  return all(query, 'dryRun').length > 0;
}

// --- DeleteOptions ------------------------------------------------------------------------------------------------

/** metav1.DeleteOptions and Preconditions as Go declares their fields: the type names its decoder prints. */
const DELETE_OPTIONS_FIELDS: Record<string, string> = {
  gracePeriodSeconds: 'int64',
  preconditions: 'v1.Preconditions',
  orphanDependents: 'bool',
  propagationPolicy: 'v1.DeletionPropagation',
  dryRun: '[]string',
  ignoreStoreReadErrorWithClusterBreakingPotential: 'bool',
};
const PRECONDITIONS_FIELDS: Record<string, string> = { uid: 'types.UID', resourceVersion: 'string' };

/** Whether a JSON value decodes into a Go value of this type (null always does: it leaves the zero value). */
function fits(value: unknown, goType: string): boolean {
  if (value === null) return true;
  switch (goType) {
    case 'int64':
      return typeof value === 'number' && Number.isInteger(value);
    case 'bool':
      return typeof value === 'boolean';
    case '[]string':
      return Array.isArray(value);
    case 'v1.Preconditions':
      return isPlainObject(value);
    default:
      return typeof value === 'string';
  }
}

/** encoding/json's UnmarshalTypeError text; a number that is not an int64 is shown with its digits. */
function typeError(value: unknown, struct: string, field: string, goType: string): string {
  const what = typeof value === 'number' && goType === 'int64' ? `number ${String(value)}` : goJsonType(value);
  return `json: cannot unmarshal ${what} into Go struct field ${struct}.${field} of type ${goType}`;
}

/**
 * The first field of a decoded DeleteOptions body that Go could not have decoded (in document order; Go's decoder
 * goes on after a type error but reports the first), in encoding/json's words, or undefined. Fields Go does not know
 * (matched case-sensitively, as Kubernetes' decoder does) are ignored.
 */
function deleteOptionsTypeError(body: Record<string, unknown>): string | undefined {
  for (const [key, value] of Object.entries(body)) {
    const goType = DELETE_OPTIONS_FIELDS[key];
    if (!goType) continue;
    if (!fits(value, goType)) return typeError(value, 'DeleteOptions', key, goType);
    if (key === 'dryRun' && Array.isArray(value)) {
      const bad = value.find((v) => v !== null && typeof v !== 'string');
      if (bad !== undefined) return typeError(bad, 'DeleteOptions', key, 'string');
    }
    if (key === 'preconditions' && isPlainObject(value)) {
      for (const [k, v] of Object.entries(value)) {
        const t = PRECONDITIONS_FIELDS[k];
        if (t && !fits(v, t)) return typeError(v, 'Preconditions', `preconditions.${k}`, t);
      }
    }
  }
  return undefined;
}

/** The kinds the meta internal-version scheme knows besides DeleteOptions: they decode, then are not DeleteOptions. */
const OTHER_META_OPTIONS = new Set(['ListOptions', 'GetOptions', 'CreateOptions', 'UpdateOptions', 'PatchOptions']);

/**
 * A delete's options as kube-apiserver's delete handlers read them: from the body when there is one (its query is
 * then not read at all), else from the query; then ValidateDeleteOptions. A body that does not decode is a 400, as
 * kube-apiserver answers since kubernetes/kubernetes#133358 (500 before); nothing is deleted.
 */
export function deleteOptionsFrom(body: unknown, query: Query): DeleteOptions {
  let raw: Record<string, unknown>;
  if (body !== undefined) {
    if (!isPlainObject(body)) throw Errors.badRequest('decoded object cannot be converted to DeleteOptions');
    const kind = body.kind;
    if (typeof kind === 'string' && kind !== '' && kind !== 'DeleteOptions') {
      if (OTHER_META_OPTIONS.has(kind)) throw Errors.badRequest('decoded object cannot be converted to DeleteOptions');
      const version =
        typeof body.apiVersion === 'string' && body.apiVersion !== '' ? body.apiVersion : 'meta.k8s.io/v1';
      throw Errors.badRequest(
        `no kind ${goQuote(kind)} is registered for version ${goQuote(version)} in scheme "pkg/apis/meta/internalversion/scheme/register.go:27"`,
      );
    }
    const mismatch = deleteOptionsTypeError(body);
    if (mismatch) throw Errors.badRequest(mismatch);
    raw = body;
  } else {
    raw = {};
    const grace = int64Param(query, 'gracePeriodSeconds');
    if (grace !== undefined) raw.gracePeriodSeconds = grace;
    const policy = first(query, 'propagationPolicy');
    if (policy !== undefined) raw.propagationPolicy = policy;
    const orphan = optionalQueryBool(query.orphanDependents);
    if (orphan !== undefined) raw.orphanDependents = orphan;
    if (query.dryRun !== undefined) raw.dryRun = all(query, 'dryRun');
  }
  return validatedDeleteOptions(raw);
}

/** ValidateDeleteOptions (422 DeleteOptions), then the options in the store's terms. */
function validatedDeleteOptions(raw: Record<string, unknown>): DeleteOptions {
  const policy = raw.propagationPolicy ?? null;
  const orphan = raw.orphanDependents ?? null;
  const dryRun = Array.isArray(raw.dryRun) ? raw.dryRun.map((v) => (typeof v === 'string' ? v : '')) : [];
  const causes: StatusCause[] = [];
  if (orphan !== null && policy !== null)
    causes.push(
      FieldErrors.invalid('propagationPolicy', policy, 'orphanDependents and deletionPropagation cannot be both set'),
    );
  if (policy !== null && policy !== 'Foreground' && policy !== 'Background' && policy !== 'Orphan')
    causes.push(FieldErrors.notSupported('propagationPolicy', policy, ['Foreground', 'Background', 'Orphan', 'nil']));
  causes.push(...dryRunCauses(dryRun));
  if (causes.length > 0) throw invalidOptions('DeleteOptions', causes);

  const options: DeleteOptions = { dryRun: dryRun.length > 0 };
  const grace = raw.gracePeriodSeconds;
  // rest.BeforeDelete: "Negative values will be treated as the value `1s` on the delete path."
  if (typeof grace === 'number') options.gracePeriodSeconds = grace < 0 ? 1 : grace;
  if (typeof policy === 'string') options.propagationPolicy = policy as DeleteOptions['propagationPolicy'];
  if (typeof orphan === 'boolean') options.orphanDependents = orphan;
  const pre = raw.preconditions;
  if (isPlainObject(pre)) {
    options.preconditions = {};
    if (typeof pre.uid === 'string') options.preconditions.uid = pre.uid;
    if (typeof pre.resourceVersion === 'string') options.preconditions.resourceVersion = pre.resourceVersion;
  }
  return options;
}
