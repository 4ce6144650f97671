import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { selectorFromObject } from '../../api/selectors.js';
import { deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { ageOf, col, containerImages, containerNames, field, num, selectorString, str } from '../printers.js';
import type { KindInfo, Strategy, TableColumn } from '../types.js';
import { defaultPodSpec, validatePodSpec } from './pod-spec.js';

type Obj = Record<string, unknown>;

function spec(obj: KubeObject): Obj {
  if (!isPlainObject(obj.spec)) obj.spec = {};
  return obj.spec as Obj;
}

function defaultTemplate(template: unknown): void {
  if (!isPlainObject(template)) return;
  if (!isPlainObject(template.spec)) template.spec = {};
  defaultPodSpec(template.spec as Obj);
  if (!isPlainObject(template.metadata)) template.metadata = {};
}

/**
 * A new workload's status, as kube-apiserver answers a create: the JSON of Go's zero status struct, whose fields
 * without omitempty are there as 0 (a client reading status.readyReplicas before the controller's first write
 * finds the status, not nothing).
 */
function zeroStatus(status: Obj): (obj: KubeObject) => void {
  return (obj) => {
    obj.status = { ...status };
  };
}

/** Checks shared by workloads: a selector that is not empty and that the template's labels satisfy. */
function validateSelectorAndTemplate(obj: KubeObject, templatePath: string, restartPolicies: string[]): StatusCause[] {
  const s = isPlainObject(obj.spec) ? obj.spec : {};
  const causes: StatusCause[] = [];
  const selector = s.selector;
  const template = field(obj, templatePath);
  if (!isPlainObject(selector)) causes.push(FieldErrors.required('spec.selector', ''));
  else if (
    Object.keys(selector.matchLabels ?? {}).length === 0 &&
    (!Array.isArray(selector.matchExpressions) || selector.matchExpressions.length === 0)
  ) {
    causes.push(FieldErrors.invalid('spec.selector', selector, 'empty selector is invalid for deployment'));
  }
  if (!isPlainObject(template)) {
    causes.push(FieldErrors.required(templatePath, ''));
    return causes;
  }
  const labels = (field(template, 'metadata.labels') ?? {}) as Record<string, string>;
  if (isPlainObject(selector)) {
    try {
      if (!selectorFromObject(selector).matches(labels)) {
        causes.push(
          FieldErrors.invalid(`${templatePath}.metadata.labels`, labels, '`selector` does not match template `labels`'),
        );
      }
    } catch {
      causes.push(FieldErrors.invalid('spec.selector', selector, 'invalid label selector'));
    }
  }
  causes.push(...validatePodSpec(template.spec, `${templatePath}.spec`, restartPolicies));
  return causes;
}

function nonNegative(obj: KubeObject, path: string): StatusCause[] {
  const v = field(obj, path);
  if (v === undefined) return [];
  return typeof v === 'number' && Number.isInteger(v) && v >= 0
    ? []
    : [FieldErrors.invalid(path, v, 'must be greater than or equal to 0')];
}

function immutableSelector(next: KubeObject, old: KubeObject): StatusCause[] {
  const a = field(next, 'spec.selector');
  return deepEqual(a, field(old, 'spec.selector'))
    ? []
    : [FieldErrors.invalid('spec.selector', a, 'field is immutable')];
}

const age: TableColumn = col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
  description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
});

function wideTemplateColumns(templatePath: string, withSelector: boolean): TableColumn[] {
  const cols = [
    col('Containers', (o) => containerNames(field(o, templatePath)), {
      priority: 1,
      description: 'Names of each container in the template.',
    }),
    col('Images', (o) => containerImages(field(o, templatePath)), {
      priority: 1,
      description: 'Images referenced by each container in the template.',
    }),
  ];
  if (withSelector)
    cols.push(
      col('Selector', (o) => selectorString(field(o, 'spec.selector')), {
        priority: 1,
        description: 'Label selector for pods.',
      }),
    );
  return cols;
}

const replicasScale = { specReplicasPath: 'spec.replicas', statusReplicasPath: 'status.replicas' };

const deploymentStrategy: Strategy = {
  prepareForCreate: zeroStatus({}),
  defaults(obj) {
    const s = spec(obj);
    s.replicas ??= 1;
    const strategy = (isPlainObject(s.strategy) ? s.strategy : (s.strategy = {})) as Obj;
    strategy.type ??= 'RollingUpdate';
    if (strategy.type === 'RollingUpdate') {
      const ru = (
        isPlainObject(strategy.rollingUpdate) ? strategy.rollingUpdate : (strategy.rollingUpdate = {})
      ) as Obj;
      ru.maxUnavailable ??= '25%';
      ru.maxSurge ??= '25%';
    }
    s.revisionHistoryLimit ??= 10;
    s.progressDeadlineSeconds ??= 600;
    defaultTemplate(s.template);
  },
  validate(obj) {
    const causes = validateSelectorAndTemplate(obj, 'spec.template', ['Always']);
    causes.push(
      ...nonNegative(obj, 'spec.replicas'),
      ...nonNegative(obj, 'spec.minReadySeconds'),
      ...nonNegative(obj, 'spec.revisionHistoryLimit'),
    );
    const type = field(obj, 'spec.strategy.type');
    if (type !== 'RollingUpdate' && type !== 'Recreate')
      causes.push(FieldErrors.notSupported('spec.strategy.type', type, ['Recreate', 'RollingUpdate']));
    if (type === 'Recreate' && field(obj, 'spec.strategy.rollingUpdate') !== undefined) {
      causes.push(
        FieldErrors.forbidden('spec.strategy.rollingUpdate', "may not be specified when strategy `type` is 'Recreate'"),
      );
    }
    const surge = field(obj, 'spec.strategy.rollingUpdate.maxSurge');
    const unavailable = field(obj, 'spec.strategy.rollingUpdate.maxUnavailable');
    const isZero = (v: unknown): boolean => v === 0 || v === '0%' || v === '0';
    if (type === 'RollingUpdate' && isZero(surge) && isZero(unavailable)) {
      causes.push(
        FieldErrors.invalid(
          'spec.strategy.rollingUpdate.maxUnavailable',
          unavailable,
          'may not be 0 when `maxSurge` is 0',
        ),
      );
    }
    const deadline = field(obj, 'spec.progressDeadlineSeconds');
    const minReady = field(obj, 'spec.minReadySeconds');
    if (typeof deadline === 'number' && typeof minReady === 'number' && deadline <= minReady) {
      causes.push(
        FieldErrors.invalid('spec.progressDeadlineSeconds', deadline, 'must be greater than minReadySeconds'),
      );
    }
    return causes;
  },
  validateUpdate: immutableSelector,
  statusMetadata: ['annotations'],
  // ValidateDeploymentStatusUpdate: ObjectMeta update rules and the status, not the spec.
  statusValidation: 'metadata',
  bumpsGeneration(next, old) {
    return (
      !deepEqual(next.spec, old.spec) || !deepEqual(next.metadata.annotations ?? {}, old.metadata.annotations ?? {})
    );
  },
};

const deployments: KindInfo = {
  group: 'apps',
  version: 'v1',
  kind: 'Deployment',
  resource: 'deployments',
  singular: 'deployment',
  namespaced: true,
  shortNames: ['deploy'],
  categories: ['all'],
  status: true,
  generation: true,
  scale: replicasScale,
  strategy: deploymentStrategy,
  columns: [
    col('Ready', (o) => `${num(o, 'status.readyReplicas')}/${num(o, 'spec.replicas')}`, {
      description: 'Number of the pod with ready state',
    }),
    col('Up-to-date', (o) => num(o, 'status.updatedReplicas'), {
      type: 'integer',
      description:
        'Total number of non-terminated pods targeted by this deployment that have the desired template spec.',
    }),
    col('Available', (o) => num(o, 'status.availableReplicas'), {
      type: 'integer',
      description: 'Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.',
    }),
    age,
    ...wideTemplateColumns('spec.template', true),
  ],
  noAge: true,
};

const replicasets: KindInfo = {
  group: 'apps',
  version: 'v1',
  kind: 'ReplicaSet',
  resource: 'replicasets',
  singular: 'replicaset',
  namespaced: true,
  shortNames: ['rs'],
  categories: ['all'],
  status: true,
  generation: true,
  scale: replicasScale,
  strategy: {
    // ValidateReplicaSetStatusUpdate: ObjectMeta update rules and the status, not the spec.
    statusValidation: 'metadata',
    prepareForCreate: zeroStatus({ replicas: 0 }),
    defaults(obj) {
      spec(obj).replicas ??= 1;
      defaultTemplate(spec(obj).template);
    },
    validate(obj) {
      return [
        ...validateSelectorAndTemplate(obj, 'spec.template', ['Always']),
        ...nonNegative(obj, 'spec.replicas'),
        ...nonNegative(obj, 'spec.minReadySeconds'),
      ];
    },
    validateUpdate: immutableSelector,
  },
  columns: [
    col('Desired', (o) => num(o, 'spec.replicas'), { type: 'integer', description: 'Number of desired pods.' }),
    col('Current', (o) => num(o, 'status.replicas'), { type: 'integer', description: 'Number of actual pods.' }),
    col('Ready', (o) => num(o, 'status.readyReplicas'), { type: 'integer', description: 'Number of ready pods.' }),
    age,
    ...wideTemplateColumns('spec.template', true),
  ],
  noAge: true,
};

const statefulsets: KindInfo = {
  group: 'apps',
  version: 'v1',
  kind: 'StatefulSet',
  resource: 'statefulsets',
  singular: 'statefulset',
  namespaced: true,
  shortNames: ['sts'],
  categories: ['all'],
  status: true,
  generation: true,
  scale: replicasScale,
  strategy: {
    // ValidateStatefulSetStatusUpdate: ObjectMeta update rules and the status, not the spec.
    statusValidation: 'metadata',
    prepareForCreate: zeroStatus({ replicas: 0, availableReplicas: 0 }),
    defaults(obj) {
      const s = spec(obj);
      s.replicas ??= 1;
      s.podManagementPolicy ??= 'OrderedReady';
      const us = (isPlainObject(s.updateStrategy) ? s.updateStrategy : (s.updateStrategy = {})) as Obj;
      us.type ??= 'RollingUpdate';
      if (us.type === 'RollingUpdate') {
        const ru = (isPlainObject(us.rollingUpdate) ? us.rollingUpdate : (us.rollingUpdate = {})) as Obj;
        ru.partition ??= 0;
      }
      s.revisionHistoryLimit ??= 10;
      s.persistentVolumeClaimRetentionPolicy ??= { whenDeleted: 'Retain', whenScaled: 'Retain' };
      defaultTemplate(s.template);
      if (Array.isArray(s.volumeClaimTemplates)) {
        for (const t of s.volumeClaimTemplates as Obj[]) {
          if (!isPlainObject(t.spec)) t.spec = {};
          (t.spec as Obj).volumeMode ??= 'Filesystem';
          t.apiVersion ??= 'v1';
          t.kind ??= 'PersistentVolumeClaim';
        }
      }
    },
    validate(obj) {
      const causes = [
        ...validateSelectorAndTemplate(obj, 'spec.template', ['Always']),
        ...nonNegative(obj, 'spec.replicas'),
      ];
      const policy = field(obj, 'spec.podManagementPolicy');
      if (policy !== 'OrderedReady' && policy !== 'Parallel')
        causes.push(FieldErrors.notSupported('spec.podManagementPolicy', policy, ['OrderedReady', 'Parallel']));
      const type = field(obj, 'spec.updateStrategy.type');
      if (type !== 'RollingUpdate' && type !== 'OnDelete')
        causes.push(FieldErrors.notSupported('spec.updateStrategy.type', type, ['OnDelete', 'RollingUpdate']));
      return causes;
    },
    validateUpdate(next, old) {
      // Only replicas, ordinals, template, updateStrategy, persistentVolumeClaimRetentionPolicy, revisionHistoryLimit and minReadySeconds may change.
      const keep = [
        'replicas',
        'ordinals',
        'template',
        'updateStrategy',
        'persistentVolumeClaimRetentionPolicy',
        'revisionHistoryLimit',
        'minReadySeconds',
      ];
      const frozen = (o: KubeObject): Obj =>
        Object.fromEntries(Object.entries(spec(o)).filter(([k]) => !keep.includes(k)));
      if (!deepEqual(frozen(next), frozen(old))) {
        return [
          FieldErrors.forbidden(
            'spec',
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
          ),
        ];
      }
      return [];
    },
  },
  columns: [
    col('Ready', (o) => `${num(o, 'status.readyReplicas')}/${num(o, 'spec.replicas')}`, {
      description: 'Number of the pod with ready state',
    }),
    age,
    ...wideTemplateColumns('spec.template', false),
  ],
  noAge: true,
};

const daemonsets: KindInfo = {
  group: 'apps',
  version: 'v1',
  kind: 'DaemonSet',
  resource: 'daemonsets',
  singular: 'daemonset',
  namespaced: true,
  shortNames: ['ds'],
  categories: ['all'],
  status: true,
  generation: true,
  strategy: {
    // ValidateDaemonSetStatusUpdate: ObjectMeta update rules and the status, not the spec.
    statusValidation: 'metadata',
    prepareForCreate: zeroStatus({
      currentNumberScheduled: 0,
      numberMisscheduled: 0,
      desiredNumberScheduled: 0,
      numberReady: 0,
    }),
    defaults(obj) {
      const s = spec(obj);
      const us = (isPlainObject(s.updateStrategy) ? s.updateStrategy : (s.updateStrategy = {})) as Obj;
      us.type ??= 'RollingUpdate';
      if (us.type === 'RollingUpdate') {
        const ru = (isPlainObject(us.rollingUpdate) ? us.rollingUpdate : (us.rollingUpdate = {})) as Obj;
        ru.maxUnavailable ??= 1;
        ru.maxSurge ??= 0;
      }
      s.revisionHistoryLimit ??= 10;
      defaultTemplate(s.template);
    },
    validate(obj) {
      const causes = validateSelectorAndTemplate(obj, 'spec.template', ['Always']);
      const type = field(obj, 'spec.updateStrategy.type');
      if (type !== 'RollingUpdate' && type !== 'OnDelete')
        causes.push(FieldErrors.notSupported('spec.updateStrategy.type', type, ['OnDelete', 'RollingUpdate']));
      return causes;
    },
    validateUpdate: immutableSelector,
  },
  columns: [
    col('Desired', (o) => num(o, 'status.desiredNumberScheduled'), {
      type: 'integer',
      description: 'The desired number of pods.',
    }),
    col('Current', (o) => num(o, 'status.currentNumberScheduled'), {
      type: 'integer',
      description: 'The current number of pods.',
    }),
    col('Ready', (o) => num(o, 'status.numberReady'), { type: 'integer', description: 'The number of pods ready.' }),
    col('Up-to-date', (o) => num(o, 'status.updatedNumberScheduled'), {
      type: 'integer',
      description: 'The number of pods updated.',
    }),
    col('Available', (o) => num(o, 'status.numberAvailable'), {
      type: 'integer',
      description: 'The number of pods available.',
    }),
    col(
      'Node Selector',
      (o) => {
        const sel = field(o, 'spec.template.spec.nodeSelector');
        return isPlainObject(sel) && Object.keys(sel).length > 0
          ? Object.entries(sel)
              .map(([k, v]) => `${k}=${String(v)}`)
              .join(',')
          : '<none>';
      },
      { description: 'The node selector of the daemon set.' },
    ),
    age,
    ...wideTemplateColumns('spec.template', true),
  ],
  noAge: true,
};

const controllerrevisions: KindInfo = {
  group: 'apps',
  version: 'v1',
  kind: 'ControllerRevision',
  resource: 'controllerrevisions',
  singular: 'controllerrevision',
  namespaced: true,
  strategy: {
    validate(obj) {
      return typeof obj.revision === 'number' && obj.revision >= 0
        ? []
        : [FieldErrors.invalid('revision', obj.revision, 'must be greater than or equal to 0')];
    },
    validateUpdate(next, old) {
      return deepEqual(next.data, old.data) ? [] : [FieldErrors.invalid('data', '', 'field is immutable')];
    },
  },
  columns: [
    col(
      'Controller',
      (o) => {
        const owner = o.metadata.ownerReferences?.find((r) => r.controller);
        if (!owner) return '<none>';
        const group = owner.apiVersion.includes('/') ? owner.apiVersion.split('/')[0] : '';
        return `${owner.kind.toLowerCase()}${group ? `.${group}` : ''}/${owner.name}`;
      },
      { description: 'The controller that owns this revision.' },
    ),
    col('Revision', (o) => num(o, 'revision'), { type: 'integer', description: 'The revision number.' }),
  ],
};

function jobStatus(o: KubeObject): string {
  const conditions = (field(o, 'status.conditions') as Obj[] | undefined) ?? [];
  const has = (type: string): boolean => conditions.some((c) => c.type === type && c.status === 'True');
  if (has('Complete')) return 'Complete';
  if (has('Failed')) return 'Failed';
  if (field(o, 'metadata.deletionTimestamp') !== undefined) return 'Terminating';
  if (has('SuccessCriteriaMet')) return 'SuccessCriteriaMet';
  if (has('FailureTarget')) return 'FailureTarget';
  if (has('Suspended')) return 'Suspended';
  return 'Running';
}

function jobDuration(o: KubeObject, now: number): string {
  const start = str(o, 'status.startTime');
  if (!start) return '';
  const end = str(o, 'status.completionTime');
  const ms = (end ? Date.parse(end) : now) - Date.parse(start);
  return ageOf(new Date(now - ms).toISOString(), now);
}

const JOB_UID_LABEL = 'batch.kubernetes.io/controller-uid';

const jobs: KindInfo = {
  group: 'batch',
  version: 'v1',
  kind: 'Job',
  resource: 'jobs',
  singular: 'job',
  namespaced: true,
  categories: ['all'],
  status: true,
  generation: true,
  selectableFields: { 'status.successful': (o) => String(num(o, 'status.succeeded')) },
  strategy: {
    // ValidateJobUpdateStatus: ObjectMeta update rules and the status, not the spec.
    statusValidation: 'metadata',
    defaults(obj) {
      const s = spec(obj);
      const indexed = s.completionMode === 'Indexed';
      if (s.completions === undefined && s.parallelism === undefined) {
        s.completions = 1;
        s.parallelism = 1;
      } else if (s.parallelism === undefined) s.parallelism = 1;
      s.backoffLimit ??= indexed && s.backoffLimitPerIndex !== undefined ? 2147483647 : 6;
      s.completionMode ??= 'NonIndexed';
      s.suspend ??= false;
      s.podReplacementPolicy ??= 'TerminatingOrFailed';
      s.manualSelector ??= undefined;
      if (s.manualSelector === undefined) delete s.manualSelector;
      defaultTemplate(s.template);
    },
    prepareForCreate(obj) {
      obj.status = {};
      const s = spec(obj);
      if (s.manualSelector === true) return;
      const uid = obj.metadata.uid!;
      const name = obj.metadata.name ?? '';
      s.selector = { matchLabels: { [JOB_UID_LABEL]: uid } };
      const template = (isPlainObject(s.template) ? s.template : (s.template = {})) as Obj;
      const meta = (isPlainObject(template.metadata) ? template.metadata : (template.metadata = {})) as Obj;
      meta.labels = {
        ...((meta.labels as Obj) ?? {}),
        [JOB_UID_LABEL]: uid,
        'batch.kubernetes.io/job-name': name,
        'controller-uid': uid,
        'job-name': name,
      };
    },
    validate(obj) {
      const causes = validateSelectorAndTemplate(obj, 'spec.template', ['OnFailure', 'Never']);
      causes.push(
        ...nonNegative(obj, 'spec.parallelism'),
        ...nonNegative(obj, 'spec.completions'),
        ...nonNegative(obj, 'spec.backoffLimit'),
      );
      const mode = field(obj, 'spec.completionMode');
      if (mode !== 'NonIndexed' && mode !== 'Indexed')
        causes.push(FieldErrors.notSupported('spec.completionMode', mode, ['NonIndexed', 'Indexed']));
      if (mode === 'Indexed' && field(obj, 'spec.completions') === undefined)
        causes.push(FieldErrors.required('spec.completions', 'when completion mode is Indexed'));
      return causes;
    },
    validateUpdate(next, old) {
      const causes = immutableSelector(next, old);
      if (
        !deepEqual(field(next, 'spec.template'), field(old, 'spec.template')) &&
        field(old, 'spec.suspend') !== true
      ) {
        causes.push(FieldErrors.invalid('spec.template', field(next, 'spec.template'), 'field is immutable'));
      }
      if (
        field(next, 'spec.completions') !== field(old, 'spec.completions') &&
        field(next, 'spec.completionMode') !== 'Indexed'
      ) {
        causes.push(FieldErrors.invalid('spec.completions', field(next, 'spec.completions'), 'field is immutable'));
      }
      return causes;
    },
  },
  columns: [
    col('Status', jobStatus, { description: 'Status of the job.' }),
    col(
      'Completions',
      (o) => {
        const completions = field(o, 'spec.completions');
        const succeeded = num(o, 'status.succeeded');
        if (typeof completions === 'number') return `${succeeded}/${completions}`;
        const parallelism = num(o, 'spec.parallelism');
        return parallelism > 1 ? `${succeeded}/1 of ${parallelism}` : `${succeeded}/1`;
      },
      { description: 'The desired number of successfully finished pods the job should be run with.' },
    ),
    col('Duration', jobDuration, { description: 'Time required to complete the job.' }),
    age,
    ...wideTemplateColumns('spec.template', true),
  ],
  noAge: true,
};

const cronjobs: KindInfo = {
  group: 'batch',
  version: 'v1',
  kind: 'CronJob',
  resource: 'cronjobs',
  singular: 'cronjob',
  namespaced: true,
  shortNames: ['cj'],
  categories: ['all'],
  status: true,
  generation: true,
  strategy: {
    // cronJobStatusStrategy validates nothing: no spec check on a status write.
    statusValidation: 'metadata',
    prepareForCreate: zeroStatus({}),
    defaults(obj) {
      const s = spec(obj);
      s.concurrencyPolicy ??= 'Allow';
      s.suspend ??= false;
      s.successfulJobsHistoryLimit ??= 3;
      s.failedJobsHistoryLimit ??= 1;
      const jobTemplate = isPlainObject(s.jobTemplate) ? (s.jobTemplate as Obj) : undefined;
      if (jobTemplate && isPlainObject(jobTemplate.spec)) defaultTemplate((jobTemplate.spec as Obj).template);
    },
    validate(obj) {
      const causes: StatusCause[] = [];
      const schedule = field(obj, 'spec.schedule');
      if (typeof schedule !== 'string' || schedule.trim() === '')
        causes.push(FieldErrors.required('spec.schedule', ''));
      const policy = field(obj, 'spec.concurrencyPolicy');
      if (!['Allow', 'Forbid', 'Replace'].includes(String(policy)))
        causes.push(FieldErrors.notSupported('spec.concurrencyPolicy', policy, ['Allow', 'Forbid', 'Replace']));
      const template = field(obj, 'spec.jobTemplate.spec.template');
      if (!isPlainObject(template)) causes.push(FieldErrors.required('spec.jobTemplate.spec.template', ''));
      else
        causes.push(...validatePodSpec(template.spec, 'spec.jobTemplate.spec.template.spec', ['OnFailure', 'Never']));
      return causes;
    },
  },
  columns: [
    col('Schedule', (o) => str(o, 'spec.schedule'), { description: 'The schedule in Cron format.' }),
    col('Timezone', (o) => str(o, 'spec.timeZone', '<none>'), {
      description: 'The time zone name for the given schedule.',
    }),
    col('Suspend', (o) => (field(o, 'spec.suspend') === true ? 'True' : 'False'), {
      description: 'Whether the cron job is suspended.',
    }),
    col(
      'Active',
      (o) => (Array.isArray(field(o, 'status.active')) ? (field(o, 'status.active') as unknown[]).length : 0),
      { type: 'integer', description: 'The number of currently running jobs.' },
    ),
    col(
      'Last Schedule',
      (o, now) => (str(o, 'status.lastScheduleTime') ? ageOf(str(o, 'status.lastScheduleTime'), now) : '<none>'),
      { description: 'The last time the job was successfully scheduled.' },
    ),
    age,
    ...wideTemplateColumns('spec.jobTemplate.spec.template', false),
    col('Selector', (o) => selectorString(field(o, 'spec.jobTemplate.spec.selector')), {
      priority: 1,
      description: 'Label selector for the pods.',
    }),
  ],
  noAge: true,
};

/** A map selector (ReplicationController's spec.selector) as labels.SelectorFromSet prints it: `k=v` sorted, joined. */
export function mapSelectorString(selector: unknown): string {
  if (!isPlainObject(selector) || Object.keys(selector).length === 0) return '<none>';
  return Object.keys(selector)
    .sort()
    .map((k) => `${k}=${String(selector[k])}`)
    .join(',');
}

function labelsString(labels: unknown): string {
  return isPlainObject(labels) && Object.keys(labels).length > 0 ? mapSelectorString(labels) : '<none>';
}

/**
 * SetDefaults_ReplicationController: the selector and the object's labels default to the template's labels (when
 * they are empty), replicas to 1; the template's pod spec gets the pod defaults.
 */
function defaultReplicationController(obj: KubeObject): void {
  const s = spec(obj);
  const labels = field(s.template, 'metadata.labels');
  if (isPlainObject(labels)) {
    if (!isPlainObject(s.selector) || Object.keys(s.selector).length === 0) s.selector = { ...labels };
    if (Object.keys(obj.metadata.labels ?? {}).length === 0)
      obj.metadata.labels = { ...(labels as Record<string, string>) };
  }
  s.replicas ??= 1;
  defaultTemplate(s.template);
}

/** ValidateReplicationControllerSpec and ValidatePodTemplateSpecForRC: an equality selector the template's labels satisfy. */
function validateReplicationController(obj: KubeObject): StatusCause[] {
  const s = isPlainObject(obj.spec) ? obj.spec : {};
  const causes: StatusCause[] = [...nonNegative(obj, 'spec.minReadySeconds')];
  const selector = isPlainObject(s.selector) ? (s.selector as Record<string, unknown>) : {};
  if (Object.keys(selector).length === 0) causes.push(FieldErrors.required('spec.selector', ''));
  causes.push(...nonNegative(obj, 'spec.replicas'));
  const template = s.template;
  if (!isPlainObject(template)) {
    causes.push(FieldErrors.required('spec.template', ''));
    return causes;
  }
  const labels = (field(template, 'metadata.labels') ?? {}) as Record<string, unknown>;
  if (Object.keys(selector).length > 0 && Object.entries(selector).some(([k, v]) => labels[k] !== v))
    causes.push(
      FieldErrors.invalid('spec.template.metadata.labels', labels, '`selector` does not match template `labels`'),
    );
  causes.push(...validatePodSpec(template.spec, 'spec.template.spec', ['Always']));
  if (field(template, 'spec.activeDeadlineSeconds') !== undefined)
    causes.push(
      FieldErrors.forbidden(
        'spec.template.spec.activeDeadlineSeconds',
        'activeDeadlineSeconds in ReplicationController is not Supported',
      ),
    );
  return causes;
}

/** v1 ReplicationController: the ReplicaSet's older sibling, with an equality selector (the replication manager runs it). */
const replicationcontrollers: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'ReplicationController',
  resource: 'replicationcontrollers',
  singular: 'replicationcontroller',
  namespaced: true,
  shortNames: ['rc'],
  categories: ['all'],
  status: true,
  generation: true,
  scale: replicasScale,
  strategy: {
    // ValidateReplicationControllerStatusUpdate: ObjectMeta update rules and the status, not the spec.
    statusValidation: 'metadata',
    prepareForCreate: zeroStatus({ replicas: 0 }),
    defaults: defaultReplicationController,
    validate: validateReplicationController,
  },
  columns: [
    col('Desired', (o) => num(o, 'spec.replicas'), {
      type: 'integer',
      description:
        'Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller',
    }),
    col('Current', (o) => num(o, 'status.replicas'), {
      type: 'integer',
      description:
        'Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller',
    }),
    col('Ready', (o) => num(o, 'status.readyReplicas'), {
      type: 'integer',
      description: 'The number of ready replicas for this replication controller.',
    }),
    age,
    ...wideTemplateColumns('spec.template', false),
    col('Selector', (o) => mapSelectorString(field(o, 'spec.selector')), {
      priority: 1,
      description:
        'Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors',
    }),
  ],
  noAge: true,
};

/** v1 PodTemplate: a stored pod template (validated and defaulted as a pod's spec; nothing runs it). */
const podtemplates: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'PodTemplate',
  resource: 'podtemplates',
  singular: 'podtemplate',
  namespaced: true,
  strategy: {
    defaults(obj) {
      defaultTemplate(obj.template);
    },
    validate(obj) {
      if (!isPlainObject(obj.template)) return [FieldErrors.required('template', '')];
      return validatePodSpec(obj.template.spec, 'template.spec');
    },
  },
  columns: [
    col('Containers', (o) => containerNames(o.template), { description: 'Names of each container in the template.' }),
    col('Images', (o) => containerImages(o.template), {
      description: 'Images referenced by each container in the template.',
    }),
    col('Pod Labels', (o) => labelsString(field(o, 'template.metadata.labels')), {
      description: 'The labels for the pod template.',
    }),
  ],
  noAge: true,
};

/** The core group's workload kinds. */
export const coreWorkloadKinds: KindInfo[] = [podtemplates, replicationcontrollers];

export const workloadKinds: KindInfo[] = [
  deployments,
  replicasets,
  statefulsets,
  daemonsets,
  controllerrevisions,
  jobs,
  cronjobs,
];
