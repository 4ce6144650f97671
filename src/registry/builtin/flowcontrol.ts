import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { ageOf, col } from '../printers.js';
import type { KindInfo } from '../types.js';

/**
 * flowcontrol.apiserver.k8s.io/v1 FlowSchema and PriorityLevelConfiguration (API Priority and Fairness), with the
 * configuration a kube-apiserver boots with. kube-sim serves, defaults and validates them; it does not queue
 * requests by them (one process serves every request as it comes).
 */
type Obj = Record<string, unknown>;

const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});

const GROUP = 'flowcontrol.apiserver.k8s.io';
export const FLOW_SCHEMAS = `${GROUP}/flowschemas`;
export const PRIORITY_LEVELS = `${GROUP}/prioritylevelconfigurations`;
const DISTINGUISHERS = ['ByNamespace', 'ByUser'];
const SUBJECT_KINDS = ['Group', 'ServiceAccount', 'User'];
const PL_TYPES = ['Exempt', 'Limited'];
const LIMIT_RESPONSES = ['Queue', 'Reject'];
/** The annotation that lets the apiserver keep a bootstrap object's spec as it ships it. */
const AUTO_UPDATE = 'apf.kubernetes.io/autoupdate-spec';

/** SetDefaults_FlowSchemaSpec. */
function defaultFlowSchema(o: KubeObject): void {
  const spec = obj(o.spec);
  if (!isPlainObject(o.spec)) o.spec = spec;
  spec.matchingPrecedence ??= 1000;
}

/** SetDefaults_PriorityLevelConfiguration (v1): 30 shares, nothing lent, queues of 64 × 8 × 50. */
function defaultPriorityLevel(o: KubeObject): void {
  const spec = obj(o.spec);
  if (!isPlainObject(o.spec)) o.spec = spec;
  if (isPlainObject(spec.limited)) {
    const limited = spec.limited;
    limited.nominalConcurrencyShares ??= 30;
    limited.lendablePercent ??= 0;
    const response = obj(limited.limitResponse);
    if (isPlainObject(response.queuing)) {
      response.queuing.queues ??= 64;
      response.queuing.handSize ??= 8;
      response.queuing.queueLengthLimit ??= 50;
    }
  }
  if (isPlainObject(spec.exempt)) {
    spec.exempt.nominalConcurrencyShares ??= 0;
    spec.exempt.lendablePercent ??= 0;
  }
}

function validateFlowSchema(o: KubeObject): StatusCause[] {
  const spec = obj(o.spec);
  const causes: StatusCause[] = [];
  const precedence = spec.matchingPrecedence;
  if (typeof precedence !== 'number' || precedence < 1 || precedence > 10000)
    causes.push(FieldErrors.invalid('spec.matchingPrecedence', precedence, 'must be between 1 and 10000, inclusive'));
  if (!obj(spec.priorityLevelConfiguration).name)
    causes.push(FieldErrors.required('spec.priorityLevelConfiguration.name', 'must reference a priority level'));
  if (spec.distinguisherMethod !== undefined) {
    const type = obj(spec.distinguisherMethod).type;
    if (!DISTINGUISHERS.includes(String(type)))
      causes.push(FieldErrors.notSupported('spec.distinguisherMethod.type', type, DISTINGUISHERS));
  }
  list(spec.rules).forEach((r, i) => {
    const at = `spec.rules[${i}]`;
    const rule = obj(r);
    const subjects = list(rule.subjects);
    if (subjects.length === 0)
      causes.push(FieldErrors.required(`${at}.subjects`, 'subjects must contain at least one value'));
    subjects.forEach((s, j) => {
      const kind = obj(s).kind;
      if (!SUBJECT_KINDS.includes(String(kind)))
        causes.push(FieldErrors.notSupported(`${at}.subjects[${j}].kind`, kind, SUBJECT_KINDS));
    });
    if (list(rule.resourceRules).length === 0 && list(rule.nonResourceRules).length === 0)
      causes.push(FieldErrors.required(at, 'at least one of resourceRules and nonResourceRules has to be non-empty'));
  });
  return causes;
}

function validatePercent(value: unknown, at: string): StatusCause[] {
  return typeof value === 'number' && (value < 0 || value > 100)
    ? [FieldErrors.invalid(at, value, 'must be between 0 and 100, inclusive')]
    : [];
}

function validatePriorityLevel(o: KubeObject): StatusCause[] {
  const spec = obj(o.spec);
  const causes: StatusCause[] = [];
  if (!PL_TYPES.includes(String(spec.type))) {
    causes.push(FieldErrors.notSupported('spec.type', spec.type, PL_TYPES));
    return causes;
  }
  if (spec.type === 'Exempt') {
    if (spec.limited !== undefined)
      causes.push(FieldErrors.forbidden('spec.limited', 'must be nil if the type is not Limited'));
    causes.push(...validatePercent(obj(spec.exempt).lendablePercent, 'spec.exempt.lendablePercent'));
    return causes;
  }
  if (spec.exempt !== undefined)
    causes.push(FieldErrors.forbidden('spec.exempt', 'must be nil if the type is Limited'));
  if (!isPlainObject(spec.limited)) {
    causes.push(FieldErrors.required('spec.limited', 'must not be empty when type is Limited'));
    return causes;
  }
  const limited = spec.limited;
  const shares = limited.nominalConcurrencyShares;
  if (typeof shares === 'number' && shares < 0)
    causes.push(FieldErrors.invalid('spec.limited.nominalConcurrencyShares', shares, 'must be a non-negative integer'));
  causes.push(...validatePercent(limited.lendablePercent, 'spec.limited.lendablePercent'));
  const response = obj(limited.limitResponse);
  if (!LIMIT_RESPONSES.includes(String(response.type))) {
    causes.push(FieldErrors.notSupported('spec.limited.limitResponse.type', response.type, LIMIT_RESPONSES));
    return causes;
  }
  if (response.type === 'Reject') {
    if (response.queuing !== undefined)
      causes.push(
        FieldErrors.forbidden(
          'spec.limited.limitResponse.queuing',
          'must be nil if limited.limitResponse.type is not Limited',
        ),
      );
    return causes;
  }
  if (!isPlainObject(response.queuing)) {
    causes.push(
      FieldErrors.required(
        'spec.limited.limitResponse.queuing',
        'must not be empty if limited.limitResponse.type is Queue',
      ),
    );
    return causes;
  }
  const q = response.queuing;
  const at = 'spec.limited.limitResponse.queuing';
  if (typeof q.queueLengthLimit === 'number' && q.queueLengthLimit <= 0)
    causes.push(FieldErrors.invalid(`${at}.queueLengthLimit`, q.queueLengthLimit, 'must be positive'));
  if (typeof q.queues === 'number' && q.queues <= 0)
    causes.push(FieldErrors.invalid(`${at}.queues`, q.queues, 'must be positive'));
  if (typeof q.handSize === 'number') {
    if (q.handSize <= 0) causes.push(FieldErrors.invalid(`${at}.handSize`, q.handSize, 'must be positive'));
    else if (typeof q.queues === 'number' && q.handSize > q.queues)
      causes.push(
        FieldErrors.invalid(`${at}.handSize`, q.handSize, `should not be greater than queues (${String(q.queues)})`),
      );
  }
  return causes;
}

const age = col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
  description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
});

export const flowSchemas: KindInfo = {
  group: GROUP,
  version: 'v1',
  kind: 'FlowSchema',
  resource: 'flowschemas',
  singular: 'flowschema',
  namespaced: false,
  status: true,
  generation: true,
  strategy: { defaults: defaultFlowSchema, validate: validateFlowSchema, statusValidation: 'metadata' },
  // printFlowSchemaList sorts by FlowSchemaSequence: matching precedence, then name.
  tableOrder: (a, b) =>
    Number(obj(a.spec).matchingPrecedence ?? 0) - Number(obj(b.spec).matchingPrecedence ?? 0) ||
    (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''),
  columns: [
    col('PriorityLevel', (o) => String(obj(obj(o.spec).priorityLevelConfiguration).name ?? ''), {
      description: '`name` is the name of the priority level configuration being referenced Required.',
    }),
    col('MatchingPrecedence', (o) => Number(obj(o.spec).matchingPrecedence ?? 0), {
      type: 'string',
      description:
        '`matchingPrecedence` is used to choose among the FlowSchemas that match a given request. The chosen FlowSchema is among those with the numerically lowest (which we take to be logically highest) MatchingPrecedence.  Each MatchingPrecedence value must be ranged in [1,10000]. Note that if the precedence is not specified, it will be set to 1000 as default.',
    }),
    col(
      'DistinguisherMethod',
      (o) => {
        const method = obj(o.spec).distinguisherMethod;
        return isPlainObject(method) ? String(method.type ?? '') : '<none>';
      },
      {
        description:
          '`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema. `nil` specifies that the distinguisher is disabled and thus will always be the empty string.',
      },
    ),
    age,
    col(
      'MissingPL',
      (o) => {
        const dangling = list(obj(o.status).conditions)
          .map(obj)
          .find((c) => c.type === 'Dangling');
        return dangling ? String(dangling.status ?? '') : '?';
      },
      { description: 'references a broken or non-existent PriorityLevelConfiguration' },
    ),
  ],
  noAge: true,
};

export const priorityLevelConfigurations: KindInfo = {
  group: GROUP,
  version: 'v1',
  kind: 'PriorityLevelConfiguration',
  resource: 'prioritylevelconfigurations',
  singular: 'prioritylevelconfiguration',
  namespaced: false,
  status: true,
  generation: true,
  strategy: { defaults: defaultPriorityLevel, validate: validatePriorityLevel, statusValidation: 'metadata' },
  columns: [
    col('Type', (o) => String(obj(o.spec).type ?? ''), {
      description:
        '`type` indicates whether this priority level is subject to limitation on request execution.  A value of `"Exempt"` means that requests of this priority level are not subject to a limit (and thus are never queued) and do not detract from the capacity made available to other priority levels.  A value of `"Limited"` means that (a) requests of this priority level _are_ subject to limits and (b) some of the server\'s limited capacity is made available exclusively to this priority level. Required.',
    }),
    ...(['NominalConcurrencyShares', 'Queues', 'HandSize', 'QueueLengthLimit'] as const).map((name) =>
      col(
        name,
        (o) => {
          const limited = obj(o.spec).limited;
          if (!isPlainObject(limited)) return '<none>';
          if (name === 'NominalConcurrencyShares') return String(limited.nominalConcurrencyShares ?? 0);
          const queuing = obj(limited.limitResponse).queuing;
          if (!isPlainObject(queuing)) return '<none>';
          const key = name === 'Queues' ? 'queues' : name === 'HandSize' ? 'handSize' : 'queueLengthLimit';
          return String(queuing[key] ?? 0);
        },
        { description: `${name} of the priority level.` },
      ),
    ),
    age,
  ],
  noAge: true,
};

// ---- the configuration kube-apiserver boots with (k8s.io/apiserver's flowcontrol/bootstrap) -------------

const ALL_RESOURCES = { verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true };
const ALL_NON_RESOURCES = { verbs: ['*'], nonResourceURLs: ['*'] };
const group = (name: string): Obj => ({ kind: 'Group', group: { name } });
const user = (name: string): Obj => ({ kind: 'User', user: { name } });
const kubeSystemServiceAccount = (name: string): Obj => ({
  kind: 'ServiceAccount',
  serviceAccount: { name, namespace: 'kube-system' },
});
const everything = (...subjects: Obj[]): Obj[] => [
  { subjects, resourceRules: [ALL_RESOURCES], nonResourceRules: [ALL_NON_RESOURCES] },
];

function flowSchema(name: string, level: string, precedence: number, distinguisher: string | undefined, rules: Obj[]) {
  const spec: Obj = { priorityLevelConfiguration: { name: level }, matchingPrecedence: precedence };
  if (distinguisher) spec.distinguisherMethod = { type: distinguisher };
  spec.rules = rules;
  return { metadata: { name, annotations: { [AUTO_UPDATE]: 'true' } }, spec };
}

function limited(name: string, shares: number, lendable: number, queuing?: [number, number, number]) {
  const limitResponse = queuing
    ? { type: 'Queue', queuing: { queues: queuing[0], handSize: queuing[1], queueLengthLimit: queuing[2] } }
    : { type: 'Reject' };
  return {
    metadata: { name, annotations: { [AUTO_UPDATE]: 'true' } },
    spec: { type: 'Limited', limited: { nominalConcurrencyShares: shares, lendablePercent: lendable, limitResponse } },
  };
}

const leases = (verbs: string[]) => ({
  verbs,
  apiGroups: ['coordination.k8s.io'],
  resources: ['leases'],
  namespaces: ['*'],
});

/** The mandatory and suggested PriorityLevelConfigurations, as a fresh cluster lists them. */
export const bootstrapPriorityLevels: Obj[] = [
  {
    metadata: { name: 'exempt', annotations: { [AUTO_UPDATE]: 'true' } },
    spec: { type: 'Exempt', exempt: { nominalConcurrencyShares: 0, lendablePercent: 0 } },
  },
  limited('catch-all', 5, 0),
  limited('system', 30, 33, [64, 6, 50]),
  limited('node-high', 40, 25, [64, 6, 50]),
  limited('leader-election', 10, 0, [16, 4, 50]),
  limited('workload-high', 40, 50, [128, 6, 50]),
  limited('workload-low', 100, 90, [128, 6, 50]),
  limited('global-default', 20, 50, [128, 6, 50]),
];

/** The mandatory and suggested FlowSchemas. */
export const bootstrapFlowSchemas: Obj[] = [
  flowSchema('exempt', 'exempt', 1, undefined, everything(group('system:masters'))),
  flowSchema('probes', 'exempt', 2, undefined, [
    {
      subjects: [group('system:unauthenticated'), group('system:authenticated')],
      nonResourceRules: [{ verbs: ['get'], nonResourceURLs: ['/healthz', '/readyz', '/livez'] }],
    },
  ]),
  flowSchema('system-leader-election', 'leader-election', 100, 'ByUser', [
    {
      subjects: [user('system:kube-controller-manager'), user('system:kube-scheduler'), kubeSystemServiceAccount('*')],
      resourceRules: [leases(['get', 'create', 'update'])],
    },
  ]),
  flowSchema('endpoint-controller', 'workload-high', 150, 'ByUser', [
    {
      subjects: [
        user('system:kube-controller-manager'),
        kubeSystemServiceAccount('endpoint-controller'),
        kubeSystemServiceAccount('endpointslicemirroring-controller'),
      ],
      resourceRules: [
        { verbs: ['get', 'create', 'update'], apiGroups: [''], resources: ['endpoints'], namespaces: ['*'] },
      ],
    },
  ]),
  flowSchema('workload-leader-election', 'leader-election', 200, 'ByUser', [
    {
      subjects: [kubeSystemServiceAccount('*')],
      resourceRules: [
        {
          verbs: ['get', 'create', 'update'],
          apiGroups: [''],
          resources: ['endpoints', 'configmaps'],
          namespaces: ['*'],
        },
        leases(['get', 'create', 'update']),
      ],
    },
  ]),
  flowSchema('system-node-high', 'node-high', 400, 'ByUser', [
    {
      subjects: [group('system:nodes')],
      resourceRules: [
        { verbs: ['*'], apiGroups: [''], resources: ['nodes', 'nodes/status'], namespaces: ['*'], clusterScope: true },
        leases(['*']),
      ],
    },
  ]),
  flowSchema('system-nodes', 'system', 500, 'ByUser', everything(group('system:nodes'))),
  flowSchema(
    'kube-controller-manager',
    'workload-high',
    800,
    'ByNamespace',
    everything(user('system:kube-controller-manager')),
  ),
  flowSchema('kube-scheduler', 'workload-high', 800, 'ByNamespace', everything(user('system:kube-scheduler'))),
  flowSchema(
    'kube-system-service-accounts',
    'workload-high',
    900,
    'ByNamespace',
    everything(kubeSystemServiceAccount('*')),
  ),
  flowSchema('service-accounts', 'workload-low', 9000, 'ByUser', everything(group('system:serviceaccounts'))),
  flowSchema(
    'global-default',
    'global-default',
    9900,
    'ByUser',
    everything(group('system:unauthenticated'), group('system:authenticated')),
  ),
  flowSchema(
    'catch-all',
    'catch-all',
    10000,
    'ByUser',
    everything(group('system:unauthenticated'), group('system:authenticated')),
  ),
];

/**
 * The Dangling condition the apiserver's APF controller keeps on a FlowSchema: False while the priority level it
 * names exists.
 */
export function danglingCondition(schema: KubeObject, levelExists: boolean, now: string): Obj {
  const level = String(obj(obj(schema.spec).priorityLevelConfiguration).name ?? '');
  return levelExists
    ? {
        type: 'Dangling',
        status: 'False',
        lastTransitionTime: now,
        reason: 'Found',
        message: `This FlowSchema references the PriorityLevelConfiguration object named "${level}" and it exists`,
      }
    : {
        type: 'Dangling',
        status: 'True',
        lastTransitionTime: now,
        reason: 'NotFound',
        message: `This FlowSchema references the PriorityLevelConfiguration object named "${level}" but there is no such object`,
      };
}

export const flowControlKinds: KindInfo[] = [flowSchemas, priorityLevelConfigurations];
