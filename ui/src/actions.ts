/**
 * What the buttons do, each through the public APIs as kubectl and curl would: /sim/v1 for the clock and node
 * faults, the Kubernetes API for cordon (a patch of spec.unschedulable), drain (cordon, then an Eviction per pod,
 * as `kubectl drain --ignore-daemonsets` does), pod deletion and scaling (the /scale subresource).
 */
import { ApiError, type Kind, type KubeObject, objectPath, RESOURCES, request } from './api.js';
import { type ClockState, clock } from './clock.js';
import { notify } from './notices.js';
import { controllerOf } from './store.js';

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Runs an action, reports its outcome as a notice, and never throws (a failed click is a message, not a crash). */
async function act(what: string, fn: () => Promise<string | undefined>): Promise<void> {
  try {
    const done = await fn();
    notify('ok', done ?? what);
  } catch (err) {
    notify('error', `${what}: ${message(err)}`);
  }
}

export function advance(by: string | 'next-timer'): Promise<void> {
  return act(by === 'next-timer' ? 'advanced to the next timer' : `advanced ${by}`, async () => {
    const body = by === 'next-timer' ? { to: 'next-timer' } : { by };
    const state = await request<ClockState>('/sim/v1/clock/advance', { method: 'POST', body });
    clock.take(state);
    return by === 'next-timer' ? `advanced to the next timer: ${state.now}` : `advanced ${by}: ${state.now}`;
  });
}

export function runClock(rate: number): Promise<void> {
  return act(`run the clock ×${rate}`, async () => {
    clock.take(await request<ClockState>('/sim/v1/clock/run', { method: 'POST', body: { rate } }));
    return `clock running ×${rate}`;
  });
}

export function pauseClock(): Promise<void> {
  return act('pause the clock', async () => {
    clock.take(await request<ClockState>('/sim/v1/clock/pause', { method: 'POST', body: {} }));
    return 'clock paused';
  });
}

export function nodeFault(node: string, action: 'fail' | 'recover'): Promise<void> {
  return act(`${action} ${node}`, async () => {
    await request(`/sim/v1/nodes/${encodeURIComponent(node)}/${action}`, { method: 'POST', body: {} });
    await clock.refresh();
    return action === 'fail' ? `${node}: kubelet stopped` : `${node}: kubelet running again`;
  });
}

function patchNode(node: string, unschedulable: boolean): Promise<unknown> {
  return request(objectPath(RESOURCES.Node, undefined, node), {
    method: 'PATCH',
    contentType: 'application/strategic-merge-patch+json',
    body: { spec: { unschedulable: unschedulable ? true : null } },
  });
}

export function cordon(node: string, on: boolean): Promise<void> {
  return act(`${on ? 'cordon' : 'uncordon'} ${node}`, async () => {
    await patchNode(node, on);
    return `${node} ${on ? 'cordoned' : 'uncordoned'}`;
  });
}

interface PodList {
  items: KubeObject[];
}

/** Cordons the node, then evicts its pods but DaemonSet and mirror pods, once each (PDBs may refuse some). */
export function drain(node: string): Promise<void> {
  return act(`drain ${node}`, async () => {
    await patchNode(node, true);
    const pods = await request<PodList>(`/api/v1/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${node}`)}`);
    const evictable = pods.items.filter(
      (pod) =>
        controllerOf(pod)?.kind !== 'DaemonSet' &&
        !pod.metadata.annotations?.['kubernetes.io/config.mirror'] &&
        !pod.metadata.deletionTimestamp,
    );
    const refused: string[] = [];
    await Promise.all(
      evictable.map(async (pod) => {
        const { name, namespace } = pod.metadata;
        try {
          await request(objectPath(RESOURCES.Pod, namespace, name, 'eviction'), {
            method: 'POST',
            body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace } },
          });
        } catch (err) {
          if (!(err instanceof ApiError && err.status === 404)) refused.push(`${name}: ${message(err)}`);
        }
      }),
    );
    const evicted = evictable.length - refused.length;
    return `${node} cordoned; ${evicted} pod${evicted === 1 ? '' : 's'} evicted${refused.length ? `; refused: ${refused.join('; ')}` : ''}`;
  });
}

export function deletePod(namespace: string, name: string): Promise<void> {
  return act(`delete pod ${name}`, async () => {
    await request(objectPath(RESOURCES.Pod, namespace, name), { method: 'DELETE' });
    return `pod ${name} deleted`;
  });
}

export function scale(kind: Kind, namespace: string, name: string, replicas: number): Promise<void> {
  return act(`scale ${kind} ${name}`, async () => {
    await request(objectPath(RESOURCES[kind], namespace, name, 'scale'), {
      method: 'PATCH',
      contentType: 'application/merge-patch+json',
      body: { spec: { replicas } },
    });
    return `${kind} ${name} scaled to ${replicas}`;
  });
}
