// Bundles the compiled CLI (dist/src/cli/main.js and everything it imports, npm packages included) into
// dist/src/bundle/, which bin/sim.js starts when it is newer than the last `tsc` build. Node's module loader
// spends most of start-up linking and compiling ~300 separate files; a bundle is a few. The lazily loaded parts
// (serve, replay, the exec shell, CEL…) stay separate chunks, loaded when used. Also writes the shipped YAML files'
// JSON twins (src/kubelet/shipped-yaml.ts) and the precompiled scenario validator. Run by `npm run build`,
// `npm install` (prepare) and `npm test`, after tsc.
import { rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import standaloneCode from 'ajv/dist/standalone/index.js';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
// At dist/src/bundle/, the same depth as dist/src/<layer>/, so the paths the modules find their data by
// (`new URL('../../../fixtures/…', import.meta.url)`) resolve alike from a chunk.
const outdir = `${root}dist/src/bundle`;
await rm(outdir, { recursive: true, force: true });
await build({
  absWorkingDir: root,
  entryPoints: ['dist/src/cli/main.js'],
  bundle: true,
  splitting: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  outdir,
  logLevel: 'warning',
  // web-tree-sitter finds its .wasm beside its own file, which a bundled copy is not, and etcd3 its .proto files;
  // undici, imported only by the HTTP client, keeps its named exports when Node loads it itself.
  external: ['web-tree-sitter', 'tree-sitter-bash', 'undici', 'etcd3'],
  // The CommonJS packages (fastify…) call require(), which an ES module has only when it makes one.
  banner: {
    js: "import { createRequire as __simCreateRequire } from 'node:module';\nconst require = __simCreateRequire(import.meta.url);",
  },
});

const { writeShippedTwins } = await import(`${root}dist/src/kubelet/shipped-yaml.js`);
await writeShippedTwins();

// The scenario validator compiled ahead of time (ajv's standalone code), which `sim replay` loads instead of
// compiling the schema at every start; it carries the schema it was made from, and is used only while that is
// still the schema (src/scenario/schema.ts).
const { scenarioSchema, SCENARIO_AJV_OPTIONS, PRECOMPILED_VALIDATOR } = await import(
  new URL('../dist/src/scenario/schema.js', import.meta.url).href
);
const ajv = new Ajv({ ...SCENARIO_AJV_OPTIONS, code: { source: true } });
const validatorCode = standaloneCode.default(ajv, ajv.compile(scenarioSchema));
await writeFile(
  PRECOMPILED_VALIDATOR,
  `${validatorCode}\nmodule.exports.schemaJson = ${JSON.stringify(JSON.stringify(scenarioSchema))};\n`,
);
