import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { Ajv, ErrorObject, Options as AjvOptions, ValidateFunction } from 'ajv';
import { closestWord } from '../api/closest.js';
import { ACTIONS, type Scenario } from './types.js';

/**
 * The JSON Schema of a scenario file. `schema/scenario.schema.json` is this object, written out for editors
 * (`sim replay --print-schema > schema/scenario.schema.json`; a test keeps the two equal). Scenario files
 * point at it with `# yaml-language-server: $schema=../../schema/scenario.schema.json`.
 */
const duration = {
  description: 'Cluster time: "90s", "5m", "1h30m", "2d", or a number of seconds',
  oneOf: [
    { type: 'string', pattern: '^([0-9]+(\\.[0-9]+)?(ms|s|m|h|d))+$|^[0-9]+(\\.[0-9]+)?$' },
    { type: 'number', minimum: 0 },
  ],
};
const kind = { type: 'string', minLength: 1, description: 'Kind (Deployment) or resource (deployments, deploy)' };
const apiVersion = { type: 'string', description: 'apps/v1; needed only when a kind is served by several groups' };
const namespace = { type: 'string', description: "Namespace (default: the scenario's)" };
const labelSelector = { type: 'string', description: 'Label selector, as kubectl -l: "app=web,tier!=db"' };

const objectRef = {
  type: 'object',
  required: ['kind', 'name'],
  additionalProperties: false,
  properties: { kind, apiVersion, name: { type: 'string' }, namespace },
};

const selectorProperties = {
  kind,
  apiVersion,
  namespace,
  allNamespaces: { type: 'boolean', description: 'Count in every namespace' },
  name: { type: 'string' },
  selector: labelSelector,
  owner: {
    type: 'string',
    pattern: '^[^/]+/[^/]+$',
    description: 'Kind/name of an owner, direct or through e.g. a ReplicaSet: "Deployment/webapp"',
  },
  where: {
    type: 'object',
    description: 'JSONPath → expected value, e.g. {"{.status.phase}": Running}; null: the field is absent',
    additionalProperties: true,
  },
};
const selector = { type: 'object', required: ['kind'], additionalProperties: false, properties: selectorProperties };
const eventMatcher = {
  type: 'object',
  required: ['kind'],
  additionalProperties: false,
  properties: {
    ...selectorProperties,
    event: {
      enum: ['ADDED', 'MODIFIED', 'DELETED', 'created', 'modified', 'deleted', 'terminating'],
      description:
        'Which change (default: any); terminating: the deletion began (deletionTimestamp set, or removed at once)',
    },
  },
};

const comparisonProperties = {
  equals: { description: 'The value must equal this (numbers and strings compare by text)' },
  notEquals: { description: 'The value must differ from this' },
  matches: { type: 'string', description: 'A regular expression the value must match' },
  min: { type: 'number' },
  max: { type: 'number' },
  exists: { type: 'boolean', description: 'Whether the object (or the jsonpath value) must exist' },
};

const stepRef = { oneOf: [{ type: 'string' }, { type: 'integer', minimum: 1 }] };
const window = {
  description:
    'Which steps the history is taken from: all (default), previous (the last step that is not an expect), a step name or number, or {from, to}',
  oneOf: [
    { type: 'string' },
    { type: 'integer', minimum: 1 },
    { type: 'object', additionalProperties: false, properties: { from: stepRef, to: stepRef } },
  ],
};

const objectCondition = {
  type: 'object',
  required: ['object'],
  additionalProperties: false,
  properties: {
    object: objectRef,
    jsonpath: { type: 'string', description: 'kubectl JSONPath: {.status.readyReplicas}' },
    condition: {
      type: 'string',
      description: 'Status of this condition type (e.g. Available) must be "True" (or `equals`)',
    },
    ...comparisonProperties,
  },
};
const countCondition = {
  type: 'object',
  required: ['count'],
  additionalProperties: false,
  properties: { count: selector, ...comparisonProperties },
};
const withDescription = (schema: { properties: Record<string, unknown> }, extra: Record<string, unknown> = {}) => ({
  ...schema,
  properties: { ...schema.properties, description: { type: 'string', description: 'Text for the report' }, ...extra },
});

const assertion = {
  oneOf: [
    withDescription(objectCondition),
    withDescription(countCondition),
    {
      type: 'object',
      required: ['order'],
      additionalProperties: false,
      properties: {
        order: {
          type: 'object',
          required: ['first', 'then'],
          additionalProperties: false,
          description: 'Every change matching `first` came before every change matching `then`',
          // biome-ignore lint/suspicious/noThenProperty: the scenario language's `order: {first, then}`
          properties: { first: eventMatcher, then: eventMatcher },
        },
        during: window,
        description: { type: 'string' },
      },
    },
    {
      type: 'object',
      required: ['events'],
      additionalProperties: false,
      properties: { events: eventMatcher, during: window, description: { type: 'string' }, ...comparisonProperties },
    },
    {
      type: 'object',
      required: ['always'],
      additionalProperties: false,
      properties: {
        always: {
          type: 'object',
          additionalProperties: false,
          description: 'Invariants on pods that held after every change in the window',
          properties: {
            owner: objectRef,
            pods: {
              type: 'object',
              additionalProperties: false,
              properties: { ...selectorProperties, kind: { const: 'Pod' } },
            },
            maxUnavailable: {
              type: 'integer',
              minimum: 0,
              description: "desired (the owner's spec.replicas) − ready pods",
            },
            maxSurge: { type: 'integer', minimum: 0, description: 'pods − desired' },
            minReady: { type: 'integer', minimum: 0 },
            maxPods: { type: 'integer', minimum: 0 },
            minPods: { type: 'integer', minimum: 0 },
          },
        },
        during: window,
        description: { type: 'string' },
      },
    },
  ],
};

const manifestSource = {
  description:
    'A manifest file (relative to the scenario file), or {file} / {manifest: inline YAML text, an object or a list}',
  oneOf: [
    { type: 'string' },
    {
      type: 'object',
      additionalProperties: false,
      properties: {
        file: { type: 'string' },
        manifest: { description: 'YAML text (multi-document), an object, or a list of objects' },
        namespace,
      },
      oneOf: [{ required: ['file'] }, { required: ['manifest'] }],
    },
  ],
};

const stepProperties: Record<string, unknown> = {
  name: { type: 'string', description: 'Names the step in the timeline and in failure messages' },
  apply: { ...manifestSource, description: 'Create or update (server-side apply when the server has it)' },
  create: { ...manifestSource, description: 'Create; fails if an object exists' },
  patch: {
    type: 'object',
    required: ['kind', 'name', 'patch'],
    additionalProperties: false,
    properties: {
      kind,
      apiVersion,
      name: { type: 'string' },
      namespace,
      type: { enum: ['strategic', 'merge', 'json'], description: 'default strategic' },
      patch: { description: 'The patch: an object (strategic, merge) or a list of operations (json)' },
      subresource: { enum: ['status'] },
    },
  },
  delete: {
    type: 'object',
    required: ['kind'],
    additionalProperties: false,
    properties: {
      kind,
      apiVersion,
      namespace,
      name: { type: 'string' },
      selector: labelSelector,
      cascade: { enum: ['background', 'foreground', 'orphan'], description: 'default background' },
      gracePeriodSeconds: { type: 'integer', minimum: 0 },
    },
    oneOf: [{ required: ['name'] }, { required: ['selector'] }],
  },
  scale: {
    type: 'object',
    required: ['kind', 'name', 'replicas'],
    additionalProperties: false,
    properties: { kind, apiVersion, name: { type: 'string' }, namespace, replicas: { type: 'integer', minimum: 0 } },
  },
  kubectl: {
    description:
      'Run the real kubectl against the scenario cluster: "get pods -o wide", a list of arguments, or {args, ...}',
    oneOf: [
      { type: 'string' },
      { type: 'array', items: { type: 'string' } },
      {
        type: 'object',
        required: ['args'],
        additionalProperties: false,
        properties: {
          args: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] },
          stdin: { type: 'string' },
          exitCode: { type: 'integer', description: 'expected exit code (default 0)' },
          contains: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] },
          matches: { type: 'string' },
          timeout: { ...duration, description: 'wall-clock limit (default 30s)' },
        },
      },
    ],
  },
  advance: {
    description: 'Move the virtual clock forward, running everything due on the way',
    oneOf: [duration, { type: 'object', required: ['by'], additionalProperties: false, properties: { by: duration } }],
  },
  sleep: {
    ...duration,
    description: 'Let this much cluster time pass (advances a virtual clock; waits on a real one)',
  },
  waitFor: {
    description: 'Let cluster time pass until the condition holds; fails after `timeout` (cluster time, default 5m)',
    oneOf: [
      withDescription(objectCondition, { timeout: duration }),
      withDescription(countCondition, { timeout: duration }),
    ],
  },
  expect: {
    description: 'Assertions: on objects, counts, and the history of changes',
    oneOf: [assertion, { type: 'array', minItems: 1, items: assertion }],
  },
  drain: {
    type: 'object',
    description:
      'Cordon nodes and evict their pods through the Eviction API (PodDisruptionBudgets decide), as kubectl drain --ignore-daemonsets, on cluster time',
    additionalProperties: false,
    properties: {
      node: { type: 'string' },
      selector: { ...labelSelector, description: 'The nodes to drain, by label: "pool=spot"' },
      timeout: {
        ...duration,
        description: 'how long refused evictions are retried, every 5s (cluster time, default 5m)',
      },
    },
    oneOf: [{ required: ['node'] }, { required: ['selector'] }],
  },
  fault: {
    type: 'object',
    required: ['type'],
    additionalProperties: false,
    properties: {
      type: { enum: ['node-fail', 'node-recover', 'pod-kill', 'container-crash'] },
      node: { type: 'string' },
      pod: { type: 'string' },
      selector: labelSelector,
      namespace,
      container: { type: 'string' },
      exitCode: { type: 'integer' },
    },
  },
};

export const scenarioSchema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  $id: 'https://kube-sim.dev/schemas/scenario.schema.json',
  title: 'kube-sim scenario',
  description: 'A scripted replay for `sim replay`: manifests, faults and clock moves, with assertions',
  type: 'object',
  required: ['name', 'steps'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', minLength: 1 },
    description: { type: 'string' },
    seed: {
      type: 'integer',
      minimum: 0,
      maximum: 4294967295,
      description: 'Seed for uids, generated names and IPs (default 1)',
    },
    startTime: {
      type: 'string',
      format: 'date-time',
      description: 'Start of virtual time (default 2025-01-01T00:00:00Z)',
    },
    nodes: {
      type: 'integer',
      minimum: 0,
      description:
        "Simulated nodes node-1 … node-N with their kubelets (default 3, as sim serve; 0: none; with a snapshot: added to the snapshot's, default 0)",
    },
    recorded: {
      type: 'object',
      description:
        'What sim record saw besides the user changes the steps re-apply: the source, the times, the changes by controllers and kubelets (not replayed)',
    },
    snapshot: {
      type: 'string',
      minLength: 1,
      description:
        "Start from this snapshot (sim snapshot export; a path relative to the scenario file): its nodes, pods and objects as they were, the clock at the snapshot's time unless startTime says",
    },
    controllers: { type: 'string', description: "Controllers to run (default '*'), as sim serve --controllers" },
    namespace: {
      type: 'string',
      description: "Namespace for objects that name none (default 'default'); created at start if missing",
    },
    history: {
      type: 'object',
      additionalProperties: false,
      properties: {
        exclude: {
          type: 'array',
          items: { type: 'string' },
          description: 'Resources not recorded (default: leases, events)',
        },
      },
    },
    steps: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        additionalProperties: false,
        properties: stepProperties,
        oneOf: ACTIONS.map((a) => ({ required: [a] })),
      },
    },
  },
} as const;

/** The options the scenario validator is compiled with (here, and ahead of time by scripts/build-bundle.mjs). */
export const SCENARIO_AJV_OPTIONS: AjvOptions = {
  allErrors: true,
  strict: false,
  validateFormats: false,
  verbose: true,
};

/**
 * Where the build writes the validator compiled ahead of time (ajv's standalone code), beside this module's compiled
 * file; the bundle's chunks sit at the same depth, so the path resolves alike from them.
 */
export const PRECOMPILED_VALIDATOR = new URL('../scenario/scenario-validator.cjs', import.meta.url);

const requireCjs = createRequire(import.meta.url);
let validator: ValidateFunction | undefined;

/**
 * The scenario validator: the build's precompiled one when it was made from this very schema (compiling the schema
 * takes ~0.2 s of every replay's start), else compiled now.
 */
export function scenarioValidator(): ValidateFunction {
  if (validator) return validator;
  try {
    const precompiled = requireCjs(fileURLToPath(PRECOMPILED_VALIDATOR)) as ValidateFunction & { schemaJson?: string };
    if (precompiled.schemaJson === JSON.stringify(scenarioSchema)) return (validator = precompiled);
  } catch {
    // Not built (a tsc-only build): compile it.
  }
  return (validator = compileScenarioValidator());
}

export function compileScenarioValidator(options: AjvOptions = {}): ValidateFunction {
  const { Ajv: AjvClass } = requireCjs('ajv') as { Ajv: typeof Ajv };
  return new AjvClass({ ...SCENARIO_AJV_OPTIONS, ...options }).compile(scenarioSchema);
}

/** Validates a parsed scenario; returns readable problems ("steps[2].waitFor: ...") or an empty list. */
export function validateScenario(value: unknown): string[] {
  const validator = scenarioValidator();
  if (validator(value)) {
    const problems: string[] = [];
    const start = (value as Scenario).startTime;
    if (start !== undefined && !Number.isFinite(Date.parse(start)))
      problems.push(`startTime: ${JSON.stringify(start)} is not an RFC 3339 time`);
    return problems;
  }
  return explain(value, validator.errors ?? []);
}

const didYouMean = (word: string, candidates: readonly string[]): string => {
  const near = closestWord(word, candidates);
  return near === undefined ? '' : ` (did you mean "${near}"?)`;
};

/** How much a mistake at the place itself says the value is not of a form at all: a wrong type most, then a missing key. */
const MISFIT: Record<string, number> = { type: 1000, const: 1000, required: 100 };
/** Keywords about a scalar value itself: a value no form takes is said in one line from the place's description. */
const SCALAR = new Set(['type', 'pattern', 'minimum', 'maximum', 'enum', 'const', 'minLength', 'format']);

/** The errors under a oneOf error, by the index of the branch they come from. */
function byBranch(o: ErrorObject, errors: readonly ErrorObject[]): Map<number, ErrorObject[]> {
  const prefix = `${o.schemaPath}/`;
  const branches = new Map<number, ErrorObject[]>();
  const inside = (path: string): boolean => path === o.instancePath || path.startsWith(`${o.instancePath}/`);
  for (const e of errors) {
    if (!e.schemaPath.startsWith(prefix) || !inside(e.instancePath)) continue;
    const i = Number(e.schemaPath.slice(prefix.length).split('/')[0]);
    branches.set(i, [...(branches.get(i) ?? []), e]);
  }
  return branches;
}

/** Whether one of a oneOf's branches passed (then the value matched several forms, or this one is fine). */
const someBranchPassed = (o: ErrorObject, branches: Map<number, ErrorObject[]>): boolean =>
  branches.size < ((o.schema as unknown[] | undefined)?.length ?? branches.size);

/**
 * How badly a value misses one form: a wrong type (1000) or a missing required key (100) at the place itself say
 * it is not this form; any other mistake weighs 1; a oneOf nested in the form counts as its best branch.
 */
function misfit(errors: readonly ErrorObject[], at: string): number {
  const nested = errors.filter((e) => e.keyword === 'oneOf');
  const outermost = nested.filter((n) => !nested.some((m) => m !== n && n.schemaPath.startsWith(`${m.schemaPath}/`)));
  const counted = new Set<ErrorObject>(outermost);
  let score = 0;
  for (const n of outermost) {
    const branches = byBranch(n, errors);
    for (const list of branches.values()) for (const e of list) counted.add(e);
    if (!someBranchPassed(n, branches))
      score += Math.min(...[...branches.values()].map((list) => misfit(list, n.instancePath)));
  }
  for (const e of errors) if (!counted.has(e)) score += (e.instancePath === at ? MISFIT[e.keyword] : undefined) ?? 1;
  return score;
}

/**
 * Where a `oneOf` failed, the form the author most likely meant: the branch the value fits (its type, its
 * required keys) with the fewest mistakes. Only that branch's errors are kept, so `equal: 3` in a waitFor is one
 * unknown key of the object form, not also a missing `count` and three unknown keys of the count form. A scalar
 * that fits no form is said once, from the description of what the place takes (`expected`).
 */
function chooseBranches(errors: ErrorObject[]): { live: ErrorObject[]; expected: Map<ErrorObject, string> } {
  let live = errors;
  const expected = new Map<ErrorObject, string>();
  const oneOfs = errors.filter((e) => e.keyword === 'oneOf').sort((a, b) => a.schemaPath.length - b.schemaPath.length);
  for (const o of oneOfs) {
    if (!live.includes(o)) continue;
    const branches = byBranch(o, live);
    if (someBranchPassed(o, branches)) continue;
    const ranked = [...branches.entries()].sort(
      (a, b) => misfit(a[1], o.instancePath) - misfit(b[1], o.instancePath) || a[0] - b[0],
    );
    const [best, bestErrors] = ranked[0]!;
    const describedHere = (e: ErrorObject): boolean =>
      e.keyword === 'oneOf' && e.instancePath === o.instancePath && describedBy(e) !== undefined;
    const scalarOnly =
      bestErrors.every((e) => e.instancePath === o.instancePath && (SCALAR.has(e.keyword) || e.keyword === 'oneOf')) &&
      !bestErrors.some(describedHere);
    const description = describedBy(o);
    const all = scalarOnly && description !== undefined;
    const drop = new Set<ErrorObject>();
    for (const [i, list] of branches) if (i !== best || all) for (const e of list) drop.add(e);
    live = live.filter((e) => !drop.has(e));
    if (all) expected.set(o, description);
  }
  return { live, expected };
}

const describedBy = (e: ErrorObject): string | undefined =>
  (e.parentSchema as { description?: string } | undefined)?.description;

/** Turns ajv's errors into one precise line per mistake. */
function explain(value: unknown, errors: ErrorObject[]): string[] {
  const where = (path: string): string => {
    const parts = path.split('/').slice(1);
    let out = '';
    for (const p of parts) out += /^\d+$/.test(p) ? `[${p}]` : out === '' ? p : `.${p}`;
    return out === '' ? '(top level)' : out;
  };
  const out = new Set<string>();
  // Steps with no action or two actions: say so in words rather than as failed oneOf branches.
  const stepKeys = ['name', ...ACTIONS];
  const steps = (value as { steps?: unknown }).steps;
  if (Array.isArray(steps)) {
    steps.forEach((step, i) => {
      if (step === null || typeof step !== 'object' || Array.isArray(step)) return;
      const actions = Object.keys(step).filter((k) => (ACTIONS as readonly string[]).includes(k));
      const unknown = Object.keys(step).filter((k) => !stepKeys.includes(k));
      for (const key of unknown) {
        const near = closestWord(key, stepKeys);
        out.add(
          `steps[${i}]: unknown key "${key}" ${near ? `(did you mean "${near}"?)` : `(a step has a name and one of: ${ACTIONS.join(', ')})`}`,
        );
      }
      if (unknown.length === 0 && actions.length !== 1)
        out.add(
          `steps[${i}]: a step needs exactly one action (one of: ${ACTIONS.join(', ')}), found ${actions.length === 0 ? 'none' : actions.join(', ')}`,
        );
    });
  }
  const atStep = (e: ErrorObject): boolean => /^\/steps\/\d+$/.test(e.instancePath);
  const { live, expected } = chooseBranches(
    errors.filter((e) => !(atStep(e) && ['required', 'oneOf', 'additionalProperties'].includes(e.keyword))),
  );
  // A misspelt required key is one mistake: the unknown key with its suggestion says it, not also "missing".
  const suggested = new Set<string>();
  for (const e of live)
    if (e.keyword === 'additionalProperties') {
      const known = Object.keys((e.parentSchema as { properties?: object } | undefined)?.properties ?? {});
      const near = closestWord((e.params as { additionalProperty: string }).additionalProperty, known);
      if (near !== undefined) suggested.add(`${e.instancePath}/${near}`);
    }
  for (const e of live) {
    if (
      e.keyword === 'required' &&
      suggested.has(`${e.instancePath}/${(e.params as { missingProperty: string }).missingProperty}`)
    )
      continue;
    if (e.keyword === 'oneOf' || e.keyword === 'anyOf') {
      const description = expected.get(e);
      if (description)
        out.add(
          `${where(e.instancePath)}: ${JSON.stringify(instanceAt(value, e.instancePath))} is not valid here: expected ${description}`,
        );
      continue;
    }
    let message = e.message ?? 'is invalid';
    if (e.keyword === 'additionalProperties') {
      const key = (e.params as { additionalProperty: string }).additionalProperty;
      const known = Object.keys((e.parentSchema as { properties?: object } | undefined)?.properties ?? {});
      message = `unknown key "${key}"${didYouMean(key, known)}`;
    }
    if (e.keyword === 'enum') {
      const allowed = (e.params as { allowedValues: unknown[] }).allowedValues;
      const given = instanceAt(value, e.instancePath);
      message = `must be one of ${allowed.map((v) => JSON.stringify(v)).join(', ')}${typeof given === 'string' ? didYouMean(given, allowed.map(String)) : ''}`;
    }
    out.add(`${where(e.instancePath)}: ${message}`);
  }
  if (out.size === 0) for (const e of errors) out.add(`${where(e.instancePath)}: ${e.message ?? 'is invalid'}`);
  // In file order: the top level, then step by step.
  return [...out].sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
}

function instanceAt(value: unknown, pointer: string): unknown {
  let cur = value;
  for (const part of pointer.split('/').slice(1))
    cur = (cur as Record<string, unknown> | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  return cur;
}
