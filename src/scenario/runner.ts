import { readFileSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { yaml } from '../api/yaml.js';
import { ApiError } from '../api/errors.js';
import type { PatchType } from '../api/patch.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import { errorOf, resourcePath } from '../client/http.js';
import type { Connection } from '../client/kubeconfig.js';
import {
  evaluateAssertion,
  evaluateState,
  offset,
  podState,
  refFor,
  type EvalContext,
  type Outcome,
} from './conditions.js';
import { blockingPods } from './blockers.js';
import { DEFAULT_HISTORY_EXCLUDE, History } from './history.js';
import { findKubectl, runKubectl, splitArgs } from './kubectl.js';
import { manifestObjects, parseManifests, ScenarioError, type LoadedScenario } from './loader.js';
import { ApiResources, type ApiResource } from './resources.js';
import { durationMs, embeddedTarget, remoteTarget, wallSleep, type LogFn, type ScenarioTarget } from './target.js';
import {
  ACTIONS,
  type Action,
  type Assertion,
  type DrainStep,
  type FaultStep,
  type KubectlStep,
  type ManifestSource,
  type Step,
} from './types.js';

export interface RunOptions {
  /** Drive a running `sim serve` instead of an embedded cluster. */
  server?: Connection;
  /** Overrides the scenario's seed. */
  seed?: number;
  log?: LogFn;
  /** Aborted: the step running stops at its next piece of work, is marked interrupted, and no further step runs. */
  signal?: AbortSignal;
  hooks?: RunHooks;
  /** Serve the embedded cluster over HTTP (and so its live view) before the first step, on this port (0: any). */
  serve?: { port: number };
  /** Embedded: at most this many cluster seconds per wall second while time passes (0 or unset: no limit). */
  pace?: number;
  /** Leave the cluster running after the last step; the result's `close` stops it. */
  keepOpen?: boolean;
}

/** What a run has to show while it goes (sim replay streams its timeline from these). */
export interface RunProgress {
  loaded: LoadedScenario;
  mode: 'embedded' | 'remote';
  seed: number;
  startTime: number;
  history: History;
}

export interface RunHooks {
  /**
   * With `serve`: the cluster answers at `url`, and `pageOpened` (embedded only) resolves once a browser has loaded
   * its live view. The first step waits for the promise this returns.
   */
  serving?(url: string, pageOpened: Promise<void> | undefined): Promise<void>;
  /** The cluster is up and recording; no step has run. */
  started?(run: RunProgress): void;
  /** A step finished (passed or failed); its changes are in the history. */
  stepDone?(step: StepResult, run: RunProgress): void;
  /** A long advance (or sleep) moved on: `doneMs` of `totalMs` of cluster time. */
  advancing?(step: StepResult, doneMs: number, totalMs: number): void;
}

/** A long advance goes in pieces of this much cluster time, so that it can be interrupted and show progress. */
const ADVANCE_PIECE_MS = 60 * 60 * 1000;

export interface ExpectationResult extends Outcome {}

export interface StepResult {
  index: number;
  action: Action;
  /** The step's name, or a description made from what it does. */
  title: string;
  named: boolean;
  status: 'passed' | 'failed' | 'skipped';
  start: number;
  end: number;
  /** What the step did ("deployment.apps/webapp created"). */
  notes: string[];
  /** Why it failed. */
  message?: string;
  expectations: ExpectationResult[];
  kubectl?: { args: string[]; exitCode: number | null; stdout: string; stderr: string };
  /** The run was interrupted while this step ran. */
  interrupted?: boolean;
}

export interface RunResult {
  loaded: LoadedScenario;
  mode: 'embedded' | 'remote';
  seed: number;
  startTime: number;
  endTime: number;
  steps: StepResult[];
  history: History;
  /** Problems outside any step (history lost, cluster failed to start, a server the scenario cannot run on). */
  problems: string[];
  passed: boolean;
  /** The step that was running when the run was interrupted (RunOptions.signal). */
  interruptedAt?: number;
  /** With `keepOpen`: stops the cluster the run left running. */
  close?: () => Promise<void>;
}

const FIELD_MANAGER = 'kube-sim-replay';
/** Nodes an embedded cluster gets when the scenario does not say: sim serve's default. */
export const DEFAULT_NODES = 3;

/** Which controller brings a kind to life, to explain a timeout when it is not running. */
const CONTROLLER_FOR_KIND: Record<string, string> = {
  Deployment: 'deployment',
  ReplicaSet: 'replicaset',
  StatefulSet: 'statefulset',
  DaemonSet: 'daemonset',
  Job: 'job',
  CronJob: 'cronjob',
};

export function stepAction(step: Step): Action {
  const action = ACTIONS.find((a) => step[a] !== undefined);
  if (!action) throw new ScenarioError('a step without an action');
  return action;
}

/** A readable title for a step that has no name. */
export function describeStep(step: Step): string {
  const action = stepAction(step);
  switch (action) {
    case 'apply':
    case 'create': {
      const src = step[action] as ManifestSource;
      if (typeof src === 'string') return `${action} ${src}`;
      if (src.file) return `${action} ${src.file}`;
      try {
        const objs =
          typeof src.manifest === 'string'
            ? parseManifests(src.manifest, 'manifest')
            : manifestObjects(src.manifest, 'manifest');
        return `${action} ${objs.map((o) => `${o.kind} ${o.metadata.name ?? o.metadata.generateName ?? ''}`).join(', ')}`;
      } catch {
        return `${action} (inline manifest)`;
      }
    }
    case 'patch':
      return `patch ${step.patch!.kind} ${step.patch!.name} (${step.patch!.type ?? 'strategic'})`;
    case 'delete':
      return `delete ${step.delete!.kind} ${step.delete!.name ?? step.delete!.selector}${step.delete!.cascade ? ` (cascade ${step.delete!.cascade})` : ''}`;
    case 'scale':
      return `scale ${step.scale!.kind} ${step.scale!.name} to ${step.scale!.replicas}`;
    case 'kubectl':
      return `kubectl ${kubectlArgs(step.kubectl!).join(' ')}`;
    case 'advance': {
      const by = typeof step.advance === 'object' ? step.advance.by : step.advance!;
      return `advance ${typeof by === 'number' ? `${by}s` : by}`;
    }
    case 'sleep':
      return `sleep ${typeof step.sleep === 'number' ? `${step.sleep}s` : step.sleep}`;
    case 'waitFor':
      return step.waitFor!.description ? `wait for ${step.waitFor!.description}` : 'wait for a condition';
    case 'expect': {
      const n = Array.isArray(step.expect) ? step.expect.length : 1;
      return `expect (${n} assertion${n === 1 ? '' : 's'})`;
    }
    case 'fault': {
      const f = step.fault!;
      return `fault ${f.type} ${f.node ?? f.pod ?? f.selector ?? ''}`.trim();
    }
    case 'drain':
      return `drain ${step.drain!.node ?? step.drain!.selector}`;
  }
}

function kubectlArgs(k: KubectlStep): string[] {
  const args = typeof k === 'string' || Array.isArray(k) ? k : k.args;
  return typeof args === 'string' ? splitArgs(args) : args;
}

class StepFailure extends Error {}

function cacheKeyOf(obj: KubeObject): string {
  return `${obj.metadata.namespace ?? ''}/${obj.metadata.name}`;
}

/** The run's signal fired while a step ran. */
class Interrupted extends Error {
  constructor() {
    super('interrupted');
  }
}

interface ContainerStatus {
  name: string;
  restartCount?: number;
  state?: { running?: { startedAt?: string }; terminated?: { exitCode?: number } };
  lastState?: { terminated?: { exitCode?: number } };
}

/** The kubelet simulator's per-pod settings (annotations) a crash uses. */
const DURATION_SETTING = 'kube-sim.dev/duration';
const EXIT_CODE_SETTING = 'kube-sim.dev/exit-code';

/**
 * Runs one scenario: starts (or connects to) a cluster, records every change, runs the steps in order and
 * checks the expectations. Nothing here reads the wall clock or draws randomness (kubectl's deadline
 * aside), so an embedded run with the same seed produces the same result every time.
 */
export async function runScenario(loaded: LoadedScenario, options: RunOptions = {}): Promise<RunResult> {
  const scenario = loaded.scenario;
  const seed = options.seed ?? scenario.seed ?? 1;
  const startTime = scenario.startTime ? Date.parse(scenario.startTime) : undefined;
  const snapshot = loaded.snapshot;
  const nodes = scenario.nodes ?? (snapshot ? 0 : DEFAULT_NODES);
  const target: ScenarioTarget = options.server
    ? await remoteTarget(options.server)
    : await embeddedTarget({
        seed,
        startTime,
        controllers: scenario.controllers,
        nodes,
        log: options.log,
        port: options.serve?.port,
        pace: options.pace,
        signal: options.signal,
        snapshot,
      });
  const history = new History(target);
  const steps: StepResult[] = scenario.steps.map((step, i) => ({
    index: i + 1,
    action: stepAction(step),
    title: step.name ?? describeStep(step),
    named: step.name !== undefined,
    status: 'skipped',
    start: 0,
    end: 0,
    notes: [],
    expectations: [],
  }));
  const problems: string[] = [];
  const runStart = target.now();
  const progress: RunProgress = { loaded, mode: target.mode, seed, startTime: runStart, history };
  let interruptedAt: number | undefined;
  let keep = false;
  try {
    const resources = new ApiResources(target.http);
    await resources.load();
    await history.start(resources.all(), scenario.history?.exclude ?? DEFAULT_HISTORY_EXCLUDE);
    await target.settle();
    if (!snapshot) await checkNodes(target, resources, target.mode === 'embedded' ? nodes : scenario.nodes, problems);
    if (target.mode === 'remote' && snapshot)
      problems.push(
        `the scenario starts from a snapshot (${scenario.snapshot}), which only an embedded cluster boots from: run it without --server (or start sim serve --snapshot ${scenario.snapshot} and leave snapshot out)`,
      );
    else if (target.mode === 'remote') problems.push(...(await preflight(loaded, target, resources)));
    if (problems.length === 0 && scenario.namespace !== undefined)
      await ensureNamespace(target, resources, scenario.namespace);
    const runner = new StepRunner(loaded, target, resources, history, steps, runStart, options);
    if (problems.length === 0 && options.serve) {
      const { server } = await target.connection();
      await options.hooks?.serving?.(server, target.mode === 'embedded' ? target.pageOpened() : undefined);
    }
    if (problems.length === 0) {
      options.hooks?.started?.(progress);
      for (let i = 0; i < scenario.steps.length; i++) {
        if (options.signal?.aborted) {
          interruptedAt = i + 1;
          break;
        }
        const ok = await runner.run(i);
        options.hooks?.stepDone?.(steps[i]!, progress);
        if (steps[i]!.interrupted) {
          interruptedAt = i + 1;
          break;
        }
        if (!ok && steps[i]!.action !== 'expect') break;
      }
    }
    await history.catchUp();
    problems.push(...history.problems);
    keep = options.keepOpen === true;
  } finally {
    history.stop();
    if (!keep) await target.close();
  }
  const endTime = steps.reduce((t, s) => Math.max(t, s.end), runStart);
  const passed = problems.length === 0 && steps.every((s) => s.status === 'passed');
  const result: RunResult = {
    loaded,
    mode: target.mode,
    seed,
    startTime: runStart,
    endTime,
    steps,
    history,
    problems,
    passed: passed && interruptedAt === undefined,
  };
  if (interruptedAt !== undefined) result.interruptedAt = interruptedAt;
  if (keep) result.close = () => target.close();
  return result;
}

/** The kinds and names of the objects a scenario applies or creates, from its manifests (unreadable ones skipped). */
function scenarioObjects(loaded: LoadedScenario): KubeObject[] {
  const out: KubeObject[] = [];
  for (const step of loaded.scenario.steps) {
    const source = step.apply ?? step.create;
    if (source === undefined) continue;
    try {
      const { objects, namespace } = readManifests(loaded, source);
      for (const obj of objects)
        out.push(namespace && !obj.metadata.namespace ? { ...obj, metadata: { ...obj.metadata, namespace } } : obj);
    } catch {
      // the step reports it when it runs
    }
  }
  return out;
}

/**
 * What a scenario needs of a running server, checked before its first step changes anything: a virtual clock
 * when it advances time, and none of the objects it creates there already (a replay's counts, waits and event
 * histories would include what an earlier run left).
 */
async function preflight(loaded: LoadedScenario, target: ScenarioTarget, resources: ApiResources): Promise<string[]> {
  const problems: string[] = [];
  const advancing = loaded.scenario.steps.flatMap((s, i) => (s.advance !== undefined ? [i + 1] : []));
  if (!target.virtual && advancing.length > 0)
    problems.push(
      `the server's clock is real, and the scenario advances it (step${advancing.length === 1 ? '' : 's'} ${advancing.join(', ')}): start sim serve with --clock virtual`,
    );
  const namespace = loaded.scenario.namespace ?? 'default';
  const existing: string[] = [];
  for (const obj of scenarioObjects(loaded)) {
    const name = obj.metadata.name;
    const resource = obj.apiVersion && obj.kind ? resources.byKind(obj.apiVersion, obj.kind) : undefined;
    if (!name || !resource) continue;
    const ns = resource.namespaced ? (obj.metadata.namespace ?? namespace) : undefined;
    try {
      await target.client.get(resource.gvr, ns, name);
      existing.push(`${resource.gvr.resource}/${name}${ns ? ` in ${ns}` : ''}`);
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 404)) throw err;
    }
  }
  if (existing.length > 0)
    problems.push(
      `the server already has ${[...new Set(existing)].join(', ')}, which the scenario creates: run it on a fresh server (or another namespace: the scenario's namespace field)`,
    );
  return problems;
}

/** The objects of an apply/create source: a file relative to the scenario, or an inline manifest. */
export function readManifests(
  loaded: LoadedScenario,
  source: ManifestSource,
): { objects: KubeObject[]; namespace?: string } {
  if (typeof source === 'string') source = { file: source };
  if (source.file !== undefined) {
    const path = resolvePath(loaded.baseDir, source.file);
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new StepFailure(`cannot read ${source.file}: ${(err as Error).message}`);
    }
    return { objects: parseManifests(text, source.file), namespace: source.namespace };
  }
  const objects =
    typeof source.manifest === 'string'
      ? parseManifests(source.manifest, 'inline manifest')
      : manifestObjects(source.manifest, 'inline manifest');
  return { objects, namespace: source.namespace };
}

/** The scenario's namespace is there before the first step (created during start-up, step 0, if missing). */
async function ensureNamespace(target: ScenarioTarget, resources: ApiResources, name: string): Promise<void> {
  try {
    await target.client.create(resources.resolve('namespaces').gvr, undefined, {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name },
    });
    await target.settle();
  } catch (err) {
    if (!(err instanceof ApiError && err.code === 409)) throw err;
  }
}

async function checkNodes(
  target: ScenarioTarget,
  resources: ApiResources,
  wanted: number | undefined,
  problems: string[],
): Promise<void> {
  if (!wanted) return;
  const nodes = await target.client.list(resources.resolve('nodes').gvr, undefined);
  if (nodes.items.length >= wanted) return;
  problems.push(
    target.mode === 'embedded'
      ? `the scenario asks for ${wanted} node(s) but the simulator started ${nodes.items.length}: this build has no node simulator (sim serve --nodes) yet`
      : `the scenario asks for ${wanted} node(s) but the server has ${nodes.items.length}`,
  );
}

class StepRunner {
  private ssa: 'unknown' | 'yes' | 'no' = 'unknown';
  private readonly kindsCreated = new Set<string>();
  private readonly namespace: string;

  constructor(
    private readonly loaded: LoadedScenario,
    private readonly target: ScenarioTarget,
    private readonly resources: ApiResources,
    private readonly history: History,
    private readonly results: StepResult[],
    private readonly startTime: number,
    private readonly options: RunOptions,
  ) {
    this.namespace = loaded.scenario.namespace ?? 'default';
  }

  private context(index: number): EvalContext {
    return {
      target: this.target,
      resources: this.resources,
      history: this.history,
      namespace: this.namespace,
      startTime: this.startTime,
      stepNames: this.loaded.scenario.steps.map((s) => s.name),
      stepActions: this.results.map((r) => r.action),
      current: index + 1,
    };
  }

  /** Runs step i; false when it failed. */
  async run(i: number): Promise<boolean> {
    const step = this.loaded.scenario.steps[i]!;
    const result = this.results[i]!;
    this.history.step = i + 1;
    result.start = this.target.now();
    try {
      await this.execute(step, result, i);
      result.status = result.expectations.some((e) => !e.ok) ? 'failed' : 'passed';
    } catch (err) {
      result.status = 'failed';
      if (err instanceof Interrupted) result.interrupted = true;
      result.message =
        err instanceof StepFailure || err instanceof ApiError || err instanceof ScenarioError
          ? err.message
          : err instanceof Error
            ? err.message
            : String(err);
    }
    // Whatever the step set in motion at this instant runs before the next step looks.
    await this.target.settle();
    await this.history.catchUp();
    result.end = this.target.now();
    if (result.status === 'failed' && result.message === undefined) {
      const failed = result.expectations.filter((e) => !e.ok);
      result.message = failed.map((e) => `expected ${e.description}, found ${e.found}`).join('; ');
    }
    return result.status === 'passed';
  }

  private async execute(step: Step, result: StepResult, index: number): Promise<void> {
    switch (result.action) {
      case 'apply':
      case 'create':
        return this.applyOrCreate(result.action, step[result.action] as ManifestSource, result);
      case 'patch':
        return this.patch(step, result);
      case 'delete':
        return this.delete(step, result);
      case 'scale':
        return this.scale(step, result);
      case 'kubectl':
        return this.kubectl(step.kubectl!, result);
      case 'advance': {
        const by = typeof step.advance === 'object' ? step.advance.by : step.advance!;
        if (!this.target.virtual)
          throw new StepFailure(
            `advance needs a virtual clock, and the server's clock is real (start it with --clock virtual, or use sleep)`,
          );
        return this.advance(durationMs(by), result);
      }
      case 'sleep': {
        const ms = durationMs(step.sleep!);
        if (this.target.virtual) return this.advance(ms, result);
        return this.wallWait(ms);
      }
      case 'waitFor':
        return this.waitFor(step, result, index);
      case 'expect': {
        const list: Assertion[] = Array.isArray(step.expect) ? step.expect : [step.expect!];
        const ctx = this.context(index);
        for (const assertion of list) {
          try {
            result.expectations.push(await evaluateAssertion(ctx, assertion));
          } catch (err) {
            result.expectations.push({
              ok: false,
              description: assertion.description ?? JSON.stringify(assertion),
              found: `error: ${(err as Error).message}`,
            });
          }
        }
        return;
      }
      case 'fault':
        return this.fault(step.fault!, result);
      case 'drain':
        return this.drain(step.drain!, result);
    }
  }

  private checkSignal(): void {
    if (this.options.signal?.aborted) throw new Interrupted();
  }

  /** Moves a virtual clock on in pieces of at most an hour: a Ctrl-C stops it between two, and each shows progress. */
  private async advance(totalMs: number, result: StepResult): Promise<void> {
    let done = 0;
    do {
      this.checkSignal();
      const piece = Math.min(totalMs - done, ADVANCE_PIECE_MS);
      await this.target.advance(piece);
      done += piece;
      if (totalMs > ADVANCE_PIECE_MS) this.options.hooks?.advancing?.(result, done, totalMs);
    } while (done < totalMs);
  }

  /** Waits on a real clock, a tenth of a second at a time so that an interrupt is seen. */
  private async wallWait(ms: number): Promise<void> {
    for (let waited = 0; waited < ms; waited += 100) {
      this.checkSignal();
      await wallSleep(Math.min(100, ms - waited));
    }
  }

  // ---- writes ----------------------------------------------------------------------------------------

  private resourceOf(obj: KubeObject): ApiResource {
    const r = this.resources.byKind(obj.apiVersion!, obj.kind!);
    if (r) return r;
    return this.resources.resolve(obj.kind!, obj.apiVersion);
  }

  private async applyOrCreate(action: 'apply' | 'create', source: ManifestSource, result: StepResult): Promise<void> {
    const { objects, namespace } = readManifests(this.loaded, source);
    for (const raw of objects) {
      const resource = this.resourceOf(raw);
      const ns = resource.namespaced ? (raw.metadata.namespace ?? namespace ?? this.namespace) : undefined;
      const obj: KubeObject = { ...raw, metadata: { ...raw.metadata } };
      if (ns !== undefined) obj.metadata.namespace = ns;
      const label = `${resource.gvr.resource}${resource.gvr.group ? `.${resource.gvr.group}` : ''}/${obj.metadata.name ?? obj.metadata.generateName ?? ''}`;
      this.kindsCreated.add(resource.kind);
      try {
        if (action === 'create') {
          const created = await this.target.client.create(resource.gvr, ns, obj);
          result.notes.push(`${label.replace(/\/[^/]*$/, `/${created.metadata.name}`)} created`);
        } else {
          result.notes.push(`${label} ${await this.apply(resource, ns, obj)}`);
        }
      } catch (err) {
        throw new StepFailure(
          `${action} ${resource.kind} ${ns ? `${ns}/` : ''}${obj.metadata.name ?? ''}: ${(err as Error).message}`,
        );
      }
    }
  }

  /**
   * Create-or-update. Server-side apply when the server takes `application/apply-patch+yaml`; otherwise
   * create, and on AlreadyExists a strategic merge patch of the manifest (fields the manifest no longer
   * has are kept: without SSA there is no record of what the last apply set).
   */
  private async apply(resource: ApiResource, ns: string | undefined, obj: KubeObject): Promise<string> {
    const name = obj.metadata.name;
    if (!name) throw new StepFailure('apply needs metadata.name (use create for generateName)');
    if (this.ssa !== 'no') {
      const reply = await this.target.http({
        method: 'PATCH',
        path: `${resourcePath(resource.gvr, ns, name)}?fieldManager=${FIELD_MANAGER}&force=true`,
        body: JSON.stringify(obj),
        contentType: 'application/apply-patch+yaml',
      });
      if (reply.status === 200 || reply.status === 201) {
        this.ssa = 'yes';
        return reply.status === 201 ? 'created' : 'configured';
      }
      const unsupported = reply.status === 415 || (reply.status === 404 && this.ssa === 'unknown');
      if (!unsupported) throw errorOf(reply, 'server-side apply');
      if (reply.status === 415) this.ssa = 'no';
    }
    try {
      await this.target.client.create(resource.gvr, ns, obj);
      return 'created';
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 409)) throw err;
    }
    const patch: Record<string, unknown> = { ...obj };
    delete patch.status;
    try {
      await this.target.client.patch(resource.gvr, ns, name, 'strategic', patch);
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 415)) throw err;
      await this.target.client.patch(resource.gvr, ns, name, 'merge', patch);
    }
    return 'configured';
  }

  private async patch(step: Step, result: StepResult): Promise<void> {
    const p = step.patch!;
    const { resource, namespace } = refFor(this.context(0), p);
    const type: PatchType = p.type ?? 'strategic';
    const body = typeof p.patch === 'string' ? (yaml().parse(p.patch) as unknown) : p.patch;
    if (type === 'json' ? !Array.isArray(body) : !isPlainObject(body)) {
      throw new StepFailure(`a ${type} patch must be ${type === 'json' ? 'a list of operations' : 'an object'}`);
    }
    try {
      await this.target.client.patch(resource.gvr, namespace, p.name, type, body, p.subresource);
    } catch (err) {
      throw new StepFailure(
        `patch ${resource.kind} ${namespace ? `${namespace}/` : ''}${p.name}: ${(err as Error).message}`,
      );
    }
    result.notes.push(`${resource.gvr.resource}/${p.name} patched`);
  }

  private async delete(step: Step, result: StepResult): Promise<void> {
    const d = step.delete!;
    const resource = this.resources.resolve(d.kind, d.apiVersion);
    const ns = resource.namespaced ? (d.namespace ?? this.namespace) : undefined;
    const policy = d.cascade
      ? ({ background: 'Background', foreground: 'Foreground', orphan: 'Orphan' } as const)[d.cascade]
      : undefined;
    const names = d.name !== undefined ? [d.name] : await this.namesBySelector(resource, ns, d.selector!);
    if (names.length === 0) throw new StepFailure(`no ${resource.kind} matches ${d.selector}${ns ? ` in ${ns}` : ''}`);
    for (const name of names) {
      try {
        await this.target.client.delete(resource.gvr, ns, name, {
          ...(policy ? { propagationPolicy: policy } : {}),
          ...(d.gracePeriodSeconds !== undefined ? { gracePeriodSeconds: d.gracePeriodSeconds } : {}),
        });
      } catch (err) {
        throw new StepFailure(`delete ${resource.kind} ${ns ? `${ns}/` : ''}${name}: ${(err as Error).message}`);
      }
      result.notes.push(`${resource.gvr.resource}/${name} deleted`);
    }
  }

  private async namesBySelector(resource: ApiResource, ns: string | undefined, selector: string): Promise<string[]> {
    const list = await this.target.client.list(resource.gvr, ns, { labelSelector: selector });
    return list.items
      .filter((o) => !o.metadata.deletionTimestamp)
      .map((o) => o.metadata.name!)
      .sort();
  }

  private async scale(step: Step, result: StepResult): Promise<void> {
    const s = step.scale!;
    const { resource, namespace } = refFor(this.context(0), s);
    const reply = await this.target.http({
      method: 'PATCH',
      path: resourcePath(resource.gvr, namespace, s.name, 'scale'),
      body: JSON.stringify({ spec: { replicas: s.replicas } }),
      contentType: 'application/merge-patch+json',
    });
    if (reply.status !== 200) {
      const err = errorOf(reply, 'scale');
      throw new StepFailure(
        `scale ${resource.kind} ${namespace ? `${namespace}/` : ''}${s.name}: ${err.code === 404 && /could not find the requested resource/.test(err.message) ? `${resource.kind} has no scale subresource` : err.message}`,
      );
    }
    result.notes.push(`${resource.gvr.resource}/${s.name} scaled to ${s.replicas}`);
  }

  // ---- kubectl, faults ---------------------------------------------------------------------------------

  private async kubectl(k: KubectlStep, result: StepResult): Promise<void> {
    const args = kubectlArgs(k);
    const spec = typeof k === 'string' || Array.isArray(k) ? { args } : k;
    const binary = findKubectl();
    if (!binary)
      throw new StepFailure('kubectl is not installed: no kubectl on PATH (or set KUBE_SIM_KUBECTL=/path/to/kubectl)');
    const run = await runKubectl(binary, await this.target.connection(), args, {
      stdin: spec.stdin,
      cwd: this.loaded.baseDir,
      timeoutMs: spec.timeout !== undefined ? durationMs(spec.timeout) : 30_000,
    });
    result.kubectl = { args, exitCode: run.exitCode, stdout: run.stdout, stderr: run.stderr };
    const problems: string[] = [];
    const wantCode = spec.exitCode ?? 0;
    if (run.timedOut) problems.push(`kubectl did not finish within ${spec.timeout ?? '30s'} (wall clock)`);
    else if (run.exitCode !== wantCode)
      problems.push(
        `kubectl exited with ${run.exitCode}, expected ${wantCode}${run.stderr.trim() ? `: ${run.stderr.trim().split('\n')[0]}` : ''}`,
      );
    const contains = spec.contains === undefined ? [] : Array.isArray(spec.contains) ? spec.contains : [spec.contains];
    for (const c of contains)
      if (!run.stdout.includes(c)) problems.push(`stdout does not contain ${JSON.stringify(c)}`);
    if (spec.matches !== undefined && !new RegExp(spec.matches, 'm').test(run.stdout))
      problems.push(`stdout does not match /${spec.matches}/`);
    if (problems.length > 0) {
      const out = run.stdout.trim();
      throw new StepFailure(`${problems.join('; ')}${out ? `; stdout was:\n${out}` : ''}`);
    }
  }

  private async simPost(path: string, body: unknown, what: string, missing: string): Promise<void> {
    const reply = await this.target.http({ method: 'POST', path, body: JSON.stringify(body) });
    if (reply.status >= 200 && reply.status < 300) return;
    const err = errorOf(reply, what);
    if (reply.status === 404 && /could not find the requested resource/.test(err.message))
      throw new StepFailure(`${what}: ${missing}`);
    throw new StepFailure(`${what}: ${err.message}`);
  }

  private async fault(f: FaultStep, result: StepResult): Promise<void> {
    switch (f.type) {
      case 'node-fail':
      case 'node-recover': {
        if (!f.node && !f.selector) throw new StepFailure(`${f.type} needs node or selector`);
        const verb = f.type === 'node-fail' ? 'fail' : 'recover';
        // A node pool fails together: every node the selector matches, in name order.
        const names = f.node ? [f.node] : await this.nodesBySelector(f.selector!, f.type);
        for (const node of names) {
          await this.simPost(
            `/sim/v1/nodes/${encodeURIComponent(node)}/${verb}`,
            {},
            `${f.type} ${node}`,
            `this server has no node simulator (POST /sim/v1/nodes/NAME/${verb} is not served), so nodes cannot be failed or recovered`,
          );
          result.notes.push(`node ${node} ${verb === 'fail' ? 'failed' : 'recovered'}`);
        }
        return;
      }
      case 'pod-kill': {
        // Killing a pod is deleting it at once (grace period 0): its controller sees it gone and replaces it.
        const pods = this.resources.resolve('pods');
        const ns = f.namespace ?? this.namespace;
        const names = f.pod ? [f.pod] : f.selector ? await this.namesBySelector(pods, ns, f.selector) : [];
        if (names.length === 0)
          throw new StepFailure(
            `pod-kill: no pod ${f.pod ? `named ${f.pod}` : `matches ${f.selector ?? '(give pod or selector)'}`} in ${ns}`,
          );
        for (const name of names) {
          try {
            await this.target.client.delete(pods.gvr, ns, name, { gracePeriodSeconds: 0 });
          } catch (err) {
            throw new StepFailure(`pod-kill ${ns}/${name}: ${(err as Error).message}`);
          }
          result.notes.push(`pod ${name} killed`);
        }
        return;
      }
      case 'container-crash':
        return this.crash(f, result);
    }
  }

  /**
   * A container crash, done by the kubelet simulator: its per-pod settings kube-sim.dev/duration (how long
   * containers run) and kube-sim.dev/exit-code are set so the running containers exit now with the code
   * given, then restored, so the crash happens once. restartPolicy decides what follows (an immediate
   * restart, CrashLoopBackOff later, or a Failed pod). Fails, rather than pretending, when no simulated
   * kubelet runs the pod or when it did not act.
   */
  private async crash(f: FaultStep, result: StepResult): Promise<void> {
    if (!f.pod) throw new StepFailure('container-crash needs pod');
    const ns = f.namespace ?? this.namespace;
    const what = `container-crash ${ns}/${f.pod}`;
    const pods = this.resources.resolve('pods');
    let pod: KubeObject;
    try {
      pod = await this.target.client.get(pods.gvr, ns, f.pod);
    } catch (err) {
      throw new StepFailure(`${what}: ${(err as Error).message}`);
    }
    const spec = (pod.spec ?? {}) as { nodeName?: string; containers?: Array<{ name: string }> };
    const statuses = (pod.status as { containerStatuses?: ContainerStatus[] } | undefined)?.containerStatuses ?? [];
    const running = statuses.filter((c) => c.state?.running?.startedAt);
    if (!spec.nodeName || running.length === 0) {
      throw new StepFailure(
        `${what}: the pod has no running container on a node (a crash needs a simulated kubelet running it: sim serve --nodes / scenario nodes)`,
      );
    }
    if (f.container && !(spec.containers ?? []).some((c) => c.name === f.container))
      throw new StepFailure(`${what}: the pod has no container ${f.container}`);
    if (f.container && (spec.containers ?? []).length > 1) {
      throw new StepFailure(
        `${what}: the kubelet simulator crashes a pod's containers together; container ${f.container} cannot crash alone`,
      );
    }
    const startedAt = Math.max(...running.map((c) => Date.parse(c.state!.running!.startedAt!)));
    const elapsed = this.target.now() - startedAt;
    const annotations = pod.metadata.annotations ?? {};
    const before = {
      duration: annotations[DURATION_SETTING] ?? null,
      exitCode: annotations[EXIT_CODE_SETTING] ?? null,
    };
    const restarts = (list: ContainerStatus[]): number => list.reduce((n, c) => n + (c.restartCount ?? 0), 0);
    const exitCode = f.exitCode ?? 1;
    await this.target.client.patch(pods.gvr, ns, f.pod, 'merge', {
      metadata: {
        annotations: { [DURATION_SETTING]: `${Math.max(elapsed, 0)}ms`, [EXIT_CODE_SETTING]: String(exitCode) },
      },
    });
    await this.target.settle();
    await this.history.catchUp();
    let after: KubeObject | undefined;
    try {
      after = await this.target.client.get(pods.gvr, ns, f.pod);
      await this.target.client.patch(pods.gvr, ns, f.pod, 'merge', {
        metadata: { annotations: { [DURATION_SETTING]: before.duration, [EXIT_CODE_SETTING]: before.exitCode } },
      });
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 404)) throw err;
    }
    const afterStatuses =
      (after?.status as { containerStatuses?: ContainerStatus[] } | undefined)?.containerStatuses ?? [];
    const exited = afterStatuses.some(
      (c) => c.state?.terminated?.exitCode === exitCode || c.lastState?.terminated?.exitCode === exitCode,
    );
    if (!after || (!exited && restarts(afterStatuses) === restarts(statuses))) {
      throw new StepFailure(
        `${what}: the kubelet did not stop the containers (is a simulated kubelet running pod ${f.pod}?)`,
      );
    }
    result.notes.push(
      `pod ${f.pod}: containers exited with code ${exitCode}; now ${podState(after)}, ${restarts(afterStatuses)} restart(s)`,
    );
  }

  private async nodesBySelector(selector: string, what: string): Promise<string[]> {
    const names = await this.namesBySelector(this.resources.resolve('nodes'), undefined, selector);
    if (names.length === 0) throw new StepFailure(`${what}: no node matches ${selector}`);
    return names;
  }

  /**
   * kubectl drain --ignore-daemonsets on cluster time: cordons the nodes, then asks the Eviction API for each of
   * their pods (but DaemonSet and mirror pods), retrying the refused ones (429: a PodDisruptionBudget) every 5 s
   * of cluster time, as kubectl does, until `timeout`; then waits until the evicted pods are gone. Fails naming the
   * pods it could not evict.
   */
  private async drain(d: DrainStep, result: StepResult): Promise<void> {
    const nodesResource = this.resources.resolve('nodes');
    const pods = this.resources.resolve('pods');
    const names = d.node ? [d.node] : await this.nodesBySelector(d.selector!, 'drain');
    const deadline = this.target.now() + durationMs(d.timeout ?? '5m');
    for (const node of names) {
      try {
        await this.target.client.patch(nodesResource.gvr, undefined, node, 'merge', { spec: { unschedulable: true } });
      } catch (err) {
        throw new StepFailure(`drain ${node}: ${(err as Error).message}`);
      }
      result.notes.push(`node/${node} cordoned`);
    }
    const onNodes = async (): Promise<KubeObject[]> => {
      const out: KubeObject[] = [];
      for (const node of names) {
        const list = await this.target.client.list(pods.gvr, undefined, { fieldSelector: `spec.nodeName=${node}` });
        for (const pod of list.items) {
          const owner = pod.metadata.ownerReferences?.find((r) => r.controller);
          const mirror = pod.metadata.annotations?.['kubernetes.io/config.mirror'] !== undefined;
          if (owner?.kind !== 'DaemonSet' && !mirror) out.push(pod);
        }
      }
      return out.sort((a, b) => cacheKeyOf(a).localeCompare(cacheKeyOf(b)));
    };
    const evicted = new Set<string>();
    for (;;) {
      this.checkSignal();
      const pending = (await onNodes()).filter((p) => !p.metadata.deletionTimestamp && !evicted.has(cacheKeyOf(p)));
      const refused: string[] = [];
      for (const pod of pending) {
        const { namespace, name } = pod.metadata;
        try {
          await this.target.client.createSubresource!(pods.gvr, namespace, name!, 'eviction', {
            apiVersion: 'policy/v1',
            kind: 'Eviction',
            metadata: { name, namespace },
          });
          evicted.add(cacheKeyOf(pod));
          if (evicted.size <= 10) result.notes.push(`evicting pod ${namespace}/${name}`);
        } catch (err) {
          if (err instanceof ApiError && err.code === 404) continue;
          if (!(err instanceof ApiError && err.code === 429))
            throw new StepFailure(`evict ${namespace}/${name}: ${(err as Error).message}`);
          refused.push(`${namespace}/${name} (${err.message})`);
        }
      }
      await this.target.settle();
      const left = (await onNodes()).length;
      if (refused.length === 0 && left === 0) break;
      if (this.target.now() >= deadline)
        throw new StepFailure(
          `drain: after ${offset(deadline, deadline - durationMs(d.timeout ?? '5m')).slice(2)} of cluster time, ${left} pod(s) are still on ${names.join(', ')}${refused.length > 0 ? `; evictions refused: ${refused.join('; ')}` : ''}`,
        );
      // Refused evictions are asked again 5 s later (kubectl drain's retry); evicted pods are waited for.
      const next =
        refused.length > 0 ? this.target.now() + 5000 : (this.target.nextTimerAt() ?? this.target.now() + 1000);
      await this.target.advance(Math.max(Math.min(next, deadline) - this.target.now(), 1));
    }
    result.notes.push(`drained ${names.join(', ')}: ${evicted.size} pod(s) evicted`);
  }

  // ---- waitFor -----------------------------------------------------------------------------------------

  /**
   * Lets cluster time pass until the condition holds. On the embedded virtual clock it jumps from one
   * scheduled piece of work to the next (checking after each), so it finishes at the exact moment the
   * condition became true; on a remote virtual clock it steps a second at a time; on a real one it polls.
   */
  private async waitFor(step: Step, result: StepResult, index: number): Promise<void> {
    const w = step.waitFor!;
    const timeout = durationMs(w.timeout ?? '5m');
    const ctx = this.context(index);
    const start = this.target.now();
    const deadline = start + timeout;
    for (;;) {
      this.checkSignal();
      const outcome = await evaluateState(ctx, w);
      if (!result.named && !w.description) result.title = `wait until ${outcome.description}`;
      if (outcome.ok) {
        result.notes.push(`${outcome.description} after ${offset(this.target.now(), start).slice(2)}`);
        return;
      }
      const now = this.target.now();
      if (now >= deadline) {
        const hint = await this.hint(w);
        const blockers = await blockingPods(ctx, w);
        throw new StepFailure(
          `timed out after ${offset(deadline, start).slice(2)} of cluster time waiting until ${outcome.description}; found ${outcome.found}${hint}${blockers.length > 0 ? `\nnot Ready:\n${blockers.map((b) => `  ${b}`).join('\n')}` : ''}`,
        );
      }
      if (this.target.virtual) {
        // Remote: no view of the server's timers, so steps of a second, growing to 30s on long waits.
        const next =
          this.target.mode === 'embedded'
            ? this.target.nextTimerAt()
            : now + Math.min(Math.max(1000, Math.floor((now - start) / 10 / 1000) * 1000), 30_000);
        const to = Math.min(next ?? deadline, deadline);
        await this.target.advance(Math.max(to - now, 1));
      } else {
        await this.wallWait(100);
      }
    }
  }

  /** Why a wait may never end: a kind the scenario created whose controller is not running, or no nodes. */
  private async hint(w: { object?: { kind: string }; count?: { kind: string } }): Promise<string> {
    const notes: string[] = [];
    const running = this.target.controllers();
    if (running) {
      const missing = [...this.kindsCreated].filter(
        (k) => CONTROLLER_FOR_KIND[k] && !running.includes(CONTROLLER_FOR_KIND[k]!),
      );
      if (missing.length > 0) {
        notes.push(
          `no controller runs for ${missing.join(', ')} in this build (running: ${running.join(', ') || 'none'})`,
        );
      }
    }
    const kind = w.object?.kind ?? w.count?.kind ?? '';
    if (/^(pods?|po)$/i.test(kind)) {
      const nodes = await this.target.client.list(this.resources.resolve('nodes').gvr, undefined);
      if (nodes.items.length === 0) notes.push('the cluster has no nodes, so pods are never scheduled or started');
    }
    return notes.length > 0 ? ` (hint: ${notes.join('; ')})` : '';
  }
}
