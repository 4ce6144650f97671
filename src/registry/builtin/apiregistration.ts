import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { checkDns1035Label, checkDns1123Subdomain, checkPathSegmentName } from '../../api/validation.js';
import { ageOf, col } from '../printers.js';
import type { KindInfo } from '../types.js';

/**
 * apiregistration.k8s.io/v1 APIService: which server serves a group-version. kube-apiserver's aggregator keeps one
 * Local APIService per group-version it serves itself (custom resources' included); one with a service points at an
 * extension API server.
 */
type Obj = Record<string, unknown>;

const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});

/** ValidateAPIService. */
function validateApiService(o: KubeObject): StatusCause[] {
  const spec = obj(o.spec);
  const group = typeof spec.group === 'string' ? spec.group : '';
  const version = typeof spec.version === 'string' ? spec.version : '';
  const causes: StatusCause[] = [];
  const name = o.metadata.name ?? '';
  const required = `${version}.${group}`;
  if (name !== '' && checkPathSegmentName(name).length === 0 && name !== required)
    causes.push(FieldErrors.invalid('metadata.name', name, `must be \`spec.version+"."+spec.group\`: "${required}"`));
  if (group === '' && version !== 'v1')
    causes.push(FieldErrors.required('spec.group', 'only v1 may have an empty group and it better be legacy kube'));
  if (group !== '')
    for (const p of checkDns1123Subdomain(group)) causes.push(FieldErrors.invalid('spec.group', group, p));
  for (const p of checkDns1035Label(version)) causes.push(FieldErrors.invalid('spec.version', version, p));
  const groupPriority = typeof spec.groupPriorityMinimum === 'number' ? spec.groupPriorityMinimum : 0;
  if (groupPriority <= 0 || groupPriority > 20000)
    causes.push(
      FieldErrors.invalid('spec.groupPriorityMinimum', groupPriority, 'must be positive and less than 20000'),
    );
  const versionPriority = typeof spec.versionPriority === 'number' ? spec.versionPriority : 0;
  if (versionPriority <= 0 || versionPriority > 1000)
    causes.push(FieldErrors.invalid('spec.versionPriority', versionPriority, 'must be positive and less than 1000'));
  const caBundle = typeof spec.caBundle === 'string' ? spec.caBundle : '';
  if (!isPlainObject(spec.service)) {
    if (caBundle !== '')
      causes.push(
        FieldErrors.invalid(
          'spec.caBundle',
          `${Buffer.from(caBundle, 'base64').length} bytes`,
          'local APIServices may not have a caBundle',
        ),
      );
    if (spec.insecureSkipTLSVerify === true)
      causes.push(
        FieldErrors.invalid('spec.insecureSkipTLSVerify', true, 'local APIServices may not have insecureSkipTLSVerify'),
      );
    return causes;
  }
  const service = spec.service;
  if (!service.namespace) causes.push(FieldErrors.required('spec.service.namespace', ''));
  if (!service.name) causes.push(FieldErrors.required('spec.service.name', ''));
  const port = typeof service.port === 'number' ? service.port : 0;
  if (port < 1 || port > 65535)
    causes.push(
      FieldErrors.invalid('spec.service.port', port, 'port is not valid: must be between 1 and 65535, inclusive'),
    );
  if (spec.insecureSkipTLSVerify === true && caBundle !== '')
    causes.push(FieldErrors.invalid('spec.insecureSkipTLSVerify', true, 'may not be true if caBundle is present'));
  return causes;
}

/** The AVAILABLE column: the Available condition's status, with its reason when it is not True. */
function available(o: KubeObject): string {
  const conditions = Array.isArray(obj(o.status).conditions) ? (obj(o.status).conditions as Obj[]) : [];
  const c = conditions.find((x) => x.type === 'Available');
  if (!c) return 'Unknown';
  if (c.status === 'True') return 'True';
  return c.reason ? `${String(c.status)} (${String(c.reason)})` : String(c.status);
}

export const apiServices: KindInfo = {
  group: 'apiregistration.k8s.io',
  version: 'v1',
  kind: 'APIService',
  resource: 'apiservices',
  singular: 'apiservice',
  namespaced: false,
  categories: ['api-extensions'],
  status: true,
  nameRule: 'path-segment',
  strategy: {
    defaults(o) {
      const service = obj(o.spec).service;
      if (isPlainObject(service)) service.port ??= 443;
    },
    validate: validateApiService,
    statusValidation: 'metadata',
  },
  columns: [
    col(
      'Service',
      (o) => {
        const service = obj(o.spec).service;
        return isPlainObject(service) ? `${String(service.namespace ?? '')}/${String(service.name ?? '')}` : 'Local';
      },
      { description: 'The reference to the service that hosts this API endpoint.' },
    ),
    col('Available', available, { description: 'Whether this service is available.' }),
    col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
      description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
    }),
  ],
  noAge: true,
};

/**
 * The priorities kube-apiserver registers its own group-versions with (pkg/controlplane's apiVersionPriorities and
 * DefaultGenericAPIServicePriorities): `[groupPriorityMinimum, versionPriority]`.
 */
export const BUILTIN_API_PRIORITIES: Readonly<Record<string, readonly [number, number]>> = {
  v1: [18000, 1],
  'apiregistration.k8s.io/v1': [18000, 15],
  'apps/v1': [17800, 15],
  'events.k8s.io/v1': [17750, 15],
  'authentication.k8s.io/v1': [17700, 15],
  'authorization.k8s.io/v1': [17600, 15],
  'autoscaling/v2': [17500, 30],
  'autoscaling/v1': [17500, 15],
  'batch/v1': [17400, 15],
  'certificates.k8s.io/v1': [17300, 15],
  'networking.k8s.io/v1': [17200, 15],
  'policy/v1': [17100, 15],
  'rbac.authorization.k8s.io/v1': [17000, 15],
  'storage.k8s.io/v1': [16800, 15],
  'apiextensions.k8s.io/v1': [16700, 15],
  'admissionregistration.k8s.io/v1': [16700, 15],
  'scheduling.k8s.io/v1': [16600, 15],
  'coordination.k8s.io/v1': [16500, 15],
  'node.k8s.io/v1': [16300, 15],
  'discovery.k8s.io/v1': [16200, 15],
  'flowcontrol.apiserver.k8s.io/v1': [16100, 21],
};

/** CustomResourceDefinitions' group-versions: low priority (crdregistration's 1000 and 100). */
export const CRD_API_PRIORITY: readonly [number, number] = [1000, 100];
