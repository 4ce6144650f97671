import type { LogLine, LogSource } from '../api/kubelet-connector.js';

/**
 * Container logs, as the container runtime keeps them: one file per container instance (the restart count
 * it started with), written by the kubelet's lifecycle actions, read by pods/log, followed until the instance
 * ends. Memory only; a pod's logs go when the pod does, and as with the kubelet only a container's current and
 * previous instances are kept (pods/log asks for no other).
 *
 * Kept compactly, since a dense cluster holds one record per pod: most pods have one container that never
 * restarted and wrote one line (the kubelet's actions make that line once per container spec, so the pods of a
 * template hold one copy of it).
 */
interface Follower {
  onLine(line: LogLine): void;
  end(): void;
}

class Instance implements LogSource {
  /** One line, or several (a Map and an array of a pod's lines each cost more than the line itself). */
  private kept?: LogLine | LogLine[];
  ended = false;
  /** Made on the first `logs -f`: most instances are never followed, and every pod of a dense cluster would hold an empty Set. */
  private followers?: Set<Follower>;

  constructor(
    readonly container: string,
    readonly index: number,
  ) {}

  lines(): LogLine[] {
    const kept = this.kept;
    return kept === undefined ? [] : Array.isArray(kept) ? kept : [kept];
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
    const kept = this.kept;
    if (kept === undefined) this.kept = line;
    else if (Array.isArray(kept)) kept.push(line);
    else this.kept = [kept, line];
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
  /** Per pod uid: its one instance, or its containers' instances in the order they started. */
  private readonly pods = new Map<string, Instance | Instance[]>();

  private all(uid: string): readonly Instance[] {
    const held = this.pods.get(uid);
    return held === undefined ? [] : Array.isArray(held) ? held : [held];
  }

  /** The container's latest instance. */
  private current(uid: string, container: string): Instance | undefined {
    const all = this.all(uid);
    for (let i = all.length - 1; i >= 0; i--) if (all[i]!.container === container) return all[i];
    return undefined;
  }

  private add(uid: string, instance: Instance, keep: (i: Instance) => boolean): void {
    const kept = this.all(uid).filter(keep);
    this.pods.set(uid, kept.length === 0 ? instance : [...kept, instance]);
  }

  /** Starts the log of a new container instance; an older one still open ends, and older than the previous go. */
  start(uid: string, container: string, index: number): void {
    this.current(uid, container)?.finish();
    this.add(uid, new Instance(container, index), (i) => i.container !== container || i.index >= index - 1);
  }

  write(uid: string, container: string, at: number, text: string): void {
    let current = this.current(uid, container);
    if (!current) this.add(uid, (current = new Instance(container, 0)), () => true);
    current.write({ at, text });
  }

  end(uid: string, container: string): void {
    this.current(uid, container)?.finish();
  }

  /** The instance that ran with this restart count (the latest, if a stage file started one twice). */
  source(uid: string, container: string, index: number): LogSource {
    const all = this.all(uid);
    for (let i = all.length - 1; i >= 0; i--)
      if (all[i]!.container === container && all[i]!.index === index) return all[i]!;
    return EMPTY;
  }

  /** Forgets a pod's logs; followers see their streams end. */
  remove(uid: string): void {
    for (const i of this.all(uid)) i.finish();
    this.pods.delete(uid);
  }
}
