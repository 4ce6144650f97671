import type { Api, Obj } from './http.js';

/**
 * Plays the kubelet for controller tests that run without simulated nodes: writes the pod status a kubelet
 * would (phase, Ready/ContainersReady conditions, container states) through /status, on cluster time.
 */
export class FakeKubelet {
  constructor(
    private readonly api: Api,
    readonly namespace = 'default',
  ) {}

  async now(): Promise<string> {
    return (await this.api.expect<{ now: string }>(200, '/sim/v1/clock')).now;
  }

  /** Moves the virtual clock (and lets the controllers finish what is due); "0s" just settles. */
  async advance(by: string): Promise<string> {
    return (await this.api.expect<{ now: string }>(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } })).now;
  }

  pods(selector: string): Promise<Obj[]> {
    return this.api
      .list(`/api/v1/namespaces/${this.namespace}/pods?labelSelector=${encodeURIComponent(selector)}`)
      .then((l) => l.items);
  }

  private async patchStatus(name: string, status: Record<string, unknown>): Promise<void> {
    const reply = await this.api.request(`/api/v1/namespaces/${this.namespace}/pods/${name}/status`, {
      method: 'PATCH',
      body: { status },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    if (reply.status !== 200 && reply.status !== 404)
      throw new Error(`patching ${name}/status: ${reply.status} ${reply.text}`);
  }

  private containers(pod: Obj): string[] {
    return ((pod.spec as { containers?: Array<{ name: string }> }).containers ?? []).map((c) => c.name);
  }

  /** The pod, or undefined when it is gone (a controller may delete it meanwhile). */
  private async pod(name: string): Promise<Obj | undefined> {
    const reply = await this.api.request<Obj>(`/api/v1/namespaces/${this.namespace}/pods/${name}`);
    return reply.status === 404 ? undefined : reply.body;
  }

  /** Finishes the graceful deletion of every terminating pod matching the selector, as a kubelet does once containers stop. */
  async reap(selector: string): Promise<void> {
    for (const pod of await this.pods(selector)) {
      if (!pod.metadata.deletionTimestamp) continue;
      await this.api.request(`/api/v1/namespaces/${this.namespace}/pods/${pod.metadata.name}`, {
        method: 'DELETE',
        body: { gracePeriodSeconds: 0 },
      });
    }
  }

  /** Running and Ready (or Running and not ready). */
  async run(name: string, ready = true): Promise<void> {
    const pod = await this.pod(name);
    if (!pod) return;
    const at = await this.now();
    const flag = ready ? 'True' : 'False';
    await this.patchStatus(name, {
      phase: 'Running',
      startTime: at,
      conditions: [
        { type: 'PodReadyToStartContainers', status: 'True', lastTransitionTime: at },
        { type: 'Initialized', status: 'True', lastTransitionTime: at },
        { type: 'Ready', status: flag, lastTransitionTime: at },
        { type: 'ContainersReady', status: flag, lastTransitionTime: at },
        { type: 'PodScheduled', status: 'True', lastTransitionTime: at },
      ],
      containerStatuses: this.containers(pod).map((c) => ({
        name: c,
        image: 'img',
        imageID: '',
        ready,
        started: true,
        restartCount: 0,
        state: { running: { startedAt: at } },
      })),
    });
  }

  /** The containers exit with this code: Succeeded for 0, Failed otherwise. */
  async finish(name: string, exitCode = 0): Promise<void> {
    const pod = await this.pod(name);
    if (!pod) return;
    const at = await this.now();
    await this.patchStatus(name, {
      phase: exitCode === 0 ? 'Succeeded' : 'Failed',
      conditions: [
        { type: 'Ready', status: 'False', lastTransitionTime: at, reason: 'PodCompleted' },
        { type: 'ContainersReady', status: 'False', lastTransitionTime: at, reason: 'PodCompleted' },
        { type: 'PodScheduled', status: 'True', lastTransitionTime: at },
      ],
      containerStatuses: this.containers(pod).map((c) => ({
        name: c,
        image: 'img',
        imageID: '',
        ready: false,
        started: false,
        restartCount: 0,
        state: {
          terminated: { exitCode, reason: exitCode === 0 ? 'Completed' : 'Error', startedAt: at, finishedAt: at },
        },
      })),
    });
  }
}
