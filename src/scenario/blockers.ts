import { isPlainObject, type KubeObject } from '../api/types.js';
import { podState, selectLive, type EvalContext } from './conditions.js';
import type { Selector, WaitForStep } from './types.js';

/** Kinds whose waits are waits for their pods. */
const POD_OWNERS = new Set(['Deployment', 'ReplicaSet', 'StatefulSet', 'DaemonSet', 'Job', 'ReplicationController']);
const SHOWN = 5;

interface ContainerStatus {
  name?: string;
  state?: { waiting?: { reason?: string; message?: string }; terminated?: { reason?: string; exitCode?: number } };
}

/** Why one pod is not (yet) Ready, as `kubectl describe` would show it: its containers' waiting reasons. */
function containerReasons(pod: KubeObject): string[] {
  const status = isPlainObject(pod.status) ? pod.status : {};
  const statuses = [
    ...((status.initContainerStatuses as ContainerStatus[] | undefined) ?? []),
    ...((status.containerStatuses as ContainerStatus[] | undefined) ?? []),
  ];
  const out: string[] = [];
  for (const c of statuses) {
    const waiting = c.state?.waiting;
    const terminated = c.state?.terminated;
    if (waiting?.reason) out.push(`${c.name}: ${waiting.reason}${waiting.message ? ` (${waiting.message})` : ''}`);
    else if (terminated)
      out.push(`${c.name}: ${terminated.reason ?? 'Terminated'} (exit ${terminated.exitCode ?? '?'})`);
  }
  const scheduled = (status.conditions as Array<{ type?: string; status?: string; reason?: string; message?: string }>)
    ?.filter((c) => c.type === 'PodScheduled' && c.status === 'False')
    .map((c) => `${c.reason ?? 'Unschedulable'}: ${c.message ?? ''}`.trim());
  return [...(scheduled ?? []), ...out];
}

const eventTime = (e: KubeObject): string =>
  String(
    (e as { lastTimestamp?: string }).lastTimestamp ??
      (e as { eventTime?: string }).eventTime ??
      e.metadata.creationTimestamp ??
      '',
  );

/**
 * Why a waitFor on pods (or on an object that owns pods) has not come true: the pods that are not Ready, each with
 * its containers' waiting reasons and its last event (`FailedScheduling: 0/3 nodes are available: 3 Insufficient
 * cpu`). Empty when the wait is not about pods or every pod is Ready.
 */
export async function blockingPods(ctx: EvalContext, w: WaitForStep): Promise<string[]> {
  let selector: Selector | undefined;
  if ('count' in w && /^(pods?|po)$/i.test(w.count.kind)) {
    const { where: _where, ...rest } = w.count;
    selector = { ...rest, kind: 'Pod' };
  } else if ('object' in w) {
    const resource = ctx.resources.resolve(w.object.kind, w.object.apiVersion);
    if (resource.kind === 'Pod') selector = { kind: 'Pod', name: w.object.name, namespace: w.object.namespace };
    else if (POD_OWNERS.has(resource.kind))
      selector = { kind: 'Pod', owner: `${resource.kind}/${w.object.name}`, namespace: w.object.namespace };
  }
  if (!selector) return [];
  const { items } = await selectLive(ctx, selector);
  const blocked = items.filter((p) => podState(p) !== 'Ready' && podState(p) !== 'Succeeded');
  if (blocked.length === 0) return [];
  const events = await ctx.target.client.list(ctx.resources.resolve('events').gvr, blocked[0]!.metadata.namespace);
  const last = new Map<string, KubeObject>();
  for (const e of events.items) {
    const uid = (e as { involvedObject?: { uid?: string } }).involvedObject?.uid;
    if (!uid) continue;
    const seen = last.get(uid);
    if (!seen || eventTime(e) >= eventTime(seen)) last.set(uid, e);
  }
  const lines = blocked.slice(0, SHOWN).map((pod) => {
    const event = last.get(pod.metadata.uid ?? '') as { type?: string; reason?: string; message?: string } | undefined;
    // The scheduler's condition and its event say the same: the message once, with the event.
    const reasons = containerReasons(pod).map((r) =>
      event?.message && r.endsWith(`: ${event.message}`) ? r.slice(0, -event.message.length - 2) : r,
    );
    const parts = [`${pod.metadata.name} (${podState(pod)})`];
    if (reasons.length > 0) parts.push(reasons.join('; '));
    if (event) parts.push(`last event ${event.type ?? 'Normal'} ${event.reason}: ${event.message ?? ''}`.trimEnd());
    return parts.join(' — ');
  });
  if (blocked.length > SHOWN) lines.push(`… and ${blocked.length - SHOWN} more pod(s) not Ready`);
  return lines;
}
