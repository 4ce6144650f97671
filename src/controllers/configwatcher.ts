import { createHash } from 'node:crypto';
import { parseLabelSelector } from '../api/selectors.js';
import { deepEqual, isPlainObject, type KubeObject } from '../api/types.js';
import { Resources, type Gvr } from '../client/client.js';
import { cacheKey, type Informer } from '../client/informer.js';
import { ReconcileLoop, type Controller, type ControllerContext } from '../runtime/controller.js';
import { ignoreNotFound } from '../api/errors.js';

/** The seed article's annotation: a ConfigMap names the pods to restart when its data changes. */
export const POD_DELETE_SELECTOR = 'k8spatterns.io/podDeleteSelector';
/** stakater/Reloader's annotations on a Deployment, StatefulSet or DaemonSet. */
export const RELOADER_AUTO = 'reloader.stakater.com/auto';
export const RELOADER_CONFIGMAPS = 'configmap.reloader.stakater.com/reload';
export const RELOADER_SECRETS = 'secret.reloader.stakater.com/reload';

type Source = 'configmap' | 'secret';

/**
 * The config-watcher: the Controller pattern of the seed article built in, plus stakater/Reloader.
 * - A ConfigMap annotated k8spatterns.io/podDeleteSelector whose data changes gets the pods matching the
 *   selector (in its namespace) deleted, so their controller recreates them with the new environment.
 * - A workload annotated for Reloader gets a rolling restart when a ConfigMap or Secret it uses changes:
 *   like Reloader's default env-vars strategy, a STAKATER_<NAME>_<KIND> variable with the data's hash is
 *   set on its containers, which changes the pod template.
 * It remembers a hash of the data of each object that changed, so it acts on real data changes only, once each.
 */
export function configWatcher(ctx: ControllerContext): Controller {
  const configmaps = ctx.informers.for(Resources.configmaps);
  const secrets = ctx.informers.for(Resources.secrets);
  const pods = ctx.informers.for(Resources.pods);
  const workloads: Array<{ gvr: Gvr; informer: Informer }> = [
    Resources.deployments,
    Resources.statefulsets,
    Resources.daemonsets,
  ].map((gvr) => ({
    gvr,
    informer: ctx.informers.for(gvr),
  }));
  for (const { informer } of workloads) informer.addIndex('reloader-source', reloaderSources);
  const recorder = ctx.recorder('config-watcher');
  const lastHash = new Map<string, string>();
  const loop = new ReconcileLoop('configwatcher', ctx, reconcile);

  // Only objects whose data changed are hashed: the hash of the data they had before their first change is the
  // baseline, so creating (or relabelling) a ConfigMap costs nothing here, however many there are.
  const track = (kind: Source, informer: Informer): void => {
    informer.addEventHandler({
      update: (old, obj) => {
        if (deepEqual(old.data, obj.data) && deepEqual(old.binaryData, obj.binaryData)) return;
        const key = `${kind}/${cacheKey(obj)}`;
        if (!lastHash.has(key)) lastHash.set(key, dataHash(old));
        loop.queue.add(key);
      },
      delete: (obj) => lastHash.delete(`${kind}/${cacheKey(obj)}`),
    });
  };
  track('configmap', configmaps);
  track('secret', secrets);

  async function reconcile(key: string): Promise<void> {
    const [kind, namespace, name] = key.split('/') as [Source, string, string];
    const obj = (kind === 'configmap' ? configmaps : secrets).get(namespace, name);
    if (!obj) return;
    const previous = lastHash.get(key);
    if (previous === undefined) return;
    const hash = dataHash(obj);
    lastHash.set(key, hash);
    if (previous === hash) return;
    const selector = obj.metadata.annotations?.[POD_DELETE_SELECTOR];
    if (kind === 'configmap' && selector) await deleteSelectedPods(obj, selector);
    await reloadWorkloads(kind, obj, hash);
  }

  async function deleteSelectedPods(configmap: KubeObject, selectorText: string): Promise<void> {
    const namespace = configmap.metadata.namespace!;
    let selector: ReturnType<typeof parseLabelSelector>;
    try {
      selector = parseLabelSelector(selectorText);
    } catch {
      recorder.event(
        configmap,
        'Warning',
        'InvalidSelector',
        `annotation ${POD_DELETE_SELECTOR} is not a valid label selector: ${selectorText}`,
      );
      return;
    }
    const matching = pods
      .listNamespace(namespace)
      .filter((p) => !p.metadata.deletionTimestamp && selector.matches(p.metadata.labels));
    for (const pod of matching) {
      ctx.log(
        'info',
        `configwatcher: ConfigMap ${namespace}/${configmap.metadata.name} changed, deleting pod ${pod.metadata.name} (selector ${selectorText})`,
      );
      await ignoreNotFound(ctx.client.delete(Resources.pods, namespace, pod.metadata.name!));
      recorder.event(
        configmap,
        'Normal',
        'PodDeleted',
        `Deleted pod ${pod.metadata.name} matching ${selectorText} after ConfigMap change`,
      );
    }
  }

  async function reloadWorkloads(kind: Source, source: KubeObject, hash: string): Promise<void> {
    const sourceKey = `${kind}/${source.metadata.namespace}/${source.metadata.name}`;
    const envName = `STAKATER_${source.metadata.name!.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_${kind.toUpperCase()}`;
    for (const { gvr, informer } of workloads) {
      for (const workload of informer.byIndex('reloader-source', sourceKey)) {
        const template = (workload.spec as { template?: { spec?: { containers?: Array<Record<string, unknown>> } } })
          .template;
        const containers = template?.spec?.containers ?? [];
        const patchContainers = containers.map((c) => {
          const env = (Array.isArray(c.env) ? (c.env as Array<{ name: string; value?: string }>) : []).filter(
            (e) => e.name !== envName,
          );
          return { name: c.name, env: [...env, { name: envName, value: hash }] };
        });
        ctx.log(
          'info',
          `configwatcher: ${kind} ${sourceKey} changed, rolling ${gvr.resource} ${workload.metadata.namespace}/${workload.metadata.name}`,
        );
        await ignoreNotFound(
          ctx.client.patch(gvr, workload.metadata.namespace, workload.metadata.name!, 'strategic', {
            spec: { template: { spec: { containers: patchContainers } } },
          }),
        );
        recorder.event(
          workload,
          'Normal',
          'Reloaded',
          `Changes detected in ${kind} ${source.metadata.name}: rolling restart`,
        );
      }
    }
  }

  return {
    name: 'configwatcher',
    start: async () => loop.start(),
    stop: () => loop.stop(),
  };
}

function dataHash(obj: KubeObject): string {
  return createHash('sha1')
    .update(JSON.stringify([obj.data ?? null, obj.binaryData ?? null]))
    .digest('hex');
}

/** "configmap/ns/name" keys of the sources a workload asked Reloader to follow. */
function reloaderSources(workload: KubeObject): string[] {
  const annotations = workload.metadata.annotations ?? {};
  const ns = workload.metadata.namespace;
  const out = new Set<string>();
  const named = (annotation: string, kind: Source): void => {
    for (const name of (annotations[annotation] ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean))
      out.add(`${kind}/${ns}/${name}`);
  };
  named(RELOADER_CONFIGMAPS, 'configmap');
  named(RELOADER_SECRETS, 'secret');
  if (annotations[RELOADER_AUTO] === 'true')
    for (const ref of referencedSources(workload)) out.add(`${ref.kind}/${ns}/${ref.name}`);
  return [...out];
}

/** ConfigMaps and Secrets a pod template uses: env, envFrom and volumes (projected ones too). */
export function referencedSources(workload: KubeObject): Array<{ kind: Source; name: string }> {
  const refs: Array<{ kind: Source; name: string }> = [];
  const spec = (workload.spec as { template?: { spec?: Record<string, unknown> } } | undefined)?.template?.spec ?? {};
  const add = (kind: Source, name: unknown): void => {
    if (typeof name === 'string' && name) refs.push({ kind, name });
  };
  for (const list of ['initContainers', 'containers']) {
    for (const c of Array.isArray(spec[list]) ? (spec[list] as Array<Record<string, unknown>>) : []) {
      for (const e of Array.isArray(c.env) ? (c.env as Array<Record<string, unknown>>) : []) {
        const from = isPlainObject(e.valueFrom) ? e.valueFrom : {};
        if (isPlainObject(from.configMapKeyRef)) add('configmap', from.configMapKeyRef.name);
        if (isPlainObject(from.secretKeyRef)) add('secret', from.secretKeyRef.name);
      }
      for (const e of Array.isArray(c.envFrom) ? (c.envFrom as Array<Record<string, unknown>>) : []) {
        if (isPlainObject(e.configMapRef)) add('configmap', e.configMapRef.name);
        if (isPlainObject(e.secretRef)) add('secret', e.secretRef.name);
      }
    }
  }
  for (const v of Array.isArray(spec.volumes) ? (spec.volumes as Array<Record<string, unknown>>) : []) {
    if (isPlainObject(v.configMap)) add('configmap', v.configMap.name);
    if (isPlainObject(v.secret)) add('secret', v.secret.secretName);
    const sources =
      isPlainObject(v.projected) && Array.isArray(v.projected.sources)
        ? (v.projected.sources as Array<Record<string, unknown>>)
        : [];
    for (const s of sources) {
      if (isPlainObject(s.configMap)) add('configmap', s.configMap.name);
      if (isPlainObject(s.secret)) add('secret', s.secret.name);
    }
  }
  return refs;
}
