/** What the user is looking at: the object in the inspector and the events feed's filter (view state only). */
import type { Kind } from './api.js';

export interface Selected {
  kind: Kind;
  key: string;
}

let selected: Selected | undefined;
let eventFilter = '';
const listeners = new Set<() => void>();

export function select(kind: Kind, key: string): void {
  selected = { kind, key };
  tell();
}

export function clearSelection(): void {
  selected = undefined;
  tell();
}

export function selection(): Selected | undefined {
  return selected;
}

export function filterEvents(text: string): void {
  eventFilter = text;
  tell();
}

export function eventsFilter(): string {
  return eventFilter;
}

export function onSelection(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function tell(): void {
  for (const listener of listeners) listener();
}
