import { FieldErrors, type StatusCause } from './errors.js';
import { isPlainObject, type KubeObject } from './types.js';

/** Kubernetes' name and label rules (k8s.io/apimachinery/pkg/util/validation), with its exact messages. */
const dns1123LabelFmt = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const dns1123SubdomainFmt = `${dns1123LabelFmt}(\\.${dns1123LabelFmt})*`;
const qualifiedNameFmt = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const labelValueFmt = `(${qualifiedNameFmt})?`;

const dns1123Label = new RegExp(`^${dns1123LabelFmt}$`);
const dns1123Subdomain = new RegExp(`^${dns1123SubdomainFmt}$`);
const qualifiedName = new RegExp(`^${qualifiedNameFmt}$`);
const labelValue = new RegExp(`^${labelValueFmt}$`);

export const DNS1123_LABEL_MESSAGE = `a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '${dns1123LabelFmt}')`;
export const DNS1123_SUBDOMAIN_MESSAGE = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '${dns1123SubdomainFmt}')`;

/** Returns the problems with value as a DNS-1123 subdomain (empty when valid). */
export function checkDns1123Subdomain(value: string): string[] {
  const problems: string[] = [];
  if (value.length > 253) problems.push('must be no more than 253 characters');
  if (!dns1123Subdomain.test(value)) problems.push(DNS1123_SUBDOMAIN_MESSAGE);
  return problems;
}

export function checkDns1123Label(value: string): string[] {
  const problems: string[] = [];
  if (value.length > 63) problems.push('must be no more than 63 characters');
  if (!dns1123Label.test(value)) problems.push(DNS1123_LABEL_MESSAGE);
  return problems;
}

/**
 * Keys found valid (label and annotation keys, finalizers): every write repeats the same few, so each is checked
 * once. The set starts afresh past 10,000 keys.
 */
const validQualifiedNames = new Set<string>();

/** Label and annotation keys: an optional DNS subdomain prefix and a qualified name. */
export function checkQualifiedName(value: string): string[] {
  if (validQualifiedNames.has(value)) return [];
  const problems = qualifiedNameProblems(value);
  if (problems.length === 0) {
    if (validQualifiedNames.size >= 10_000) validQualifiedNames.clear();
    validQualifiedNames.add(value);
  }
  return problems;
}

function qualifiedNameProblems(value: string): string[] {
  const parts = value.split('/');
  let name: string;
  const problems: string[] = [];
  if (parts.length === 1) {
    name = parts[0]!;
  } else if (parts.length === 2) {
    const prefix = parts[0]!;
    name = parts[1]!;
    if (prefix.length === 0) problems.push('prefix part must be non-empty');
    else for (const p of checkDns1123Subdomain(prefix)) problems.push(`prefix part ${p}`);
  } else {
    return [
      `a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '${qualifiedNameFmt}') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ];
  }
  if (name.length === 0) problems.push('name part must be non-empty');
  else if (name.length > 63) problems.push('name part must be no more than 63 characters');
  if (name.length > 0 && !qualifiedName.test(name)) {
    problems.push(
      `name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '${qualifiedNameFmt}')`,
    );
  }
  return problems;
}

export function checkLabelValue(value: string): string[] {
  const problems: string[] = [];
  if (value.length > 63) problems.push('must be no more than 63 characters');
  if (!labelValue.test(value)) {
    problems.push(
      `a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '${labelValueFmt}')`,
    );
  }
  return problems;
}

/** Name path segments may never contain these, whatever the kind (apiserver's path segment rule). */
export function checkPathSegmentName(name: string): string[] {
  if (name === '.' || name === '..') return [`may not be '${name}'`];
  const problems: string[] = [];
  for (const bad of ['/', '%']) if (name.includes(bad)) problems.push(`may not contain '${bad}'`);
  return problems;
}

const TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024;

const dns1035LabelFmt = '[a-z]([-a-z0-9]*[a-z0-9])?';
const dns1035Label = new RegExp(`^${dns1035LabelFmt}$`);

export function checkDns1035Label(value: string): string[] {
  const problems: string[] = [];
  if (value.length > 63) problems.push('must be no more than 63 characters');
  if (!dns1035Label.test(value)) {
    problems.push(
      `a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '${dns1035LabelFmt}')`,
    );
  }
  return problems;
}

const configKey = /^[-._a-zA-Z0-9]+$/;

/** Keys of ConfigMap and Secret data (IsConfigMapKey). */
export function checkConfigMapKey(value: string): string[] {
  const problems: string[] = [];
  if (value.length > 253) problems.push('must be no more than 253 characters');
  if (!configKey.test(value)) {
    problems.push(
      `a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
    );
  }
  if (value === '.' || value === '..') problems.push(`must not be '${value}'`);
  else if (value.startsWith('..')) problems.push(`must not start with '..'`);
  return problems;
}

export type NameRule = 'subdomain' | 'label' | 'dns1035' | 'path-segment';

/** ObjectMeta validation shared by every kind (ValidateObjectMeta). */
export function validateObjectMeta(obj: KubeObject, namespaced: boolean, nameRule: NameRule): StatusCause[] {
  const causes: StatusCause[] = [];
  const meta = obj.metadata;
  const name = meta.name;
  if (!name) {
    causes.push(FieldErrors.required('metadata.name', 'name or generateName is required'));
  } else {
    const problems =
      nameRule === 'label'
        ? checkDns1123Label(name)
        : nameRule === 'dns1035'
          ? checkDns1035Label(name)
          : nameRule === 'subdomain'
            ? checkDns1123Subdomain(name)
            : checkPathSegmentName(name);
    for (const p of problems) causes.push(FieldErrors.invalid('metadata.name', name, p));
  }
  if (namespaced) {
    if (!meta.namespace) causes.push(FieldErrors.required('metadata.namespace', ''));
    else
      for (const p of checkDns1123Label(meta.namespace))
        causes.push(FieldErrors.invalid('metadata.namespace', meta.namespace, p));
  } else if (meta.namespace) {
    causes.push(FieldErrors.forbidden('metadata.namespace', 'not allowed on this type'));
  }
  causes.push(...validateLabels(meta.labels, 'metadata.labels'));
  causes.push(...validateAnnotations(meta.annotations, 'metadata.annotations'));
  if (meta.finalizers !== undefined) {
    if (!Array.isArray(meta.finalizers))
      causes.push(FieldErrors.invalid('metadata.finalizers', meta.finalizers, 'must be a list of strings'));
    else {
      meta.finalizers.forEach((f, i) => {
        if (typeof f !== 'string') causes.push(FieldErrors.invalid(`metadata.finalizers[${i}]`, f, 'must be a string'));
        else for (const p of checkQualifiedName(f)) causes.push(FieldErrors.invalid(`metadata.finalizers[${i}]`, f, p));
      });
    }
  }
  if (meta.ownerReferences !== undefined) {
    if (!Array.isArray(meta.ownerReferences))
      causes.push(FieldErrors.invalid('metadata.ownerReferences', meta.ownerReferences, 'must be a list'));
    else {
      let controllers = 0;
      meta.ownerReferences.forEach((ref, i) => {
        const field = `metadata.ownerReferences[${i}]`;
        if (!isPlainObject(ref)) return causes.push(FieldErrors.invalid(field, ref, 'must be an object'));
        if (!ref.apiVersion)
          causes.push(FieldErrors.invalid(`${field}.apiVersion`, ref.apiVersion ?? '', 'version must not be empty'));
        if (!ref.kind) causes.push(FieldErrors.invalid(`${field}.kind`, ref.kind ?? '', 'must not be empty'));
        if (!ref.name) causes.push(FieldErrors.invalid(`${field}.name`, ref.name ?? '', 'must not be empty'));
        if (!ref.uid) causes.push(FieldErrors.invalid(`${field}.uid`, ref.uid ?? '', 'must not be empty'));
        if (ref.controller === true) controllers++;
        return undefined;
      });
      if (controllers > 1)
        causes.push(
          FieldErrors.invalid(
            'metadata.ownerReferences',
            meta.ownerReferences,
            'Only one reference can have Controller set to true',
          ),
        );
    }
  }
  return causes;
}

export function validateLabels(labels: unknown, field: string): StatusCause[] {
  if (labels === undefined || labels === null) return [];
  if (!isPlainObject(labels))
    return [FieldErrors.invalid(field, labels, 'must be a map of string keys to string values')];
  const causes: StatusCause[] = [];
  for (const [key, value] of Object.entries(labels)) {
    for (const p of checkQualifiedName(key)) causes.push(FieldErrors.invalid(field, key, p));
    if (typeof value !== 'string') causes.push(FieldErrors.invalid(`${field}.${key}`, value, 'must be a string'));
    else for (const p of checkLabelValue(value)) causes.push(FieldErrors.invalid(field, value, p));
  }
  return causes;
}

export function validateAnnotations(annotations: unknown, field: string): StatusCause[] {
  if (annotations === undefined || annotations === null) return [];
  if (!isPlainObject(annotations))
    return [FieldErrors.invalid(field, annotations, 'must be a map of string keys to string values')];
  const causes: StatusCause[] = [];
  let total = 0;
  for (const [key, value] of Object.entries(annotations)) {
    for (const p of checkQualifiedName(key.toLowerCase())) causes.push(FieldErrors.invalid(field, key, p));
    if (typeof value !== 'string') causes.push(FieldErrors.invalid(`${field}.${key}`, value, 'must be a string'));
    else total += key.length + value.length;
  }
  if (total > TOTAL_ANNOTATION_SIZE_LIMIT) causes.push(FieldErrors.tooLong(field, TOTAL_ANNOTATION_SIZE_LIMIT));
  return causes;
}
