import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { yaml } from '../api/yaml.js';
import { isPlainObject } from '../api/types.js';
import { parseDuration } from '../clock/clock.js';
import { normalizeImage, repositoryOf } from './image-ref.js';
import { shippedDocuments } from './shipped-yaml.js';

/**
 * The image catalog (fixtures/images.yaml): what kube-sim knows of images, as data. Which references no registry
 * has (their pulls fail), what an image runs when the pod gives no command (ENTRYPOINT and CMD), whether it serves
 * until it is stopped, and how long a container takes to exit after SIGTERM. The kubelet's actions read it through
 * their context; the file says what each field means.
 */
export interface ImageInfo {
  /** Repository patterns as written in the file (`nginx`, `gcr.io/google-samples/*`). */
  images: string[];
  entrypoint?: string[];
  cmd?: string[];
  /** Runs until stopped when its command is not one the exec shell can run. */
  serves: boolean;
  /** Its own stop delay, instead of the catalog's. */
  stopDelayMs?: number;
  /** What it answers on the ports its containers declare (http-app.ts). */
  http?: ImageHttp;
}

/** An HTTP answer of a simulated app: its body may use ${name}, ${port}, … and the container's $(VAR). */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** What an image's server answers: per path, and for every other path. */
export interface ImageHttp {
  paths?: Record<string, HttpAnswer>;
  otherwise: HttpAnswer;
}

export interface ImageCatalog {
  /** How long a container that exits promptly on SIGTERM takes to exit. */
  stopDelayMs: number;
  /** Reference patterns whose pulls fail. */
  missing: string[];
  images: ImageInfo[];
}

/** A pattern with `*` as a regular expression matching the whole text. */
function globRegExp(pattern: string): RegExp {
  return new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`);
}

/** How a reference is named for matching: as written and as containerd names it, with and without its tag. */
interface ReferenceForms {
  references: [string, string];
  repositories: [string, string];
}

function formsOf(image: string): ReferenceForms {
  const normalized = normalizeImage(image);
  return {
    references: [image, normalized],
    repositories: [repositoryOf(image), repositoryOf(normalized)],
  };
}

/** A pattern names a whole reference when it has a tag or digest (`nginx:1.161`), else a repository (`nginx`). */
function namesTag(pattern: string): boolean {
  return pattern.includes('@') || pattern.slice(pattern.lastIndexOf('/') + 1).includes(':');
}

/** Whether a reference matches a pattern: a glob against every form, else the pattern normalized as the reference is. */
function matches(pattern: string, forms: ReferenceForms): boolean {
  if (pattern.includes('*')) {
    const re = globRegExp(pattern);
    return forms.references.some((f) => re.test(f)) || forms.repositories.some((f) => re.test(f));
  }
  const tagged = namesTag(pattern);
  const against = tagged ? forms.references : forms.repositories;
  return (
    against.includes(pattern) ||
    against.includes(tagged ? normalizeImage(pattern) : repositoryOf(normalizeImage(pattern)))
  );
}

/** The catalog with its lookups made fast: most pods of a cluster share a handful of images. */
export class Images {
  private readonly byImage = new Map<string, ImageInfo | null>();
  private readonly missingByImage = new Map<string, boolean>();

  constructor(readonly catalog: ImageCatalog) {}

  /** What the catalog knows of the image, if anything. */
  lookup(image: string): ImageInfo | undefined {
    let info = this.byImage.get(image);
    if (info === undefined) {
      const forms = formsOf(image);
      info = this.catalog.images.find((entry) => entry.images.some((p) => matches(p, forms))) ?? null;
      if (this.byImage.size > 4096) this.byImage.clear();
      this.byImage.set(image, info);
    }
    return info ?? undefined;
  }

  /** Whether no registry has the image: the catalog's list, or one of `extra` (the flag's, a node's or a pod's). */
  missing(image: string, extra: readonly string[] = []): boolean {
    let known = this.missingByImage.get(image);
    if (known === undefined) {
      const forms = formsOf(image);
      known = this.catalog.missing.some((p) => matches(p, forms));
      if (this.missingByImage.size > 4096) this.missingByImage.clear();
      this.missingByImage.set(image, known);
    }
    if (known || extra.length === 0) return known;
    const forms = formsOf(image);
    return extra.some((p) => matches(p, forms));
  }

  /** How long the image's container takes to exit after SIGTERM, when it exits on it. */
  stopDelayMs(image: string): number {
    return this.lookup(image)?.stopDelayMs ?? this.catalog.stopDelayMs;
  }
}

/** A list of image references: comma- or newline-separated, `#` comments (a --missing-images file or value, an annotation). */
export function parseImageList(text: string): string[] {
  return text
    .split('\n')
    .map((line) => line.replace(/#.*$/, ''))
    .flatMap((line) => line.split(','))
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

function fail(where: string, message: string): never {
  throw new Error(`${where}: ${message}`);
}

function stringList(value: unknown, where: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) fail(where, 'must be a list of strings');
  return value as string[];
}

function duration(value: unknown, where: string): number {
  try {
    return typeof value === 'number' ? value * 1000 : parseDuration(String(value));
  } catch {
    return fail(where, `${JSON.stringify(value)} is not a duration ("1s", "500ms")`);
  }
}

function httpAnswer(value: unknown, where: string, headers: Record<string, string>): HttpAnswer {
  if (!isPlainObject(value)) fail(where, 'must be an object');
  const status = value.status ?? 200;
  if (!Number.isInteger(status) || (status as number) < 100 || (status as number) > 999)
    fail(`${where}.status`, 'must be an HTTP status code');
  if (typeof value.body !== 'string') fail(`${where}.body`, 'must be a string');
  const own = value.headers ?? {};
  if (!isPlainObject(own) || !Object.values(own).every((v) => typeof v === 'string'))
    fail(`${where}.headers`, 'must map header names to strings');
  return { status: status as number, headers: { ...headers, ...(own as Record<string, string>) }, body: value.body };
}

/** An entry's `http`: `headers` sent with every answer, `paths` answered as listed, `otherwise` for the rest. */
function imageHttp(value: unknown, where: string): ImageHttp {
  if (!isPlainObject(value)) fail(where, 'must be an object');
  const headers = value.headers ?? {};
  if (!isPlainObject(headers) || !Object.values(headers).every((v) => typeof v === 'string'))
    fail(`${where}.headers`, 'must map header names to strings');
  const common = headers as Record<string, string>;
  const http: ImageHttp = { otherwise: httpAnswer(value.otherwise, `${where}.otherwise`, common) };
  if (value.paths !== undefined) {
    if (!isPlainObject(value.paths)) fail(`${where}.paths`, 'must map paths to answers');
    http.paths = Object.fromEntries(
      Object.entries(value.paths).map(([path, answer]) => [
        path,
        httpAnswer(answer, `${where}.paths["${path}"]`, common),
      ]),
    );
  }
  return http;
}

/** Parses an image catalog (YAML of kind ImageCatalog). */
export function parseImageCatalog(text: string, source = 'images'): ImageCatalog {
  let doc: unknown;
  try {
    doc = yaml().parse(text);
  } catch (err) {
    fail(source, (err as Error).message);
  }
  return imageCatalogOf(doc, source);
}

/** An image catalog's document, parsed. */
function imageCatalogOf(doc: unknown, source: string): ImageCatalog {
  if (!isPlainObject(doc) || doc.kind !== 'ImageCatalog') fail(source, 'kind must be ImageCatalog');
  const images = (
    Array.isArray(doc.images) ? doc.images : doc.images === undefined ? [] : fail(source, 'images must be a list')
  ).map((raw, i): ImageInfo => {
    const where = `${source}: images[${i}]`;
    if (!isPlainObject(raw)) fail(where, 'must be an object');
    const names = stringList(raw.images, `${where}.images`);
    if (names.length === 0) fail(where, 'images must name at least one repository');
    const info: ImageInfo = { images: names, serves: raw.serves === true };
    if (raw.entrypoint !== undefined) info.entrypoint = stringList(raw.entrypoint, `${where}.entrypoint`);
    if (raw.cmd !== undefined) info.cmd = stringList(raw.cmd, `${where}.cmd`);
    if (raw.stopDelay !== undefined) info.stopDelayMs = duration(raw.stopDelay, `${where}.stopDelay`);
    if (raw.http !== undefined) info.http = imageHttp(raw.http, `${where}.http`);
    return info;
  });
  return {
    stopDelayMs: doc.stopDelay === undefined ? 1000 : duration(doc.stopDelay, `${source}: stopDelay`),
    missing: stringList(doc.missing, `${source}: missing`),
    images,
  };
}

export function loadImageCatalog(path: string): ImageCatalog {
  return parseImageCatalog(readFileSync(path, 'utf8'), path);
}

/** fixtures/images.yaml: the catalog kube-sim ships. */
export const DEFAULT_IMAGES_PATH = fileURLToPath(new URL('../../../fixtures/images.yaml', import.meta.url));

let defaults: ImageCatalog | undefined;
export function defaultImageCatalog(): ImageCatalog {
  if (defaults) return defaults;
  const shipped = shippedDocuments(DEFAULT_IMAGES_PATH);
  defaults = shipped ? imageCatalogOf(shipped[0], DEFAULT_IMAGES_PATH) : loadImageCatalog(DEFAULT_IMAGES_PATH);
  return defaults;
}
