// Bundles the live view (ui/: preact, the yaml library and the page's own code) into dist/ui/, which `sim serve`
// serves at /sim/ui/. Run by `npm run build`, `npm install` (prepare) and `npm test`; nothing is fetched at run time.
import { copyFile, mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const outdir = `${root}dist/ui`;
await mkdir(outdir, { recursive: true });
await build({
  absWorkingDir: root,
  entryPoints: ['ui/src/main.tsx'],
  bundle: true,
  format: 'esm',
  // Browsers from 2023 on: what Debian's chromium and every current browser run.
  target: ['chrome110', 'firefox115', 'safari16'],
  minify: true,
  sourcemap: true,
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir,
  logLevel: 'warning',
  legalComments: 'linked',
});
await copyFile(`${root}ui/index.html`, `${outdir}/index.html`);
