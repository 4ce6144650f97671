/** The resolve hook of record-imports.ts: posts each module's resolved URL (and the bare name it was asked by). */
import type { MessagePort } from 'node:worker_threads';

let port: MessagePort | undefined;

export function initialize(data: { port: MessagePort }): void {
  port = data.port;
}

type Resolved = { url: string };
export async function resolve(
  specifier: string,
  context: unknown,
  next: (specifier: string, context: unknown) => Promise<Resolved>,
): Promise<Resolved> {
  const resolved = await next(specifier, context);
  port?.postMessage(resolved.url);
  if (!specifier.startsWith('.') && !specifier.startsWith('node:') && !specifier.startsWith('file:'))
    port?.postMessage(`import:${specifier}`);
  return resolved;
}
