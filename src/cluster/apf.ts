import { rfc3339 } from '../clock/clock.js';
import { raceTolerant } from '../api/errors.js';
import { allOf, settle, type MaybePromise } from '../api/maybe-async.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import {
  bootstrapFlowSchemas,
  bootstrapPriorityLevels,
  danglingCondition,
  FLOW_SCHEMAS,
  flowSchemas,
  PRIORITY_LEVELS,
  priorityLevelConfigurations,
} from '../registry/builtin/flowcontrol.js';
import type { GenericStore } from '../registry/generic-store.js';

/**
 * What kube-apiserver's API Priority and Fairness configuration controller does that a client sees: the bootstrap
 * FlowSchemas and PriorityLevelConfigurations made on start where missing, and each FlowSchema's Dangling
 * condition kept true to whether the priority level it names exists. The objects are a handful, written rarely: a
 * change to either table looks at every FlowSchema.
 */
export class FlowControlConfig {
  private pending = false;

  constructor(private readonly api: GenericStore) {
    api.store.onChange((key) => {
      if (key === FLOW_SCHEMAS || key === PRIORITY_LEVELS) this.schedule();
    });
  }

  bootstrap(): MaybePromise<void> {
    const writes: unknown[] = [];
    for (const level of bootstrapPriorityLevels)
      writes.push(this.ensure(priorityLevelConfigurations, PRIORITY_LEVELS, level));
    for (const schema of bootstrapFlowSchemas) writes.push(this.ensure(flowSchemas, FLOW_SCHEMAS, schema));
    return allOf(writes);
  }

  private ensure(info: typeof flowSchemas, table: string, body: Record<string, unknown>): unknown {
    const name = (body.metadata as { name: string }).name;
    if (this.api.store.get(table, undefined, name)) return;
    return raceTolerant(() => this.api.create(info, undefined, body, { internal: true }));
  }

  private schedule(): void {
    if (this.pending) return;
    this.pending = true;
    queueMicrotask(() => {
      this.pending = false;
      this.syncDangling();
    });
  }

  private syncDangling(): void {
    const now = rfc3339(this.api.ctx.clock.now());
    for (const schema of this.api.store.all(FLOW_SCHEMAS)) {
      const level = (schema.spec as { priorityLevelConfiguration?: { name?: string } } | undefined)
        ?.priorityLevelConfiguration?.name;
      const exists = level !== undefined && this.api.store.get(PRIORITY_LEVELS, undefined, level) !== undefined;
      const current = conditions(schema).find((c) => c.type === 'Dangling');
      const wanted = danglingCondition(schema, exists, now);
      if (current && current.status === wanted.status && current.message === wanted.message) continue;
      const status = {
        ...(isPlainObject(schema.status) ? schema.status : {}),
        conditions: [...conditions(schema).filter((c) => c.type !== 'Dangling'), wanted],
      };
      // Changed or gone meanwhile: that change brings us back here.
      settle(
        raceTolerant(() =>
          this.api.update(
            flowSchemas,
            undefined,
            schema.metadata.name!,
            { ...schema, status },
            { subresource: 'status', internal: true },
          ),
        ),
        () => undefined,
      );
    }
  }
}

function conditions(schema: KubeObject): Array<Record<string, unknown>> {
  const status = isPlainObject(schema.status) ? schema.status : {};
  return Array.isArray(status.conditions) ? (status.conditions as Array<Record<string, unknown>>) : [];
}
