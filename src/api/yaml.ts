import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';

let loaded: typeof Yaml | undefined;

/**
 * The yaml package, loaded on first use: a plain `sim serve` start parses and writes no YAML (the shipped files
 * are read from their JSON twins, src/kubelet/shipped-yaml.ts), and loading the package took ~20 ms of it.
 */
export function yaml(): typeof Yaml {
  loaded ??= createRequire(import.meta.url)('yaml') as typeof Yaml;
  return loaded;
}
