/** Short messages about what an action did (or why it failed), shown for a few seconds. */
export interface Notice {
  id: number;
  level: 'ok' | 'error';
  text: string;
}

let next = 1;
let notices: Notice[] = [];
const listeners = new Set<() => void>();

const SHOWN_MS = { ok: 3000, error: 10_000 };

export function notify(level: Notice['level'], text: string): void {
  const notice = { id: next++, level, text };
  notices = [...notices.slice(-2), notice];
  tell();
  setTimeout(() => dismiss(notice.id), SHOWN_MS[level]);
}

export function dismiss(id: number): void {
  notices = notices.filter((n) => n.id !== id);
  tell();
}

export function currentNotices(): Notice[] {
  return notices;
}

export function onNotices(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function tell(): void {
  for (const listener of listeners) listener();
}
