import { createHash } from 'node:crypto';
import { rfc3339 } from '../clock/clock.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import { setPodCondition } from '../api/pod-util.js';
import { invalidImageMessage, normalizeImage, repositoryOf } from './image-ref.js';
import { DURATION_SETTING, runsUntilStoppedMessage, type CommandLookup, type ContainerProgram } from './programs.js';

/**
 * The kubelet's built-in status transitions, one per action a stage may name. Each is a pure function of the
 * pod and a context (clock time, the node, lookups): it returns the pod's next status, annotations to set,
 * events and log lines. The fleet writes the result; the stage file decides which action runs when.
 */
export const ACTION_NAMES = [
  'Accept',
  'Start',
  'StartEphemeral',
  'PullBackOff',
  'Ready',
  'Exit',
  'BackOff',
  'Restart',
  'Kill',
  'Stop',
  'Fail',
] as const;
export type ActionName = (typeof ACTION_NAMES)[number];

type Obj = Record<string, unknown>;

export interface ActionEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  fieldPath?: string;
}

export interface ActionLog {
  container: string;
  /** Starts a new container instance (its restart count) before writing. */
  start?: number;
  /** Ends the current instance after writing. */
  end?: boolean;
  lines: string[];
}

/** A pull the kubelet made of an image: failed (its back-off grows), or pulled after failing before (it ends). */
export interface ImagePullOutcome {
  image: string;
  failed: boolean;
}

/** A container instance that starts running its command in the exec shell, with the environment it started with. */
export interface ContainerCommand {
  container: string;
  instance: number;
  /** The command line, `$(VAR)` references expanded. */
  argv: string[];
  env: Array<[string, string]>;
  /**
   * It reads stdin (an ephemeral container with `stdin: true`): it runs on the streams of the attach that reaches it,
   * and exits when that session's process does; until then it waits for input, as a process on an open stdin does.
   */
  interactive?: boolean;
}

export interface ActionResult {
  /** The whole next status (undefined: unchanged). */
  status?: Obj;
  /** Annotations to set (null removes). */
  annotations?: Record<string, string | null>;
  events: ActionEvent[];
  logs: ActionLog[];
  /** Pulls made, for the kubelet's record of the pod's image back-offs. */
  pulls?: ImagePullOutcome[];
  /** Commands to run for the containers started (the kubelet's runtime starts them once the status is written). */
  commands?: ContainerCommand[];
}

/** What a container gets when it starts: its environment, or why it cannot start. */
export type EnvResult = { env: Array<[string, string]> } | { error: string };

export interface ActionContext {
  now: number;
  hostIP: string;
  /** The pod's IP: the one it has, or a fresh one from the node's CIDR. */
  podIP(pod: KubeObject): string;
  /** Pod annotation, else node annotation, else the server-wide default. */
  setting(key: string): string | undefined;
  /** The container's environment as it starts now (ConfigMaps, Secrets, downward API, service links). */
  resolveEnv(pod: KubeObject, container: Obj): EnvResult;
  /** Why the pod's volumes cannot be mounted yet (FailedMount), if so. */
  volumeError(pod: KubeObject): { volume: string; message: string } | undefined;
  /** A fresh container ID (seeded, so replays agree). */
  containerID(): string;
  /** Whether no registry has the image (the image catalog's list, `--missing-images`, the node's and the pod's annotation). */
  imageMissing(image: string): boolean;
  /** When the image may be pulled again, if pulls of it failed before (the kubelet's back-off after its last failure). */
  pullRetryAt(image: string): number | undefined;
  /** What the container runs, from its spec and the image catalog. */
  program(container: Obj): ContainerProgram;
  /** What became of the container instance's command in the exec shell, if it runs one. */
  command: CommandLookup;
}

/**
 * The kubelet's restart back-off: the first restart is immediate; each later one waits 10 s doubling, capped
 * at 5 min (restartCount 1 → 10 s, 2 → 20 s, 3 → 40 s, 4 → 80 s, 5 → 160 s, 6+ → 300 s).
 */
export function crashLoopDelayMs(restartCount: number): number {
  if (restartCount <= 0) return 0;
  return Math.min(10_000 * 2 ** (restartCount - 1), 300_000);
}

/**
 * Where a container's environment at start is kept: kube-sim.dev/env-<container>. An annotation name may have
 * 63 characters, a container name as many, so long names are shortened with a hash of the full name.
 */
export function envAnnotation(container: string): string {
  const name = `env-${container}`;
  if (name.length <= 63) return `kube-sim.dev/${name}`;
  return `kube-sim.dev/${name.slice(0, 54)}-${createHash('sha256').update(container).digest('hex').slice(0, 8)}`;
}
export const LOG_ANNOTATION = 'kube-sim.dev/log';
/** The reason of the kubelet's event saying what kube-sim does instead of running a process. */
export const SIMULATED_REASON = 'Simulated';
export const EXIT_CODE_SETTING = 'kube-sim.dev/exit-code';

// ---------------------------------------------------------------------------------------------------------
// helpers

function containersOf(pod: KubeObject, list: ContainerList): Obj[] {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const items = spec[list];
  return Array.isArray(items) ? (items.filter(isPlainObject) as Obj[]) : [];
}

/**
 * The pod's status to build the next one on: a shallow copy. Its parts stay the pod's own until an action
 * replaces them (never changed in place), so that the store's copy and compaction of the written status skip
 * every part it already holds.
 */
function statusOf(pod: KubeObject): Obj {
  return isPlainObject(pod.status) ? { ...pod.status } : {};
}

/** `list` mapped by `fn`, or `list` itself when `fn` returned every item unchanged. */
function mapShared(list: Obj[], fn: (item: Obj) => Obj): Obj[] {
  let out: Obj[] | undefined;
  for (let i = 0; i < list.length; i++) {
    const next = fn(list[i]!);
    if (next !== list[i] && !out) out = list.slice(0, i);
    out?.push(next);
  }
  return out ?? list;
}

/**
 * Whether the status holds the condition setPodCondition would write: the same members with the same values, in
 * whatever order (JSON readers do not see the order), lastProbeTime null and a lastTransitionTime to keep.
 */
export function sameCondition(status: Obj, condition: Obj): boolean {
  const conditions = Array.isArray(status.conditions) ? (status.conditions as Obj[]) : [];
  const previous = conditions.find((c) => c.type === condition.type);
  // Same status: setPodCondition would keep its lastTransitionTime.
  if (!previous || previous.status !== condition.status || previous.lastProbeTime !== null) return false;
  if (!('lastTransitionTime' in previous)) return false;
  let members = 0;
  for (const k in previous) {
    if (k === 'lastProbeTime' || k === 'lastTransitionTime') continue;
    if (!Object.hasOwn(condition, k) || previous[k] !== condition[k]) return false;
    members++;
  }
  return members === Object.keys(condition).length;
}

/** setPodCondition that keeps the condition (and the conditions array) when it would write the same one. */
function setCondition(status: Obj, condition: Obj, now: string): void {
  if (!sameCondition(status, condition)) setPodCondition(status, condition, now);
}

function statuses(
  status: Obj,
  list: 'containerStatuses' | 'initContainerStatuses' | 'ephemeralContainerStatuses',
): Obj[] {
  return Array.isArray(status[list]) ? (status[list] as Obj[]) : [];
}

function state(cs: Obj): Obj {
  return isPlainObject(cs.state) ? cs.state : {};
}

type ContainerList = 'containers' | 'initContainers' | 'ephemeralContainers';

/** The container of that name in the pod's spec, and which list holds it. */
function specOf(pod: KubeObject, name: string): { c: Obj; list: ContainerList } | undefined {
  for (const list of ['initContainers', 'containers', 'ephemeralContainers'] as const) {
    const c = containersOf(pod, list).find((x) => x.name === name);
    if (c) return { c, list };
  }
  return undefined;
}

/**
 * What the kubelet writes about a container that follows from its spec alone: its field path, image reference and
 * digest, the pull, create and start event messages, the log line of its first start.
 */
interface ContainerTexts {
  fieldPath: string;
  image: string;
  imageID: string;
  pullMessages: readonly string[];
  created: string;
  started: string;
  firstStartLine: string;
}

/**
 * Made once per spec object, per list (the same spec may sit in either): the pods of a template share their
 * container specs (the store keeps one copy of identical parts, and informers hand out the stored objects), so their
 * statuses, events and logs hold one copy of each text as well, and an image is hashed once, not at every start.
 */
const textsBySpec: Record<ContainerList, WeakMap<object, ContainerTexts>> = {
  containers: new WeakMap(),
  initContainers: new WeakMap(),
  ephemeralContainers: new WeakMap(),
};

function textsOf(c: Obj, list: ContainerList): ContainerTexts {
  let texts = textsBySpec[list].get(c);
  if (texts) return texts;
  const name = String(c.name);
  const image = String(c.image);
  const normalized = normalizeImage(image);
  const repo = repositoryOf(normalized);
  texts = {
    fieldPath: flat('spec.', list, '{', name, '}'),
    image: normalized,
    imageID: flat(repo, '@sha256:', createHash('sha256').update(normalized).digest('hex')),
    pullMessages:
      c.imagePullPolicy === 'Always'
        ? [
            flat('Pulling image "', image, '"'),
            flat('Successfully pulled image "', image, '" in 0s (0s including waiting). Image size: 0 bytes.'),
          ]
        : [flat('Container image "', image, '" already present on machine')],
    created: flat('Created container: ', name),
    started: flat('Started container ', name),
    firstStartLine: startLine(c, 0),
  };
  textsBySpec[list].set(c, texts);
  return texts;
}

/** The field path of a pod's container in its events: spec.containers{app}. */
function fieldPath(pod: KubeObject, name: string): string {
  const spec = specOf(pod, name);
  return spec ? textsOf(spec.c, spec.list).fieldPath : flat('spec.containers{', name, '}');
}

/**
 * One flat string of the parts. A log line lives as long as its pod; built with `+` or a template it is a V8 rope,
 * a tree of its pieces that keeps each of them, where a join makes one string.
 */
function flat(...parts: Array<string | number>): string {
  return parts.join('');
}

/** Go's time.Duration formatting for whole seconds: 10s, 1m20s, 5m0s. */
export function goDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${s % 60}s`;
  return `${Math.floor(m / 60)}h${m % 60}m${s % 60}s`;
}

/** `$(VAR)` references resolved from the container's environment, `$$(VAR)` kept literally, as Kubernetes expands. */
export function expandVars(text: string, env: ReadonlyMap<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (match, name: string | undefined) => {
    if (match === '$$') return '$';
    return env.has(name!) ? env.get(name!)! : match;
  });
}

function waitingStatus(c: Obj, reason: string, message?: string): Obj {
  const waiting: Obj = { reason };
  if (message) waiting.message = message;
  return {
    name: c.name,
    image: c.image,
    imageID: '',
    ready: false,
    restartCount: 0,
    started: false,
    state: { waiting },
    lastState: {},
  };
}

function notReadyNames(list: Obj[]): string[] {
  return list.filter((cs) => cs.ready !== true).map((cs) => String(cs.name));
}

/** Ready / ContainersReady from the container statuses, with the kubelet's reasons and messages. */
function setReadiness(status: Obj, now: string, terminal: boolean): void {
  const containers = statuses(status, 'containerStatuses');
  const unready = notReadyNames(containers);
  for (const type of ['Ready', 'ContainersReady']) {
    if (terminal) setCondition(status, { type, status: 'False', reason: 'PodCompleted' }, now);
    else if (unready.length === 0 && containers.length > 0) setCondition(status, { type, status: 'True' }, now);
    else
      setCondition(
        status,
        {
          type,
          status: 'False',
          reason: 'ContainersNotReady',
          message: `containers with unready status: [${unready.join(' ')}]`,
        },
        now,
      );
  }
}

/** Conditions in the order the kubelet writes them. */
const CONDITION_ORDER = [
  'PodReadyToStartContainers',
  'Initialized',
  'Ready',
  'ContainersReady',
  'PodScheduled',
  'DisruptionTarget',
];

function sortConditions(status: Obj): void {
  if (!Array.isArray(status.conditions)) return;
  const rank = (c: Obj): number => {
    const i = CONDITION_ORDER.indexOf(String(c.type));
    return i < 0 ? CONDITION_ORDER.length : i;
  };
  const conditions = status.conditions as Obj[];
  // Already in order (the usual case): the array stays the one it is, shared with the stored pod.
  if (conditions.every((c, i) => i === 0 || rank(conditions[i - 1]!) <= rank(c))) return;
  status.conditions = [...conditions].sort((a, b) => rank(a) - rank(b));
}

function startLine(c: Obj, restartCount: number): string {
  return flat(
    '[kube-sim] container ',
    String(c.name),
    ' started (image ',
    String(c.image),
    ', restart ',
    restartCount,
    ')',
  );
}

/**
 * The log lines a container instance starts with: kube-sim's line saying it started (not for a command the exec
 * shell runs: its output is the log), then the kube-sim.dev/log annotation's.
 */
function startLines(
  pod: KubeObject,
  c: Obj,
  texts: ContainerTexts,
  restartCount: number,
  env: Array<[string, string]>,
  runsCommand: boolean,
): string[] {
  const lines = runsCommand ? [] : [restartCount === 0 ? texts.firstStartLine : startLine(c, restartCount)];
  const asked = pod.metadata.annotations?.[LOG_ANNOTATION];
  if (asked) {
    const vars = new Map(env);
    for (const line of asked.split('\n')) if (line !== '') lines.push(expandVars(line, vars));
  }
  return lines;
}

function pullEvents(texts: ContainerTexts): ActionEvent[] {
  const [first, second] = texts.pullMessages;
  const fieldPath = texts.fieldPath;
  if (second !== undefined)
    return [
      { type: 'Normal', reason: 'Pulling', message: first!, fieldPath },
      { type: 'Normal', reason: 'Pulled', message: second, fieldPath },
    ];
  return [{ type: 'Normal', reason: 'Pulled', message: first!, fieldPath }];
}

interface Started {
  status: Obj;
  events: ActionEvent[];
  logs: ActionLog[];
  env?: Array<[string, string]>;
  pull?: ImagePullOutcome;
  command?: ContainerCommand;
}

/** What the pull of a container's image came to: its events, and the waiting state when it has no image to start. */
interface Pull {
  events: ActionEvent[];
  waiting?: { reason: string; message: string };
  outcome?: ImagePullOutcome;
}

function waitingReason(cs: Obj | undefined): unknown {
  const waiting = cs && isPlainObject(state(cs).waiting) ? (state(cs).waiting as Obj) : undefined;
  return waiting?.reason;
}

/**
 * kubelet's EnsureImageExists for a container about to start: a reference it cannot parse (InvalidImageName), an
 * image no registry has (ErrImagePull; not tried again during the back-off after a failure, ImagePullBackOff), one
 * missing with pull policy Never (ErrImageNeverPull); else the image is there (or pulled). `unchanged`: the
 * container is left as it was (a state that no sync changes, or the back-off still running).
 */
function pullImage(c: Obj, texts: ContainerTexts, previous: Obj | undefined, ctx: ActionContext): Pull | 'unchanged' {
  const image = String(c.image);
  const fieldPath = texts.fieldPath;
  const was = waitingReason(previous);
  const failed = (reason: string, message: string, events: ActionEvent[]): Pull => ({
    events: [...events, { type: 'Warning', reason: 'Failed', message: `Error: ${reason}`, fieldPath }],
    waiting: { reason, message },
  });
  const invalid = invalidImageMessage(image);
  if (invalid !== undefined) {
    if (was === 'InvalidImageName') return 'unchanged';
    return failed('InvalidImageName', invalid, [
      { type: 'Warning', reason: 'InspectFailed', message: invalid, fieldPath },
    ]);
  }
  const retryAt = ctx.pullRetryAt(image);
  if (ctx.imageMissing(image)) {
    if (c.imagePullPolicy === 'Never') {
      if (was === 'ErrImageNeverPull') return 'unchanged';
      const message = `Container image "${image}" is not present with pull policy of Never`;
      return failed('ErrImageNeverPull', message, [
        { type: 'Warning', reason: 'ErrImageNeverPull', message, fieldPath },
      ]);
    }
    if (retryAt !== undefined && retryAt > ctx.now && (was === 'ImagePullBackOff' || was === 'ErrImagePull'))
      return 'unchanged';
    const ref = texts.image;
    const error = `rpc error: code = NotFound desc = failed to pull and unpack image "${ref}": failed to resolve reference "${ref}": ${ref}: not found`;
    return {
      ...failed('ErrImagePull', error, [
        { type: 'Normal', reason: 'Pulling', message: `Pulling image "${image}"`, fieldPath },
        { type: 'Warning', reason: 'Failed', message: `Failed to pull image "${image}": ${error}`, fieldPath },
      ]),
      outcome: { image, failed: true },
    };
  }
  // Pulled after failing before: the image was not on the node, so it is pulled now (and its back-off ends).
  if (retryAt !== undefined)
    return {
      events: [
        { type: 'Normal', reason: 'Pulling', message: `Pulling image "${image}"`, fieldPath },
        {
          type: 'Normal',
          reason: 'Pulled',
          message: `Successfully pulled image "${image}" in 0s (0s including waiting). Image size: 0 bytes.`,
          fieldPath,
        },
      ],
      outcome: { image, failed: false },
    };
  return { events: pullEvents(texts) };
}

/** Starts one container (restartCount given): its image, its env, its running state, Pulled/Created/Started. */
function startContainer(
  pod: KubeObject,
  c: Obj,
  list: ContainerList,
  previous: Obj | undefined,
  restartCount: number,
  ctx: ActionContext,
  now: string,
): Started {
  const texts = textsOf(c, list);
  const path = texts.fieldPath;
  const lastState = previous && isPlainObject(previous.lastState) ? previous.lastState : {};
  const pull = pullImage(c, texts, previous, ctx);
  if (pull === 'unchanged') return { status: previous!, events: [], logs: [] };
  const pulled = pull.outcome ? { pull: pull.outcome } : {};
  if (pull.waiting)
    return {
      status: { ...waitingStatus(c, pull.waiting.reason, pull.waiting.message), restartCount, lastState },
      events: pull.events,
      logs: [],
      ...pulled,
    };
  const resolved = ctx.resolveEnv(pod, c);
  if ('error' in resolved) {
    return {
      status: { ...waitingStatus(c, 'CreateContainerConfigError', resolved.error), restartCount, lastState },
      events: [
        ...pull.events,
        { type: 'Warning', reason: 'Failed', message: `Error: ${resolved.error}`, fieldPath: path },
      ],
      logs: [],
      ...pulled,
    };
  }
  // What it runs: its command in the exec shell (whose output is its log), unless kube-sim.dev/duration says how long
  // it runs; else it runs until stopped, which the kubelet says once when kube-sim cannot tell what the image runs.
  const program = ctx.setting(DURATION_SETTING) === undefined ? ctx.program(c) : undefined;
  const events: ActionEvent[] = [
    ...pull.events,
    { type: 'Normal', reason: 'Created', message: texts.created, fieldPath: path },
    { type: 'Normal', reason: 'Started', message: texts.started, fieldPath: path },
  ];
  if (program?.kind === 'unknown' && restartCount === 0 && list !== 'initContainers')
    events.push({ type: 'Normal', reason: SIMULATED_REASON, message: runsUntilStoppedMessage(c), fieldPath: path });
  const command =
    program?.kind === 'command'
      ? {
          container: String(c.name),
          instance: restartCount,
          argv: program.argv.map((a) => expandVars(a, new Map(resolved.env))),
          env: resolved.env,
          // `kubectl run -i`, `kubectl debug -i`: its process reads what an attach sends it.
          ...(list !== 'initContainers' && c.stdin === true ? { interactive: true } : {}),
        }
      : undefined;
  return {
    status: {
      containerID: ctx.containerID(),
      image: texts.image,
      imageID: texts.imageID,
      lastState,
      name: c.name,
      ready: false,
      restartCount,
      started: true,
      state: { running: { startedAt: now } },
    },
    events,
    logs: [
      {
        container: String(c.name),
        start: restartCount,
        lines: startLines(pod, c, texts, restartCount, resolved.env, command !== undefined),
      },
    ],
    env: resolved.env,
    ...pulled,
    ...(command ? { command } : {}),
  };
}

/** What became of the command of the container instance a status describes, if the exec shell runs one. */
function commandOf(ctx: ActionContext, cs: Obj): ReturnType<CommandLookup> {
  return ctx.command(String(cs.name), typeof cs.restartCount === 'number' ? cs.restartCount : 0);
}

function terminate(cs: Obj, exitCode: number, now: string, reason?: string): Obj {
  const running = isPlainObject(state(cs).running) ? (state(cs).running as Obj) : undefined;
  const terminated: Obj = {
    containerID: cs.containerID,
    exitCode,
    finishedAt: now,
    reason: reason ?? (exitCode === 0 ? 'Completed' : 'Error'),
    startedAt: running?.startedAt ?? now,
  };
  if (!cs.containerID) delete terminated.containerID;
  return { ...cs, ready: false, started: false, state: { terminated } };
}

/** An ephemeral container's status: the kubelet's prober sets `started` for app and init containers only. */
function withoutStarted(cs: Obj): Obj {
  if (!('started' in cs)) return cs;
  const { started: _started, ...rest } = cs;
  return rest;
}

function phaseFromContainers(status: Obj, restartPolicy: string): string {
  const list = statuses(status, 'containerStatuses');
  const running = list.some((cs) => isPlainObject(state(cs).running));
  const waiting = list.some((cs) => isPlainObject(state(cs).waiting));
  const terminated = list.map((cs) => state(cs).terminated).filter(isPlainObject) as Obj[];
  if (terminated.length === list.length && list.length > 0) {
    const failed = terminated.some((t) => t.exitCode !== 0);
    if (restartPolicy === 'Never') return failed ? 'Failed' : 'Succeeded';
    if (restartPolicy === 'OnFailure' && !failed) return 'Succeeded';
    return 'Running';
  }
  if (running || terminated.length > 0) return 'Running';
  return waiting && status.phase === 'Running' ? 'Running' : 'Pending';
}

function wantsRestart(restartPolicy: string, cs: Obj): boolean {
  const t = state(cs).terminated;
  if (!isPlainObject(t)) return false;
  return restartPolicy === 'Always' || (restartPolicy === 'OnFailure' && t.exitCode !== 0);
}

function restartPolicyOf(pod: KubeObject): string {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  return typeof spec.restartPolicy === 'string' ? spec.restartPolicy : 'Always';
}

function exitCodeSetting(ctx: ActionContext, params: Obj | undefined): number {
  if (typeof params?.exitCode === 'number') return params.exitCode;
  const text = ctx.setting(EXIT_CODE_SETTING);
  const n = text === undefined ? 0 : Number(text);
  return Number.isInteger(n) ? n : 1;
}

function empty(): ActionResult {
  return { events: [], logs: [] };
}

// ---------------------------------------------------------------------------------------------------------
// the actions

/** The kubelet admits the pod: host IP, start time, conditions, every container waiting in ContainerCreating. */
function accept(pod: KubeObject, ctx: ActionContext): ActionResult {
  const now = rfc3339(ctx.now);
  const status = statusOf(pod);
  const inits = containersOf(pod, 'initContainers');
  status.phase = 'Pending';
  status.hostIP = ctx.hostIP;
  status.hostIPs = [{ ip: ctx.hostIP }];
  status.startTime = now;
  setCondition(status, { type: 'PodReadyToStartContainers', status: 'False' }, now);
  if (inits.length === 0) setCondition(status, { type: 'Initialized', status: 'True' }, now);
  else
    setCondition(
      status,
      {
        type: 'Initialized',
        status: 'False',
        reason: 'ContainersNotInitialized',
        message: `containers with incomplete status: [${inits.map((c) => String(c.name)).join(' ')}]`,
      },
      now,
    );
  // App containers wait in ContainerCreating, or in PodInitializing behind init containers (shown Init:0/N).
  status.containerStatuses = containersOf(pod, 'containers').map((c) =>
    waitingStatus(c, inits.length > 0 ? 'PodInitializing' : 'ContainerCreating'),
  );
  if (inits.length > 0) status.initContainerStatuses = inits.map((c) => waitingStatus(c, 'PodInitializing'));
  setReadiness(status, now, false);
  sortConditions(status);
  return { ...empty(), status };
}

/** A restartable init container (restartPolicy: Always): a sidecar, which starts and keeps running. */
function isSidecar(c: Obj | undefined): boolean {
  return c?.restartPolicy === 'Always';
}

function completed(cs: Obj | undefined): boolean {
  const t = cs && state(cs).terminated;
  return isPlainObject(t) && t.exitCode === 0;
}

/** Init containers not done yet: regular ones that have not completed, sidecars that are not running. */
function incompleteInits(inits: Obj[], list: Obj[]): string[] {
  const byName = new Map(list.map((cs) => [String(cs.name), cs]));
  return inits
    .filter((c) => {
      const cs = byName.get(String(c.name));
      return isSidecar(c) ? !(cs && isPlainObject(state(cs).running)) : !completed(cs);
    })
    .map((c) => String(c.name));
}

/** Every regular init container completed, every sidecar started: the app containers may start. */
function initialized(inits: Obj[], list: Obj[]): boolean {
  return incompleteInits(inits, list).length === 0;
}

/**
 * The kubelet's init containers, in order: each regular one runs to completion before the next starts (its command
 * in the exec shell, whose exit the container-exit stage records; one kube-sim cannot run completes at once); a
 * sidecar starts and the next goes on beside it. One that failed, waits in back-off or cannot start (its image, its
 * environment) holds the rest back; the restart stages and the pull back-off take it on from there.
 */
function startInits(pod: KubeObject, inits: Obj[], status: Obj, result: ActionResult, ctx: ActionContext, now: string) {
  const prior = new Map(statuses(status, 'initContainerStatuses').map((cs) => [String(cs.name), cs]));
  let blocked = false;
  return inits.map((c) => {
    const name = String(c.name);
    const previous = prior.get(name);
    if (blocked) return previous ?? waitingStatus(c, 'PodInitializing');
    const sidecar = isSidecar(c);
    if (previous && isPlainObject(state(previous).running)) {
      if (!sidecar) blocked = true;
      return previous;
    }
    if (completed(previous) && !sidecar) return previous!;
    if (previous && (isPlainObject(state(previous).terminated) || waitingReason(previous) === 'CrashLoopBackOff')) {
      blocked = true;
      return previous;
    }
    const restartCount = typeof previous?.restartCount === 'number' ? previous.restartCount : 0;
    const started = startContainer(pod, c, 'initContainers', previous, restartCount, ctx, now);
    if (started.pull) (result.pulls ??= []).push(started.pull);
    result.events.push(...started.events);
    if (!started.env) {
      blocked = true;
      return started.status;
    }
    if (started.command || sidecar) {
      if (started.command) (result.commands ??= []).push(started.command);
      result.logs.push(...started.logs);
      if (!sidecar) blocked = true;
      return started.status;
    }
    // Nothing kube-sim can run (no command, kube-sim.dev/duration): it completes at once.
    for (const log of started.logs)
      result.logs.push({
        ...log,
        lines: [...log.lines, flat('[kube-sim] container ', name, ' exited with code 0')],
        end: true,
      });
    return terminate(started.status, 0, now);
  });
}

/** Mounts volumes, runs init containers to completion, starts the app containers: the pod is Running. */
function start(pod: KubeObject, ctx: ActionContext): ActionResult {
  const now = rfc3339(ctx.now);
  const mountError = ctx.volumeError(pod);
  if (mountError) {
    return {
      ...empty(),
      events: [
        {
          type: 'Warning',
          reason: 'FailedMount',
          message: `MountVolume.SetUp failed for volume "${mountError.volume}" : ${mountError.message}`,
        },
      ],
    };
  }
  const status = statusOf(pod);
  const podIP = ctx.podIP(pod);
  status.podIP = podIP;
  status.podIPs = [{ ip: podIP }];
  const withIP: KubeObject = { ...pod, status };
  const result: ActionResult = { events: [], logs: [], annotations: {} };
  const inits = containersOf(pod, 'initContainers');
  if (inits.length > 0) status.initContainerStatuses = startInits(withIP, inits, status, result, ctx, now);
  const initFailed = !initialized(inits, statuses(status, 'initContainerStatuses'));
  const previous = new Map(statuses(status, 'containerStatuses').map((cs) => [String(cs.name), cs]));
  if (!initFailed) {
    status.containerStatuses = containersOf(pod, 'containers').map((c) => {
      const prior = previous.get(String(c.name));
      if (prior && isPlainObject(state(prior).running)) return prior;
      const restartCount = typeof prior?.restartCount === 'number' ? prior.restartCount : 0;
      const started = startContainer(withIP, c, 'containers', prior, restartCount, ctx, now);
      if (started.pull) (result.pulls ??= []).push(started.pull);
      if (started.command) (result.commands ??= []).push(started.command);
      result.events.push(...started.events);
      result.logs.push(...started.logs);
      if (started.env)
        result.annotations![envAnnotation(String(c.name))] = JSON.stringify(Object.fromEntries(started.env));
      return started.status;
    });
    // Ephemeral containers whose image pull backs off are pulled again with the others.
    startEphemeralContainers(withIP, status, ctx, result);
  }
  setCondition(status, { type: 'PodReadyToStartContainers', status: 'True' }, now);
  if (initFailed) {
    const pending = incompleteInits(inits, statuses(status, 'initContainerStatuses'));
    setCondition(
      status,
      {
        type: 'Initialized',
        status: 'False',
        reason: 'ContainersNotInitialized',
        message: `containers with incomplete status: [${pending.join(' ')}]`,
      },
      now,
    );
  } else setCondition(status, { type: 'Initialized', status: 'True' }, now);
  status.phase = phaseFromContainers(status, restartPolicyOf(pod));
  setReadiness(status, now, false);
  sortConditions(status);
  return { ...result, status };
}

/** After a failed pull the kubelet backs off (ImagePullBackOff): `Back-off pulling image`, with the pull's error. */
function pullBackOff(pod: KubeObject, ctx: ActionContext): ActionResult {
  const now = rfc3339(ctx.now);
  const status = statusOf(pod);
  const events: ActionEvent[] = [];
  for (const list of ['initContainerStatuses', 'containerStatuses', 'ephemeralContainerStatuses'] as const) {
    if (!Array.isArray(status[list])) continue;
    status[list] = mapShared(statuses(status, list), (cs) => {
      const waiting = isPlainObject(state(cs).waiting) ? (state(cs).waiting as Obj) : undefined;
      if (waiting?.reason !== 'ErrImagePull') return cs;
      const image = String(cs.image);
      const path = fieldPath(pod, String(cs.name));
      events.push(
        { type: 'Normal', reason: 'BackOff', message: `Back-off pulling image "${image}"`, fieldPath: path },
        { type: 'Warning', reason: 'Failed', message: 'Error: ImagePullBackOff', fieldPath: path },
      );
      const message = `Back-off pulling image "${image}": ErrImagePull: ${String(waiting.message ?? '')}`;
      return { ...cs, state: { waiting: { reason: 'ImagePullBackOff', message } } };
    });
  }
  setReadiness(status, now, false);
  sortConditions(status);
  return { events, logs: [], status };
}

/**
 * Starts the ephemeral containers added to a running pod (`kubectl debug`) that have no status yet, and pulls again
 * the images of those waiting in ImagePullBackOff, as any container starts (pull, environment, Created/Started, its
 * command in the exec shell). They are never ready and never restarted; a pod without such ones is left as it is.
 */
function startEphemeral(pod: KubeObject, ctx: ActionContext): ActionResult {
  const status = statusOf(pod);
  const result: ActionResult = { events: [], logs: [], annotations: {} };
  if (!startEphemeralContainers(pod, status, ctx, result)) return empty();
  return { ...result, status };
}

/** startEphemeral's work on `status`, into `result`; false when no ephemeral container is to start. */
function startEphemeralContainers(pod: KubeObject, status: Obj, ctx: ActionContext, result: ActionResult): boolean {
  const prior = new Map(statuses(status, 'ephemeralContainerStatuses').map((cs) => [String(cs.name), cs]));
  const specs = containersOf(pod, 'ephemeralContainers');
  const due = specs.filter((c) => {
    const cs = prior.get(String(c.name));
    return cs === undefined || waitingReason(cs) === 'ImagePullBackOff';
  });
  if (due.length === 0) return false;
  const now = rfc3339(ctx.now);
  const started = new Map<string, Obj>();
  for (const c of due) {
    const start = startContainer(pod, c, 'ephemeralContainers', prior.get(String(c.name)), 0, ctx, now);
    if (start.pull) (result.pulls ??= []).push(start.pull);
    if (start.command) (result.commands ??= []).push(start.command);
    result.events.push(...start.events);
    result.logs.push(...start.logs);
    if (start.env)
      (result.annotations ??= {})[envAnnotation(String(c.name))] = JSON.stringify(Object.fromEntries(start.env));
    started.set(String(c.name), withoutStarted(start.status));
  }
  // In the order they were added, as the kubelet lists them.
  status.ephemeralContainerStatuses = specs
    .map((c) => started.get(String(c.name)) ?? prior.get(String(c.name)))
    .filter((cs): cs is Obj => cs !== undefined);
  return true;
}

/** Running containers pass their readiness probes. */
function ready(pod: KubeObject, ctx: ActionContext): ActionResult {
  const now = rfc3339(ctx.now);
  const status = statusOf(pod);
  const readied = (cs: Obj): Obj =>
    isPlainObject(state(cs).running) && cs.ready !== true ? { ...cs, ready: true } : cs;
  status.containerStatuses = mapShared(statuses(status, 'containerStatuses'), readied);
  // Sidecars too: with no readiness probe, a running one is ready.
  if (Array.isArray(status.initContainerStatuses)) {
    const sidecars = new Set(
      containersOf(pod, 'initContainers')
        .filter(isSidecar)
        .map((c) => String(c.name)),
    );
    status.initContainerStatuses = mapShared(statuses(status, 'initContainerStatuses'), (cs) =>
      sidecars.has(String(cs.name)) ? readied(cs) : cs,
    );
  }
  setReadiness(status, now, false);
  sortConditions(status);
  return { ...empty(), status };
}

/**
 * The containers' processes exit: params.exitCode, else the exit-code setting (default 0); params.reason (OOMKilled)
 * else Completed/Error. With params.containers `exited`, only the containers whose commands exited in the exec shell,
 * with their exit codes, when they did.
 */
function exit(pod: KubeObject, ctx: ActionContext, params: Obj | undefined): ActionResult {
  const now = rfc3339(ctx.now);
  const status = statusOf(pod);
  const code = exitCodeSetting(ctx, params);
  const reason = typeof params?.reason === 'string' ? params.reason : undefined;
  const logs: ActionLog[] = [];
  const commandsOnly = params?.containers === 'exited';
  const commandExited = (cs: Obj): Obj => {
    const exited = commandOf(ctx, cs);
    if (exited?.phase !== 'exited') return cs;
    logs.push({ container: String(cs.name), end: true, lines: [] });
    return terminate(cs, exited.exitCode, rfc3339(Math.min(exited.at, ctx.now)));
  };
  // An ephemeral container ends with its process (kubectl debug's shell exits) and is never restarted.
  if (commandsOnly && Array.isArray(status.ephemeralContainerStatuses))
    status.ephemeralContainerStatuses = mapShared(statuses(status, 'ephemeralContainerStatuses'), (cs) =>
      isPlainObject(state(cs).running) ? withoutStarted(commandExited(cs)) : cs,
    );
  status.containerStatuses = mapShared(statuses(status, 'containerStatuses'), (cs) => {
    if (!isPlainObject(state(cs).running)) return cs;
    if (commandsOnly) return commandExited(cs);
    logs.push({
      container: String(cs.name),
      end: true,
      lines: [
        flat(
          '[kube-sim] container ',
          String(cs.name),
          ' exited with code ',
          code,
          reason ? flat(' (', reason, ')') : '',
        ),
      ],
    });
    return terminate(cs, code, now, reason);
  });
  status.phase = phaseFromContainers(status, restartPolicyOf(pod));
  if (commandsOnly && initExited(pod, status, logs, ctx)) status.phase = 'Failed';
  const terminal = status.phase === 'Succeeded' || status.phase === 'Failed';
  setReadiness(status, now, terminal);
  if (terminal) setCondition(status, { type: 'PodReadyToStartContainers', status: 'False' }, now);
  sortConditions(status);
  return { events: [], logs, status };
}

/**
 * Init containers whose commands exited end with their codes. True when that fails the pod: a regular init container
 * failed and the pod never restarts (Init:Error); under OnFailure or Always the restart stages restart it.
 */
function initExited(pod: KubeObject, status: Obj, logs: ActionLog[], ctx: ActionContext): boolean {
  if (!Array.isArray(status.initContainerStatuses)) return false;
  const specs = new Map(containersOf(pod, 'initContainers').map((c) => [String(c.name), c]));
  let failsPod = false;
  status.initContainerStatuses = mapShared(statuses(status, 'initContainerStatuses'), (cs) => {
    if (!isPlainObject(state(cs).running)) return cs;
    const exited = commandOf(ctx, cs);
    if (exited?.phase !== 'exited') return cs;
    logs.push({ container: String(cs.name), end: true, lines: [] });
    const ended = terminate(cs, exited.exitCode, rfc3339(Math.min(exited.at, ctx.now)));
    // A sidecar always restarts: it waits out its back-off (none the first time) beside the running pod.
    if (isSidecar(specs.get(String(cs.name)))) return crashLoopWaiting(pod, ended);
    if (exited.exitCode !== 0 && restartPolicyOf(pod) === 'Never') failsPod = true;
    return ended;
  });
  return failsPod;
}

/**
 * Whether an exited container restarts: an app container by the pod's restartPolicy; a sidecar always; a regular init
 * container when it failed, unless the pod never restarts (one that completed is done).
 */
function restarts(policy: string, cs: Obj, init: Obj | undefined): boolean {
  if (!init) return wantsRestart(policy, cs);
  const t = state(cs).terminated;
  if (!isPlainObject(t)) return false;
  return isSidecar(init) || (t.exitCode !== 0 && policy !== 'Never');
}

/** The statuses a BackOff or Restart works on: the init containers' with params.init, else the app containers'. */
function listOf(pod: KubeObject, params: Obj | undefined) {
  if (params?.init !== true) return { list: 'containerStatuses' as const, inits: undefined };
  const inits = new Map(containersOf(pod, 'initContainers').map((c) => [String(c.name), c]));
  return { list: 'initContainerStatuses' as const, inits };
}

/** An exited container waiting in CrashLoopBackOff for its restart, its exit its last state. */
function crashLoopWaiting(pod: KubeObject, cs: Obj): Obj {
  const ref = `${pod.metadata.name}_${pod.metadata.namespace}(${pod.metadata.uid})`;
  const wait = goDuration(crashLoopDelayMs(typeof cs.restartCount === 'number' ? cs.restartCount : 0));
  return {
    ...cs,
    lastState: { terminated: state(cs).terminated },
    ready: false,
    started: false,
    state: {
      waiting: {
        reason: 'CrashLoopBackOff',
        message: `back-off ${wait} restarting failed container=${String(cs.name)} pod=${ref}`,
      },
    },
  };
}

/** An exited container that will restart waits in CrashLoopBackOff. */
function backOff(pod: KubeObject, ctx: ActionContext, params: Obj | undefined): ActionResult {
  const now = rfc3339(ctx.now);
  const status = statusOf(pod);
  const policy = restartPolicyOf(pod);
  const events: ActionEvent[] = [];
  const ref = `${pod.metadata.name}_${pod.metadata.namespace}(${pod.metadata.uid})`;
  const { list, inits } = listOf(pod, params);
  status[list] = mapShared(statuses(status, list), (cs) => {
    if (!restarts(policy, cs, inits?.get(String(cs.name)))) return cs;
    events.push({
      type: 'Warning',
      reason: 'BackOff',
      message: `Back-off restarting failed container ${String(cs.name)} in pod ${ref}`,
      fieldPath: fieldPath(pod, String(cs.name)),
    });
    return crashLoopWaiting(pod, cs);
  });
  setReadiness(status, now, false);
  sortConditions(status);
  return { events, logs: [], status };
}

/**
 * Restarts exited containers: restartCount + 1, environment resolved again, a new log instance. With params.first,
 * only those that never restarted (a later exit waits in CrashLoopBackOff first).
 */
function restart(pod: KubeObject, ctx: ActionContext, params: Obj | undefined): ActionResult {
  const now = rfc3339(ctx.now);
  const status = statusOf(pod);
  const policy = restartPolicyOf(pod);
  const result: ActionResult = { events: [], logs: [], annotations: {} };
  const { list, inits } = listOf(pod, params);
  const specs = inits ?? new Map(containersOf(pod, 'containers').map((c) => [String(c.name), c]));
  status[list] = mapShared(statuses(status, list), (cs) => {
    const waitingReason = isPlainObject(state(cs).waiting) ? (state(cs).waiting as Obj).reason : undefined;
    const terminated = state(cs).terminated;
    const c = specs.get(String(cs.name));
    if (!c) return cs;
    if (waitingReason !== 'CrashLoopBackOff' && !restarts(policy, cs, inits && c)) return cs;
    if (params?.first === true && cs.restartCount !== 0) return cs;
    const last = isPlainObject(terminated) ? { terminated } : isPlainObject(cs.lastState) ? cs.lastState : {};
    const count = (typeof cs.restartCount === 'number' ? cs.restartCount : 0) + 1;
    const kind = inits ? 'initContainers' : 'containers';
    const started = startContainer(pod, c, kind, { ...cs, lastState: last }, count, ctx, now);
    if (started.pull) (result.pulls ??= []).push(started.pull);
    if (started.command) (result.commands ??= []).push(started.command);
    result.events.push(...started.events);
    result.logs.push(...started.logs);
    if (started.env && !inits)
      result.annotations![envAnnotation(String(c.name))] = JSON.stringify(Object.fromEntries(started.env));
    // An init container kube-sim cannot run completes at once, as it did the first time.
    if (inits && started.env && !started.command && !isSidecar(c)) return terminate(started.status, 0, now);
    return started.status;
  });
  status.phase = phaseFromContainers(status, policy);
  setReadiness(status, now, false);
  sortConditions(status);
  return { ...result, status };
}

/**
 * A graceful delete begins: SIGTERM to each running container (Killing events); status is unchanged. A container
 * whose command the exec shell runs gets no kube-sim line in its log: its log is what the command wrote.
 */
function kill(pod: KubeObject, ctx: ActionContext): ActionResult {
  const status = statusOf(pod);
  const result = empty();
  for (const cs of statuses(status, 'containerStatuses')) {
    if (!isPlainObject(state(cs).running)) continue;
    result.events.push({
      type: 'Normal',
      reason: 'Killing',
      message: `Stopping container ${String(cs.name)}`,
      fieldPath: fieldPath(pod, String(cs.name)),
    });
    if (commandOf(ctx, cs) !== undefined) continue;
    result.logs.push({
      container: String(cs.name),
      lines: [flat('[kube-sim] container ', String(cs.name), ' received SIGTERM')],
    });
  }
  return result;
}

/**
 * The containers have stopped (on SIGTERM, or killed at the end of the grace period): terminal phase, before the
 * kubelet removes the pod. A command the exec shell runs ends with its exit code when it exited, else with SIGKILL's
 * 137 (a shell as PID 1 ignores SIGTERM); any other running container exits 0 on SIGTERM.
 */
function stop(pod: KubeObject, ctx: ActionContext): ActionResult {
  const now = rfc3339(ctx.now);
  const status = statusOf(pod);
  const logs: ActionLog[] = [];
  let any = false;
  status.containerStatuses = mapShared(statuses(status, 'containerStatuses'), (cs) => {
    if (isPlainObject(state(cs).terminated)) return cs;
    any = true;
    const command = isPlainObject(state(cs).running) ? commandOf(ctx, cs) : undefined;
    if (command?.phase === 'exited') {
      logs.push({ container: String(cs.name), end: true, lines: [] });
      return terminate(cs, command.exitCode, rfc3339(Math.min(command.at, ctx.now)));
    }
    if (command?.phase === 'running') {
      logs.push({ container: String(cs.name), end: true, lines: [] });
      return terminate(cs, 137, now, 'Error');
    }
    if (isPlainObject(state(cs).running))
      logs.push({
        container: String(cs.name),
        end: true,
        lines: [flat('[kube-sim] container ', String(cs.name), ' exited with code 0')],
      });
    const stopped = terminate(
      cs,
      isPlainObject(state(cs).running) ? 0 : 137,
      now,
      isPlainObject(state(cs).running) ? 'Completed' : 'ContainerStatusUnknown',
    );
    return stopped;
  });
  if (!any) return { events: [], logs };
  if (status.phase !== 'Succeeded' && status.phase !== 'Failed') {
    const failed = statuses(status, 'containerStatuses').some(
      (cs) => isPlainObject(state(cs).terminated) && (state(cs).terminated as Obj).exitCode !== 0,
    );
    status.phase = failed ? 'Failed' : 'Succeeded';
  }
  setReadiness(status, now, true);
  setCondition(status, { type: 'PodReadyToStartContainers', status: 'False' }, now);
  sortConditions(status);
  return { events: [], logs, status };
}

/** The kubelet fails the pod (DeadlineExceeded and the like): containers killed, phase Failed with a reason. */
function failPod(pod: KubeObject, ctx: ActionContext, params: Obj | undefined): ActionResult {
  const now = rfc3339(ctx.now);
  const reason = typeof params?.reason === 'string' ? params.reason : 'Failed';
  const message = typeof params?.message === 'string' ? params.message : '';
  const status = statusOf(pod);
  const logs: ActionLog[] = [];
  status.containerStatuses = mapShared(statuses(status, 'containerStatuses'), (cs) => {
    if (isPlainObject(state(cs).terminated)) return cs;
    if (isPlainObject(state(cs).running))
      logs.push({
        container: String(cs.name),
        end: true,
        lines: [flat('[kube-sim] container ', String(cs.name), ' killed: ', reason)],
      });
    return terminate(cs, 137, now, 'Error');
  });
  status.phase = 'Failed';
  status.reason = reason;
  status.message = message;
  setReadiness(status, now, true);
  setCondition(status, { type: 'PodReadyToStartContainers', status: 'False' }, now);
  sortConditions(status);
  return { events: [{ type: 'Warning', reason, message }], logs, status };
}

export function runAction(name: ActionName, pod: KubeObject, ctx: ActionContext, params?: Obj): ActionResult {
  switch (name) {
    case 'Accept':
      return accept(pod, ctx);
    case 'Start':
      return start(pod, ctx);
    case 'StartEphemeral':
      return startEphemeral(pod, ctx);
    case 'PullBackOff':
      return pullBackOff(pod, ctx);
    case 'Ready':
      return ready(pod, ctx);
    case 'Exit':
      return exit(pod, ctx, params);
    case 'BackOff':
      return backOff(pod, ctx, params);
    case 'Restart':
      return restart(pod, ctx, params);
    case 'Kill':
      return kill(pod, ctx);
    case 'Stop':
      return stop(pod, ctx);
    case 'Fail':
      return failPod(pod, ctx, params);
  }
}
