/**
 * The scenario file, as types. schema.ts holds the same shape as a JSON Schema (for validation and for
 * editors); README's "Scenario files" section documents it with a full example.
 */
export interface Scenario {
  name: string;
  description?: string;
  /** Seed for uids, generated names and IPs (default 1). */
  seed?: number;
  /** Where the virtual clock starts (RFC 3339; default 2025-01-01T00:00:00Z). */
  startTime?: string;
  /** Simulated nodes node-1 … node-N (default 3, as `sim serve`; 0: none; with a snapshot, added to its nodes, default 0). */
  nodes?: number;
  /** A snapshot file (`sim snapshot export`, relative to the scenario file) the cluster boots from. */
  snapshot?: string;
  /** A trace's record of what it saw (`sim record`, trace.ts): read by people, not by the runner. */
  recorded?: unknown;
  /** Controllers to run, as `sim serve --controllers` (default '*'). */
  controllers?: string;
  /** Namespace for manifests and references that name none (default 'default'). */
  namespace?: string;
  history?: { exclude?: string[] };
  steps: Step[];
}

export const ACTIONS = [
  'apply',
  'create',
  'patch',
  'delete',
  'scale',
  'kubectl',
  'advance',
  'sleep',
  'waitFor',
  'expect',
  'fault',
  'drain',
] as const;
export type Action = (typeof ACTIONS)[number];

export interface Step {
  name?: string;
  apply?: ManifestSource;
  create?: ManifestSource;
  patch?: PatchStep;
  delete?: DeleteStep;
  scale?: ScaleStep;
  kubectl?: KubectlStep;
  advance?: Duration | { by: Duration };
  sleep?: Duration;
  waitFor?: WaitForStep;
  expect?: Assertion | Assertion[];
  fault?: FaultStep;
  drain?: DrainStep;
}

/** Cordon and evict, as `kubectl drain --ignore-daemonsets`, retrying refused evictions on cluster time. */
export interface DrainStep {
  node?: string;
  selector?: string;
  timeout?: Duration;
}

/** "90s", "1h30m", "2d", or a number of seconds. */
export type Duration = string | number;

/** A file path (relative to the scenario file), or inline manifests. */
export type ManifestSource = string | { file?: string; manifest?: unknown; namespace?: string };

export interface ObjectRef {
  kind: string;
  apiVersion?: string;
  name: string;
  namespace?: string;
}

/** Objects of one kind, narrowed by name, label selector, owner (transitively) and field values. */
export interface Selector {
  kind: string;
  apiVersion?: string;
  namespace?: string;
  /** Every namespace (default: the scenario's namespace for namespaced kinds). */
  allNamespaces?: boolean;
  name?: string;
  selector?: string;
  /** "Deployment/webapp": owned, directly or through e.g. a ReplicaSet, by that object. */
  owner?: string;
  /** JSONPath → expected value; all must hold. */
  where?: Record<string, unknown>;
}

export interface PatchStep extends ObjectRef {
  type?: 'strategic' | 'merge' | 'json';
  patch: unknown;
  subresource?: 'status';
}

export interface DeleteStep {
  kind: string;
  apiVersion?: string;
  namespace?: string;
  name?: string;
  selector?: string;
  cascade?: 'background' | 'foreground' | 'orphan';
  gracePeriodSeconds?: number;
}

export interface ScaleStep extends ObjectRef {
  replicas: number;
}

export type KubectlStep =
  | string
  | string[]
  | {
      args: string | string[];
      stdin?: string;
      /** Exit code expected (default 0). */
      exitCode?: number;
      /** Substrings stdout must contain. */
      contains?: string | string[];
      /** A regular expression stdout must match. */
      matches?: string;
      /** Wall-clock limit for the kubectl process (default 30s). */
      timeout?: Duration;
    };

export interface Comparison {
  equals?: unknown;
  notEquals?: unknown;
  matches?: string;
  min?: number;
  max?: number;
  exists?: boolean;
}

export interface ObjectCondition extends Comparison {
  object: ObjectRef;
  jsonpath?: string;
  /** Shorthand for the status of a condition: `condition: Available` (status "True" unless `equals` says). */
  condition?: string;
}

export interface CountCondition extends Comparison {
  count: Selector;
}

export type StateCondition = ObjectCondition | CountCondition;

export type WaitForStep = StateCondition & { timeout?: Duration; description?: string };

/** `terminating`: the deletion began (deletionTimestamp newly set, or the object removed at once). */
export type EventKind = 'ADDED' | 'MODIFIED' | 'DELETED' | 'created' | 'modified' | 'deleted' | 'terminating';

export interface EventMatcher extends Selector {
  event?: EventKind;
}

/** Steps by name, or by 1-based number; `previous` is the last step before this one that is not an expect. */
export type Window = 'all' | 'previous' | string | number | { from?: string | number; to?: string | number };

export interface OrderAssertion {
  order: { first: EventMatcher; then: EventMatcher };
  during?: Window;
}

export interface EventsAssertion extends Comparison {
  events: EventMatcher;
  during?: Window;
}

export interface AlwaysAssertion {
  always: {
    /** The workload whose pods are counted (its spec.replicas is the desired count). */
    owner?: ObjectRef;
    /** Or: the pods to count, by selector. */
    pods?: Omit<Selector, 'kind'> & { kind?: 'Pod' };
    maxUnavailable?: number;
    maxSurge?: number;
    minReady?: number;
    maxPods?: number;
    minPods?: number;
  };
  during?: Window;
}

export type Assertion = (StateCondition | OrderAssertion | EventsAssertion | AlwaysAssertion) & {
  description?: string;
};

export interface FaultStep {
  type: 'node-fail' | 'node-recover' | 'pod-kill' | 'container-crash';
  node?: string;
  pod?: string;
  selector?: string;
  namespace?: string;
  container?: string;
  exitCode?: number;
}
