/**
 * Loaded with `node --import` into a process under test: records every module it loads, ES imports (through a
 * resolve hook, which runs on the loader's thread) and CommonJS requires alike, and writes them one a line to the
 * file named in KUBE_SIM_RECORD_IMPORTS when the process exits.
 */
import { writeFileSync } from 'node:fs';
import Module, { register } from 'node:module';
import { MessageChannel } from 'node:worker_threads';

const seen = new Set<string>();
const { port1, port2 } = new MessageChannel();
port1.on('message', (url: string) => seen.add(url));
port1.unref();
register('./record-imports-hooks.js', { parentURL: import.meta.url, data: { port: port2 }, transferList: [port2] });

type Load = (request: string, parent: unknown, isMain: boolean) => unknown;
const internals = Module as unknown as { _load: Load };
const load = internals._load;
internals._load = function (this: unknown, request, parent, isMain) {
  seen.add(`require:${request}`);
  return load.call(this, request, parent, isMain);
};

process.once('exit', () => {
  const file = process.env.KUBE_SIM_RECORD_IMPORTS;
  if (file) writeFileSync(file, [...seen].join('\n'));
});
