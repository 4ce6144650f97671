import { flattenString } from '../storage/compact.js';
import type { LogLine, LogSource } from './connector.js';

/**
 * Container logs, as the container runtime keeps them: one file per container instance (the restart count
 * it started with), written by the kubelet's lifecycle actions, read by pods/log, followed until the instance
 * ends. Memory only; a pod's logs go when the pod does.
 */
interface Follower {
  onLine(line: LogLine): void;
  end(): void;
}

class Instance implements LogSource {
  readonly entries: LogLine[] = [];
  ended = false;
  /** Made on the first `logs -f`: most instances are never followed, and 150,000 pods would hold as many empty Sets. */
  private followers?: Set<Follower>;

  lines(): LogLine[] {
    return this.entries;
  }

  get follow(): LogSource['follow'] {
    if (this.ended) return undefined;
    return (onLine, end) => {
      const f: Follower = { onLine, end };
      (this.followers ??= new Set()).add(f);
      return () => this.followers?.delete(f);
    };
  }

  write(line: LogLine): void {
    // Lines are kept as long as the pod: one flat string each, not the rope their template built.
    flattenString(line.text);
    this.entries.push(line);
    if (this.followers) for (const f of this.followers) f.onLine(line);
  }

  finish(): void {
    if (this.ended) return;
    this.ended = true;
    if (!this.followers) return;
    for (const f of [...this.followers]) f.end();
    this.followers = undefined;
  }
}

/** An instance that never had lines (a container whose logs were lost with a restart of the server). */
const EMPTY: LogSource = { lines: () => [] };

export class LogStore {
  private readonly pods = new Map<string, Map<string, Instance[]>>();

  private instances(uid: string, container: string): Instance[] {
    let containers = this.pods.get(uid);
    if (!containers) this.pods.set(uid, (containers = new Map()));
    let list = containers.get(container);
    if (!list) containers.set(container, (list = []));
    return list;
  }

  /** Starts the log of a new container instance; an older one still open ends. */
  start(uid: string, container: string, index: number): void {
    const list = this.instances(uid, container);
    for (const open of list) if (open) open.finish();
    list[index] = new Instance();
  }

  write(uid: string, container: string, at: number, text: string): void {
    const list = this.instances(uid, container);
    let current = list[list.length - 1];
    if (!current) list.push((current = new Instance()));
    current.write({ at, text });
  }

  end(uid: string, container: string): void {
    const list = this.pods.get(uid)?.get(container);
    list?.[list.length - 1]?.finish();
  }

  /** The instance that ran with this restart count. */
  source(uid: string, container: string, index: number): LogSource {
    return this.pods.get(uid)?.get(container)?.[index] ?? EMPTY;
  }

  /** Forgets a pod's logs; followers see their streams end. */
  remove(uid: string): void {
    const containers = this.pods.get(uid);
    if (!containers) return;
    for (const list of containers.values()) for (const i of list) i?.finish();
    this.pods.delete(uid);
  }
}
