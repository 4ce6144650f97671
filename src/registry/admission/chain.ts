import { eachInOrder, then, type MaybePromise } from '../../api/maybe-async.js';
import type { KubeObject } from '../../api/types.js';
import type { Requester } from '../../auth/requester.js';
import type { UserInfo } from '../../auth/user.js';
import type { AdmissionOperation, AdmissionPlugin, AdmissionRequest, KindInfo } from '../types.js';

/**
 * kube-apiserver's order of admission plugins (AllOrderedPlugins, kube-sim's subset of it): every mutating plugin
 * runs in this order, then every validating one. The webhooks and policies come after the built-in plugins, and
 * ResourceQuota last of all, so that what it charges is what gets stored.
 */
export const ADMISSION_ORDER: readonly string[] = [
  'NamespaceLifecycle',
  'LimitRanger',
  'ServiceAccount',
  'Priority',
  'DefaultTolerationSeconds',
  'DefaultStorageClass',
  'StorageObjectInUseProtection',
  'RuntimeClass',
  'CertificateApproval',
  'CertificateSigning',
  'CertificateSubjectRestriction',
  'DefaultIngressClass',
  'MutatingAdmissionWebhook',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionWebhook',
  'ResourceQuota',
];

const DEFAULT_OPERATIONS: readonly AdmissionOperation[] = ['CREATE', 'UPDATE'];

/**
 * The admission chain of one server: plugins in kube-apiserver's order. A write runs `admit` (mutating), then,
 * after the strategy's validation, `validate`; both stay synchronous unless a plugin answers with a promise.
 */
export class AdmissionChain {
  private mutating: AdmissionPlugin[] = [];
  private validating: AdmissionPlugin[] = [];
  private readonly plugins: AdmissionPlugin[] = [];

  /** Adds a plugin at its place in ADMISSION_ORDER (unknown names go last, in the order added). */
  register(plugin: AdmissionPlugin): void {
    this.plugins.push(plugin);
    const rank = (p: AdmissionPlugin): number => {
      const i = ADMISSION_ORDER.indexOf(p.name);
      return i < 0 ? ADMISSION_ORDER.length : i;
    };
    const ordered = [...this.plugins].sort((a, b) => rank(a) - rank(b));
    this.mutating = ordered.filter((p) => p.admit !== undefined);
    this.validating = ordered.filter((p) => p.validate !== undefined);
  }

  get empty(): boolean {
    return this.plugins.length === 0;
  }

  /**
   * The mutating plugins, in order; once more (reinvocation) when a webhook changed the object and some webhook
   * asked to see the result (reinvocationPolicy IfNeeded), as kube-apiserver's reinvoker does.
   */
  admit(request: AdmissionRequest): MaybePromise<void> {
    if (this.mutating.length === 0) return;
    const round = (): MaybePromise<void> =>
      eachInOrder(this.mutating, (plugin) => (handles(plugin, request) ? plugin.admit!(request) : undefined));
    return then(round(), () => {
      if (!request.reinvocation.shouldReinvoke) return;
      request.reinvocation.round = 1;
      return round();
    });
  }

  /** The validating plugins, in order; what they ask to do once the write is stored. */
  validate(request: AdmissionRequest): MaybePromise<Array<() => void> | undefined> {
    if (this.validating.length === 0) return undefined;
    let commits: Array<() => void> | undefined;
    const done = eachInOrder(this.validating, (plugin) => {
      if (!handles(plugin, request)) return;
      return then(plugin.validate!(request), (commit) => {
        if (commit) (commits ??= []).push(commit);
      });
    });
    return then(done, () => commits);
  }
}

function handles(plugin: AdmissionPlugin, request: AdmissionRequest): boolean {
  return (plugin.operations ?? DEFAULT_OPERATIONS).includes(request.operation);
}

/** What a write's options say that admission cares about (WriteOptions and a delete's options alike). */
export interface AdmissionWriteOptions {
  dryRun?: boolean;
  fieldManager?: string;
  fieldValidation?: string;
  force?: boolean;
  warnings?: string[];
  auditAnnotations?: Record<string, string>;
  requester?: Requester;
  gracePeriodSeconds?: number;
  propagationPolicy?: string;
  orphanDependents?: boolean;
  preconditions?: { uid?: string; resourceVersion?: string };
}

/** admission.AttributesRecord: one request's attributes, shared by every plugin of the chain. */
export class Attributes implements AdmissionRequest {
  readonly reinvocation: AdmissionRequest['reinvocation'] = { round: 0, shouldReinvoke: false, values: new Map() };

  constructor(
    readonly info: KindInfo,
    readonly operation: AdmissionOperation,
    readonly subresource: string,
    readonly namespace: string | undefined,
    readonly name: string,
    public obj: KubeObject | undefined,
    readonly old: KubeObject | undefined,
    private readonly write: AdmissionWriteOptions,
    private readonly decode: ((patched: unknown) => KubeObject) | undefined,
  ) {}

  get dryRun(): boolean {
    return this.write.dryRun === true;
  }

  get requester(): Requester | undefined {
    return this.write.requester;
  }

  get user(): UserInfo | undefined {
    return this.write.requester?.user;
  }

  /** CreateOptions, UpdateOptions or DeleteOptions as kube-apiserver hands them to webhooks (meta.k8s.io/v1). */
  get options(): Record<string, unknown> | null {
    const w = this.write;
    const dryRun = w.dryRun ? { dryRun: ['All'] } : {};
    switch (this.operation) {
      case 'CREATE':
      case 'UPDATE': {
        const options: Record<string, unknown> = {
          kind: this.operation === 'CREATE' ? 'CreateOptions' : 'UpdateOptions',
          apiVersion: 'meta.k8s.io/v1',
          ...dryRun,
        };
        if (w.fieldManager) options.fieldManager = w.fieldManager;
        if (w.fieldValidation) options.fieldValidation = w.fieldValidation;
        return options;
      }
      case 'DELETE': {
        const options: Record<string, unknown> = { kind: 'DeleteOptions', apiVersion: 'meta.k8s.io/v1', ...dryRun };
        if (w.gracePeriodSeconds !== undefined) options.gracePeriodSeconds = w.gracePeriodSeconds;
        if (w.preconditions) options.preconditions = w.preconditions;
        if (w.orphanDependents !== undefined) options.orphanDependents = w.orphanDependents;
        if (w.propagationPolicy) options.propagationPolicy = w.propagationPolicy;
        return options;
      }
      default:
        return null;
    }
  }

  replace(patched: unknown): void {
    if (!this.decode) throw new Error(`admission cannot replace the object of a ${this.operation}`);
    this.obj = this.decode(patched);
  }

  warn(text: string): void {
    (this.write.warnings ??= []).push(text);
  }

  annotate(key: string, value: string): void {
    // AddAnnotation refuses to overwrite a key with a different value; the first one stands.
    (this.write.auditAnnotations ??= {})[key] ??= value;
  }
}
