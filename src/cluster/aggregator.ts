import { rfc3339 } from '../clock/clock.js';
import { raceTolerant } from '../api/errors.js';
import { allOf, settle, then, type MaybePromise } from '../api/maybe-async.js';
import type { KubeObject } from '../api/types.js';
import { apiServices, BUILTIN_API_PRIORITIES, CRD_API_PRIORITY } from '../registry/builtin/apiregistration.js';
import { builtinKinds } from '../registry/builtin/index.js';
import type { GenericStore } from '../registry/generic-store.js';
import type { Registry } from '../registry/registry.js';
import { groupVersion, resourceKey } from '../registry/types.js';

/**
 * What kube-apiserver's aggregator keeps of its own API: one Local APIService per group-version served, Available
 * as local ones always are. The built-in ones are registered on start (label `automanaged: onstart`: a user may
 * change or delete them until the next start); those of CustomResourceDefinitions follow the CRDs (`automanaged:
 * true`: made when a group-version is served, removed when it no longer is), as its crdregistration controller does.
 */
const MANAGED = 'kube-aggregator.kubernetes.io/automanaged';
const BUILTIN = new Set(builtinKinds.map((k) => groupVersion(k)));

/** An extension API server's APIService (metrics-server's, as its components.yaml registers it). */
export interface ExtensionApiService {
  group: string;
  version: string;
  groupPriorityMinimum: number;
  versionPriority: number;
  service: { namespace: string; name: string; port: number };
  labels: Record<string, string>;
}

export class LocalApiServices {
  private pending = false;
  /** Group-versions an extension API server serves: not Local, and never removed as a custom resource's would be. */
  private readonly extensions = new Map<string, ExtensionApiService>();

  constructor(
    private readonly registry: Registry,
    private readonly api: GenericStore,
  ) {
    // Registry changes come while a CRD write is under way: the APIService writes follow once it is done.
    registry.onChange(() => this.schedule());
  }

  /** The built-in group-versions' APIServices, made where missing (the autoregister controller on start). */
  registerBuiltins(): MaybePromise<void> {
    const writes: unknown[] = [];
    for (const gv of BUILTIN) {
      const priority = BUILTIN_API_PRIORITIES[gv];
      if (priority && this.registry.groupVersions().some((x) => groupVersion(x) === gv))
        writes.push(this.ensure(gv, priority, 'onstart'));
    }
    for (const extension of this.extensions.values()) writes.push(this.ensureExtension(extension));
    writes.push(this.syncCustomResources());
    return allOf(writes);
  }

  /**
   * An APIService pointing at an extension API server that kube-sim simulates in-process (metrics-server): made on
   * start where missing, Available as the aggregator finds a healthy one ("all checks passed").
   */
  registerExtension(extension: ExtensionApiService): void {
    this.extensions.set(`${extension.group}/${extension.version}`, extension);
  }

  private ensureExtension(extension: ExtensionApiService): unknown {
    const name = `${extension.version}.${extension.group}`;
    if (this.api.store.get(resourceKey(apiServices), undefined, name)) return undefined;
    return this.write(
      name,
      {
        metadata: { name, labels: extension.labels },
        spec: {
          group: extension.group,
          version: extension.version,
          groupPriorityMinimum: extension.groupPriorityMinimum,
          versionPriority: extension.versionPriority,
          insecureSkipTLSVerify: true,
          service: extension.service,
        },
      },
      { reason: 'Passed', message: 'all checks passed' },
    );
  }

  private schedule(): void {
    if (this.pending) return;
    this.pending = true;
    queueMicrotask(() => {
      this.pending = false;
      settle(this.syncCustomResources(), () => undefined);
    });
  }

  /** One APIService for every served group-version of custom resources, none for a group-version no longer served. */
  private syncCustomResources(): MaybePromise<void> {
    const writes: unknown[] = [];
    const served = new Set(this.registry.groupVersions().map((gv) => groupVersion(gv)));
    for (const gv of served)
      if (!BUILTIN.has(gv) && !this.extensions.has(gv)) writes.push(this.ensure(gv, CRD_API_PRIORITY, 'true'));
    for (const service of this.api.store.all(resourceKey(apiServices))) {
      if (service.metadata.labels?.[MANAGED] !== 'true') continue;
      const spec = service.spec as { group?: string; version?: string } | undefined;
      const gv = spec?.group ? `${spec.group}/${spec.version}` : String(spec?.version);
      if (served.has(gv)) continue;
      writes.push(
        raceTolerant(() => this.api.delete(apiServices, undefined, service.metadata.name!, { internal: true })),
      );
    }
    return allOf(writes);
  }

  private ensure(
    gv: string,
    [groupPriorityMinimum, versionPriority]: readonly [number, number],
    managed: string,
  ): unknown {
    const [group, version] = gv.includes('/') ? gv.split('/') : ['', gv];
    const name = `${version}.${group}`;
    if (this.api.store.get(resourceKey(apiServices), undefined, name)) return undefined;
    return this.write(
      name,
      {
        metadata: { name, labels: { [MANAGED]: managed } },
        spec: { group, version, groupPriorityMinimum, versionPriority },
      },
      { reason: 'Local', message: 'Local APIServices are always available' },
    );
  }

  /** Creates an APIService and records it Available. */
  private write(name: string, body: KubeObject, available: { reason: string; message: string }): unknown {
    // Made meanwhile by someone else (another API server, with etcd): theirs stands.
    return raceTolerant(() =>
      then(this.api.create(apiServices, undefined, body, { internal: true }), (created: KubeObject) =>
        this.api.update(
          apiServices,
          undefined,
          name,
          {
            ...created,
            status: {
              conditions: [
                {
                  type: 'Available',
                  status: 'True',
                  lastTransitionTime: rfc3339(this.api.ctx.clock.now()),
                  ...available,
                },
              ],
            },
          },
          { subresource: 'status', internal: true },
        ),
      ),
    );
  }
}
