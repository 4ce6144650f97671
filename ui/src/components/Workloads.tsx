import { memo } from 'preact/compat';
import { useState } from 'preact/hooks';
import { scale } from '../actions.js';
import { type Kind, type KubeObject, RESOURCES } from '../api.js';
import { useCan, useClock, useTopics } from '../hooks.js';
import { age, condition, revisionOf, rolloutBounds } from '../model.js';
import { select } from '../selection.js';
import { keyOf, store } from '../store.js';
import { PodChip } from './Nodes.js';

/** A workload row shows at most this many pods; the rest are counted. */
const MAX_PODS_SHOWN = 120;

function status<T>(obj: KubeObject): Partial<T> {
  return (obj.status ?? {}) as Partial<T>;
}

function ObjectLink({ kind, obj, label }: { kind: Kind; obj: KubeObject; label?: string }) {
  return (
    <button
      type="button"
      class="link"
      onClick={() => select(kind, keyOf(obj))}
      title={`inspect ${kind} ${obj.metadata.name}`}
    >
      {label ?? obj.metadata.name}
    </button>
  );
}

function dependentsOf(uid: string | undefined, kind: Kind): KubeObject[] {
  if (!uid) return [];
  return store
    .dependents(uid)
    .filter((d) => d.kind === kind)
    .map((d) => d.object);
}

/** The first of an owner's pods by name, and how many more there are. */
function PodRow({ pods, total }: { pods: KubeObject[]; total: number }) {
  return (
    <div class="pods mini">
      {pods.map((pod) => (
        <PodChip key={pod.metadata.uid} pod={pod} named={false} />
      ))}
      {total > pods.length && <span class="more">+{total - pods.length}</span>}
    </div>
  );
}

/** `kubectl scale` through the /scale subresource; disabled, with the reason, when RBAC does not allow it. */
function ScaleControl({ kind, obj }: { kind: 'Deployment' | 'StatefulSet' | 'ReplicaSet'; obj: KubeObject }) {
  const resource = RESOURCES[kind];
  const decision = useCan({
    verb: 'patch',
    group: resource.group,
    resource: resource.plural,
    subresource: 'scale',
    namespace: obj.metadata.namespace,
  });
  const replicas = (obj.spec as { replicas?: number } | undefined)?.replicas ?? 1;
  const [busy, setBusy] = useState(false);
  const allowed = decision?.allowed === true && !busy;
  const why = decision === undefined ? 'checking permissions…' : decision.allowed ? '' : decision.reason;
  const to = async (n: number) => {
    setBusy(true);
    await scale(kind, obj.metadata.namespace ?? '', obj.metadata.name, Math.max(0, n));
    setBusy(false);
  };
  return (
    <span class="scale" title={why || `scale ${kind} ${obj.metadata.name}`}>
      <button
        type="button"
        disabled={!allowed || replicas === 0}
        onClick={() => to(replicas - 1)}
        aria-label="scale down"
      >
        −
      </button>
      <span class="replicas" data-replicas={replicas}>
        {replicas}
      </span>
      <button type="button" disabled={!allowed} onClick={() => to(replicas + 1)} aria-label="scale up">
        +
      </button>
    </span>
  );
}

interface DeploymentStatus {
  replicas: number;
  updatedReplicas: number;
  readyReplicas: number;
  availableReplicas: number;
  unavailableReplicas: number;
}

/** The rollout within its fences: pods (new ready, new starting, old) on a track as long as replicas + maxSurge. */
function RolloutBar({ deployment, newRs }: { deployment: KubeObject; newRs: KubeObject | undefined }) {
  const bounds = rolloutBounds(deployment);
  const s = status<DeploymentStatus>(deployment);
  const total = s.replicas ?? 0;
  const updated = s.updatedReplicas ?? 0;
  const ready = s.readyReplicas ?? 0;
  const available = s.availableReplicas ?? 0;
  const newReady = Math.min(updated, newRs ? (status<{ readyReplicas: number }>(newRs).readyReplicas ?? 0) : 0);
  const old = Math.max(0, total - updated);
  const span = Math.max(bounds.replicas + bounds.maxSurge, total, 1);
  const pct = (n: number) => `${(n / span) * 100}%`;
  const minAvailable = Math.max(0, bounds.replicas - bounds.maxUnavailable);
  const progressing = condition(deployment, 'Progressing');
  const done = updated === bounds.replicas && available === bounds.replicas && total === bounds.replicas && old === 0;
  return (
    <div class="rollout" data-done={String(done)}>
      <div class="track" title="pods: updated and ready, updated and starting, old">
        <span class="seg new-ready" style={{ width: pct(newReady) }} />
        <span class="seg new-starting" style={{ width: pct(updated - newReady) }} />
        <span class="seg old" style={{ width: pct(old) }} />
        <span class="fence desired" style={{ left: pct(bounds.replicas) }} title={`desired: ${bounds.replicas}`} />
      </div>
      <div class="track thin" title="available pods, and the least the rollout keeps available">
        <span class="seg available" style={{ width: pct(available) }} />
        <span class="fence min" style={{ left: pct(minAvailable) }} title={`at least ${minAvailable} available`} />
        <span class="fence desired" style={{ left: pct(bounds.replicas) }} />
      </div>
      <div class="legend" aria-hidden="true">
        <span class="key new-ready">new, ready</span>
        <span class="key new-starting">new, starting</span>
        <span class="key old">old</span>
        <span class="key available">available</span>
        <span class="key min">min available</span>
        <span class="key desired">desired</span>
      </div>
      <div class="rollout-text">
        <span data-count="desired">desired {bounds.replicas}</span>
        <span data-count="updated">updated {updated}</span>
        <span data-count="ready">ready {ready}</span>
        <span data-count="available">available {available}</span>
        {bounds.strategy === 'RollingUpdate' ? (
          <span class="fences">
            {minAvailable}–{bounds.replicas + bounds.maxSurge} pods (maxSurge {bounds.maxSurge}, maxUnavailable{' '}
            {bounds.maxUnavailable})
          </span>
        ) : (
          <span class="fences">Recreate</span>
        )}
      </div>
      {progressing && !done && (
        <div class={`condition${progressing.status === 'False' ? ' bad' : ''}`}>{progressing.reason}</div>
      )}
    </div>
  );
}

const ReplicaSetRow = memo(function ReplicaSetRow({ rs, newest }: { rs: KubeObject; newest: boolean }) {
  useTopics(`owner:${rs.metadata.uid}`);
  const pods = store.dependentsByName(rs.metadata.uid ?? '', 'Pod', MAX_PODS_SHOWN);
  const s = status<{ replicas: number; readyReplicas: number; availableReplicas: number }>(rs);
  const desired = (rs.spec as { replicas?: number } | undefined)?.replicas ?? 0;
  return (
    <div
      class={`rs${newest ? ' newest' : ''}${desired === 0 && pods.total === 0 ? ' idle' : ''}`}
      data-rs={rs.metadata.name}
    >
      <div class="rs-head">
        <span class="rev">rev {revisionOf(rs)}</span>
        <ObjectLink kind="ReplicaSet" obj={rs} />
        <span class="counts" data-desired={desired} data-ready={s.readyReplicas ?? 0}>
          {s.readyReplicas ?? 0}/{desired} ready
          {(s.replicas ?? 0) !== desired ? ` · ${s.replicas ?? 0} current` : ''}
        </span>
      </div>
      {pods.total > 0 && <PodRow pods={pods.first} total={pods.total} />}
    </div>
  );
});

const DeploymentCard = memo(function DeploymentCard({ deployment }: { deployment: KubeObject }) {
  useTopics(`owner:${deployment.metadata.uid}`);
  const sets = dependentsOf(deployment.metadata.uid, 'ReplicaSet').sort((a, b) => revisionOf(b) - revisionOf(a));
  const newest = sets[0];
  const rev = revisionOf(deployment);
  return (
    <article class="card" data-deployment={deployment.metadata.name}>
      <header>
        <span class="kind">Deployment</span>
        <ObjectLink kind="Deployment" obj={deployment} />
        <span class="ns">{deployment.metadata.namespace}</span>
        {rev > 0 && <span class="rev">rev {rev}</span>}
        <ScaleControl kind="Deployment" obj={deployment} />
      </header>
      <RolloutBar deployment={deployment} newRs={newest} />
      {sets.map((rs) => (
        <ReplicaSetRow key={rs.metadata.uid} rs={rs} newest={rs === newest} />
      ))}
    </article>
  );
});

function ordinalOf(name: string, prefix: string): number | undefined {
  if (!name.startsWith(`${prefix}-`)) return undefined;
  const n = Number(name.slice(prefix.length + 1));
  return Number.isInteger(n) && n >= 0 ? n : undefined;
}

const StatefulSetCard = memo(function StatefulSetCard({ sts }: { sts: KubeObject }) {
  useTopics(`owner:${sts.metadata.uid}`);
  const replicas = (sts.spec as { replicas?: number } | undefined)?.replicas ?? 1;
  const byOrdinal = new Map<number, KubeObject>();
  for (const pod of dependentsOf(sts.metadata.uid, 'Pod')) {
    const n = ordinalOf(pod.metadata.name, sts.metadata.name);
    if (n !== undefined) byOrdinal.set(n, pod);
  }
  const upTo = Math.max(replicas, ...[...byOrdinal.keys()].map((n) => n + 1));
  const s = status<{ readyReplicas: number; currentRevision: string; updateRevision: string }>(sts);
  return (
    <article class="card" data-statefulset={sts.metadata.name}>
      <header>
        <span class="kind">StatefulSet</span>
        <ObjectLink kind="StatefulSet" obj={sts} />
        <span class="ns">{sts.metadata.namespace}</span>
        <ScaleControl kind="StatefulSet" obj={sts} />
      </header>
      <div class="ordinals">
        {Array.from({ length: upTo }, (_, n) => {
          const pod = byOrdinal.get(n);
          return (
            <div key={n} class={`ordinal${n >= replicas ? ' surplus' : ''}`}>
              <span class="ordinal-n">{n}</span>
              {pod ? (
                <PodChip pod={pod} named={false} />
              ) : (
                <span class="pod missing" title={`${sts.metadata.name}-${n}: no pod`} />
              )}
            </div>
          );
        })}
      </div>
      <div class="rollout-text">
        <span>
          ready {s.readyReplicas ?? 0}/{replicas}
        </span>
        {s.updateRevision && s.currentRevision !== s.updateRevision && (
          <span>
            updating {s.currentRevision} → {s.updateRevision}
          </span>
        )}
      </div>
    </article>
  );
});

const DaemonSetCard = memo(function DaemonSetCard({ ds }: { ds: KubeObject }) {
  useTopics(`owner:${ds.metadata.uid}`, 'kind:Node');
  const byNode = new Map<string, KubeObject[]>();
  for (const pod of dependentsOf(ds.metadata.uid, 'Pod')) {
    const node = (pod.spec as { nodeName?: string } | undefined)?.nodeName ?? '';
    byNode.set(node, [...(byNode.get(node) ?? []), pod]);
  }
  const nodes = [...store.list('Node')]
    .map((n) => n.metadata.name)
    .sort(new Intl.Collator(undefined, { numeric: true }).compare);
  const s = status<{ desiredNumberScheduled: number; currentNumberScheduled: number; numberReady: number }>(ds);
  return (
    <article class="card" data-daemonset={ds.metadata.name}>
      <header>
        <span class="kind">DaemonSet</span>
        <ObjectLink kind="DaemonSet" obj={ds} />
        <span class="ns">{ds.metadata.namespace}</span>
      </header>
      <div class="per-node">
        {nodes.map((node) => (
          <div key={node} class="per-node-cell" title={node}>
            <span class="per-node-name">{node}</span>
            {(byNode.get(node) ?? []).map((pod) => (
              <PodChip key={pod.metadata.uid} pod={pod} named={false} />
            ))}
            {!byNode.has(node) && <span class="pod missing" title={`no ${ds.metadata.name} pod on ${node}`} />}
          </div>
        ))}
      </div>
      <div class="rollout-text">
        <span>desired {s.desiredNumberScheduled ?? 0}</span>
        <span>current {s.currentNumberScheduled ?? 0}</span>
        <span>ready {s.numberReady ?? 0}</span>
      </div>
    </article>
  );
});

function jobOutcome(job: KubeObject): 'Complete' | 'Failed' | 'Suspended' | 'Running' {
  if (condition(job, 'Complete')?.status === 'True') return 'Complete';
  if (condition(job, 'Failed')?.status === 'True') return 'Failed';
  if ((job.spec as { suspend?: boolean } | undefined)?.suspend) return 'Suspended';
  return 'Running';
}

const JobCard = memo(function JobCard({ job }: { job: KubeObject }) {
  useTopics(`owner:${job.metadata.uid}`);
  const spec = (job.spec ?? {}) as { completions?: number; parallelism?: number };
  const s = status<{ active: number; succeeded: number; failed: number }>(job);
  const completions = spec.completions ?? 1;
  const outcome = jobOutcome(job);
  const pods = store.dependentsByName(job.metadata.uid ?? '', 'Pod', MAX_PODS_SHOWN);
  const pct = (n: number) => `${Math.min(100, (n / Math.max(1, completions)) * 100)}%`;
  return (
    <article class="card" data-job={job.metadata.name}>
      <header>
        <span class="kind">Job</span>
        <ObjectLink kind="Job" obj={job} />
        <span class="ns">{job.metadata.namespace}</span>
        <span class={`badge ${outcome === 'Complete' ? 'good' : outcome === 'Failed' ? 'bad' : 'warn'}`}>
          {outcome}
        </span>
      </header>
      <div class="track thin">
        <span class="seg available" style={{ width: pct(s.succeeded ?? 0) }} />
        <span class="seg new-starting" style={{ width: pct(s.active ?? 0) }} />
      </div>
      <div class="rollout-text">
        <span>
          succeeded {s.succeeded ?? 0}/{completions}
        </span>
        <span>active {s.active ?? 0}</span>
        <span>failed {s.failed ?? 0}</span>
        <span>parallelism {spec.parallelism ?? 1}</span>
      </div>
      {pods.total > 0 && <PodRow pods={pods.first} total={pods.total} />}
    </article>
  );
});

const CronJobCard = memo(function CronJobCard({ cronJob }: { cronJob: KubeObject }) {
  useTopics(`owner:${cronJob.metadata.uid}`);
  const clock = useClock();
  const spec = (cronJob.spec ?? {}) as { schedule?: string; suspend?: boolean };
  const s = status<{ lastScheduleTime: string; lastSuccessfulTime: string }>(cronJob);
  const jobs = dependentsOf(cronJob.metadata.uid, 'Job').sort((a, b) =>
    (b.metadata.creationTimestamp ?? '') < (a.metadata.creationTimestamp ?? '') ? -1 : 1,
  );
  const now = clock.now();
  return (
    <article class="card" data-cronjob={cronJob.metadata.name}>
      <header>
        <span class="kind">CronJob</span>
        <ObjectLink kind="CronJob" obj={cronJob} />
        <span class="ns">{cronJob.metadata.namespace}</span>
        <code>{spec.schedule}</code>
        {spec.suspend && <span class="badge warn">suspended</span>}
      </header>
      <div class="rollout-text">
        <span>last scheduled {s.lastScheduleTime ? `${age(s.lastScheduleTime, now)} ago` : 'never'}</span>
        {s.lastSuccessfulTime && <span>last success {age(s.lastSuccessfulTime, now)} ago</span>}
      </div>
      <ol class="history">
        {jobs.map((job) => {
          const outcome = jobOutcome(job);
          return (
            <li key={job.metadata.uid}>
              <span class={`badge ${outcome === 'Complete' ? 'good' : outcome === 'Failed' ? 'bad' : 'warn'}`}>
                {outcome}
              </span>
              <ObjectLink kind="Job" obj={job} />
              <span class="age">{age(job.metadata.creationTimestamp, now)}</span>
            </li>
          );
        })}
        {jobs.length === 0 && <li class="empty">no Jobs kept</li>}
      </ol>
    </article>
  );
});

function sortedByKey(kind: Kind): KubeObject[] {
  return [...store.list(kind)].sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : 1));
}

function Section({ title, count, children }: { title: string; count: number; children: preact.ComponentChildren }) {
  if (count === 0) return null;
  return (
    <section class="workload-section">
      <h2>
        {title} <span class="count">{count}</span>
      </h2>
      {children}
    </section>
  );
}

function Deployments() {
  useTopics('kind:Deployment');
  const list = sortedByKey('Deployment');
  return (
    <Section title="Deployments" count={list.length}>
      {list.map((d) => (
        <DeploymentCard key={d.metadata.uid} deployment={d} />
      ))}
    </Section>
  );
}

function StatefulSets() {
  useTopics('kind:StatefulSet');
  const list = sortedByKey('StatefulSet');
  return (
    <Section title="StatefulSets" count={list.length}>
      {list.map((s) => (
        <StatefulSetCard key={s.metadata.uid} sts={s} />
      ))}
    </Section>
  );
}

function DaemonSets() {
  useTopics('kind:DaemonSet');
  const list = sortedByKey('DaemonSet');
  return (
    <Section title="DaemonSets" count={list.length}>
      {list.map((d) => (
        <DaemonSetCard key={d.metadata.uid} ds={d} />
      ))}
    </Section>
  );
}

function Jobs() {
  useTopics('kind:Job', 'kind:CronJob');
  // A CronJob's Jobs are shown in its history.
  const list = sortedByKey('Job').filter((j) => !j.metadata.ownerReferences?.some((r) => r.kind === 'CronJob'));
  const cronJobs = sortedByKey('CronJob');
  return (
    <>
      <Section title="CronJobs" count={cronJobs.length}>
        {cronJobs.map((c) => (
          <CronJobCard key={c.metadata.uid} cronJob={c} />
        ))}
      </Section>
      <Section title="Jobs" count={list.length}>
        {list.map((j) => (
          <JobCard key={j.metadata.uid} job={j} />
        ))}
      </Section>
    </>
  );
}

export function WorkloadsView() {
  useTopics('kind:Deployment', 'kind:StatefulSet', 'kind:DaemonSet', 'kind:Job', 'kind:CronJob');
  const none = ['Deployment', 'StatefulSet', 'DaemonSet', 'Job', 'CronJob'].every((k) => store.count(k as Kind) === 0);
  return (
    <div class="workloads">
      {none && <p class="empty">No workloads yet: kubectl create deployment web --image=nginx --replicas=3</p>}
      <Deployments />
      <StatefulSets />
      <DaemonSets />
      <Jobs />
    </div>
  );
}
