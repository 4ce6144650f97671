import { Errors, FieldErrors, type StatusCause } from '../../api/errors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { ageOf, col, str } from '../printers.js';
import type { KindInfo, StrategyContext } from '../types.js';

/**
 * scheduling.k8s.io/v1 PriorityClass and the Priority admission plugin (plugin/pkg/admission/priority), which
 * resolves a new pod's spec.priority and spec.preemptionPolicy from its class.
 */
type Obj = Record<string, unknown>;

export const PRIORITY_CLASSES = 'scheduling.k8s.io/priorityclasses';
const RESOURCE = { group: 'scheduling.k8s.io', resource: 'priorityclasses' };
const PODS = { group: '', resource: 'pods' };
const SYSTEM_PREFIX = 'system-';
const HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000;
const PREEMPTION_POLICIES = ['PreemptLowerPriority', 'Never'];

/** SystemPriorityClasses(): what kube-apiserver's scheduling post-start hook creates. */
export const systemPriorityClasses: readonly Obj[] = [
  {
    metadata: { name: 'system-node-critical' },
    value: 2_000_001_000,
    description: 'Used for system critical pods that must not be moved from their current node.',
  },
  {
    metadata: { name: 'system-cluster-critical' },
    value: 2_000_000_000,
    description:
      'Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.',
  },
];
const systemNames = new Set(systemPriorityClasses.map((c) => (c.metadata as { name: string }).name));

/** IsKnownSystemPriorityClass: a `system-` name must be one of the two, with their value and globalDefault. */
function systemClassError(name: string, value: unknown, globalDefault: boolean): string | undefined {
  const known = systemPriorityClasses.find((c) => (c.metadata as { name: string }).name === name);
  if (!known) return `${name} is not a known system priority class`;
  if (known.value !== value) return `value of ${name} PriorityClass must be ${String(known.value)}`;
  if (globalDefault) return `globalDefault of ${name} PriorityClass must be false`;
  return undefined;
}

function validatePriorityClass(obj: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const name = obj.metadata.name ?? '';
  if (typeof obj.value !== 'number') causes.push(FieldErrors.required('value', ''));
  if (name.startsWith(SYSTEM_PREFIX)) {
    const why = systemClassError(name, obj.value, obj.globalDefault === true);
    if (why)
      causes.push(
        FieldErrors.forbidden(
          'metadata.name',
          `priority class names with '${SYSTEM_PREFIX}' prefix are reserved for system use only. error: ${why}`,
        ),
      );
  } else if (typeof obj.value === 'number' && obj.value > HIGHEST_USER_DEFINABLE_PRIORITY) {
    causes.push(
      FieldErrors.forbidden(
        'value',
        `maximum allowed value of a user defined priority is ${HIGHEST_USER_DEFINABLE_PRIORITY}`,
      ),
    );
  }
  if (obj.preemptionPolicy !== undefined && !PREEMPTION_POLICIES.includes(String(obj.preemptionPolicy))) {
    causes.push(
      obj.preemptionPolicy === ''
        ? FieldErrors.required('preemptionPolicy', '')
        : FieldErrors.notSupported('preemptionPolicy', obj.preemptionPolicy, PREEMPTION_POLICIES),
    );
  }
  return causes;
}

/** getDefaultPriorityClass: the globalDefault class, the lowest value if a race left several. */
function defaultClass(ctx: StrategyContext): KubeObject | undefined {
  let found: KubeObject | undefined;
  for (const pc of ctx.objects(PRIORITY_CLASSES)) {
    if (pc.globalDefault === true && (!found || (found.value as number) > (pc.value as number))) found = pc;
  }
  return found;
}

/** The Priority plugin's validation of PriorityClass writes: only one globalDefault class. */
function admitPriorityClass(obj: KubeObject, ctx: StrategyContext, old?: KubeObject): void {
  if (obj.globalDefault !== true) return;
  const current = defaultClass(ctx);
  if (current && (!old || current.metadata.name !== obj.metadata.name)) {
    throw Errors.forbidden(
      RESOURCE,
      obj.metadata.name ?? '',
      `PriorityClass ${current.metadata.name ?? ''} is already marked as default. Only one default can exist`,
    );
  }
}

/** admission.NewForbidden names the object by generateName when the name is still to be generated. */
function admissionName(pod: KubeObject): string {
  const { name = '', generateName } = pod.metadata;
  return generateName && name.length === generateName.length + 5 && name.startsWith(generateName) ? generateName : name;
}

/**
 * The Priority admission plugin on a pod create: the class named (or the globalDefault class, whose name the pod
 * then carries) gives spec.priority and spec.preemptionPolicy; a pod that sets either to something else, or names
 * a class that does not exist, is refused with 403 as kube-apiserver refuses it.
 */
export function admitPodPriority(pod: KubeObject, ctx: StrategyContext): void {
  const spec = (isPlainObject(pod.spec) ? pod.spec : (pod.spec = {})) as Obj;
  const className = typeof spec.priorityClassName === 'string' ? spec.priorityClassName : '';
  let priority = 0;
  let preemptionPolicy: unknown = 'PreemptLowerPriority';
  if (className === '') {
    const pc = defaultClass(ctx);
    if (pc) {
      spec.priorityClassName = pc.metadata.name;
      priority = pc.value as number;
      preemptionPolicy = pc.preemptionPolicy;
    }
  } else {
    const pc = ctx.objects(PRIORITY_CLASSES).find((c) => c.metadata.name === className);
    if (!pc) throw Errors.forbidden(PODS, admissionName(pod), `no PriorityClass with name ${className} was found`);
    priority = pc.value as number;
    preemptionPolicy = pc.preemptionPolicy;
  }
  if (spec.priority !== undefined && spec.priority !== null && spec.priority !== priority) {
    throw Errors.forbidden(
      PODS,
      admissionName(pod),
      `the integer value of priority (${String(spec.priority)}) must not be provided in pod spec; priority admission controller computed ${priority} from the given PriorityClass name`,
    );
  }
  spec.priority = priority;
  if (preemptionPolicy !== undefined) {
    if (
      spec.preemptionPolicy !== undefined &&
      spec.preemptionPolicy !== null &&
      spec.preemptionPolicy !== preemptionPolicy
    ) {
      throw Errors.forbidden(
        PODS,
        admissionName(pod),
        `the string value of PreemptionPolicy (${String(spec.preemptionPolicy)}) must not be provided in pod spec; priority admission controller computed ${String(preemptionPolicy)} from the given PriorityClass name`,
      );
    }
    spec.preemptionPolicy = preemptionPolicy;
  }
}

/** The plugin on a pod update: priority set at create is kept when the body leaves it out (validation forbids changes). */
export function keepPodPriority(next: KubeObject, old: KubeObject): void {
  if (!isPlainObject(next.spec) || !isPlainObject(old.spec)) return;
  const spec = next.spec;
  if (spec.priority === undefined && old.spec.priority !== undefined) spec.priority = old.spec.priority;
  if (spec.preemptionPolicy === undefined && old.spec.preemptionPolicy !== undefined)
    spec.preemptionPolicy = old.spec.preemptionPolicy;
}

export const priorityClasses: KindInfo = {
  group: 'scheduling.k8s.io',
  version: 'v1',
  kind: 'PriorityClass',
  resource: 'priorityclasses',
  singular: 'priorityclass',
  namespaced: false,
  shortNames: ['pc'],
  strategy: {
    defaults(obj) {
      obj.preemptionPolicy ??= 'PreemptLowerPriority';
    },
    prepareForCreate(obj, ctx) {
      admitPriorityClass(obj, ctx);
    },
    prepareForUpdate(next, old, ctx) {
      admitPriorityClass(next, ctx, old);
    },
    validate: validatePriorityClass,
    validateUpdate(next, old) {
      const causes: StatusCause[] = [];
      if (next.value !== old.value) causes.push(FieldErrors.forbidden('value', 'may not be changed in an update.'));
      if (next.preemptionPolicy !== old.preemptionPolicy)
        causes.push(FieldErrors.invalid('preemptionPolicy', next.preemptionPolicy, 'field is immutable'));
      return causes;
    },
    beforeDelete(obj) {
      const name = obj.metadata.name ?? '';
      if (systemNames.has(name))
        throw Errors.forbidden(RESOURCE, name, 'this is a system priority class and cannot be deleted');
    },
  },
  columns: [
    col('Value', (o) => (typeof o.value === 'number' ? o.value : 0), {
      type: 'integer',
      description:
        'value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.',
    }),
    col('Global-Default', (o) => o.globalDefault === true, {
      type: 'boolean',
      description:
        'globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.',
    }),
    col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
      description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
    }),
    col('PreemptionPolicy', (o) => str(o, 'preemptionPolicy'), {
      description:
        'preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.',
    }),
  ],
  noAge: true,
};
