import type { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import { ApiError, Errors } from '../api/errors.js';
import { applyJsonPatch, applyMergePatch, applyStrategicMergePatch, PATCH_CONTENT_TYPES } from '../api/patch.js';
import { queryBool } from '../api/query-params.js';
import { parseFieldSelector, parseLabelSelector } from '../api/selectors.js';
import type { KubeList, KubeObject } from '../api/types.js';
import type { ServedCluster } from './served-cluster.js';
import type { DeleteRequestOptions, ListQuery, WatchQuery, WriteOptions } from '../registry/generic-store.js';
import { then } from '../api/maybe-async.js';
import { defaultFieldManager } from '../api/managed-fields.js';
import { parseFieldValidation } from '../api/schema/field-validation.js';
import { scaleOf, writeScale } from '../registry/scale.js';
import { groupVersion, type KindInfo } from '../registry/types.js';
import type { KubeletConnector } from '../api/kubelet-connector.js';
import { requesterOf } from '../auth/api-auth.js';
import { decodeBody } from './body.js';
import { bodyMediaType } from './negotiation.js';
import {
  deleteOptionsFrom,
  dryRunRequested,
  int64Param,
  parseResourceVersion,
  validateListOptions,
  validateWriteOptions,
  type WriteOptionsKind,
} from './request-options.js';
import { arrayBody, jsonOf, listBody, listJson, render } from '../storage/encoding.js';
import { isPrettyPrint, negotiate, prettyJson, type Negotiated } from './negotiation.js';
import { podLog } from './pod-connect.js';
import { decodeProtobuf } from './protobuf/decode.js';
import { partialObjectMetadata, tableBody, tableOf, type IncludeObject } from './table.js';
import {
  gatedTransport,
  httpTransport,
  plainEventEncoder,
  webSocketTransport,
  WatchStream,
  type EventEncoder,
  type Transport,
} from './watch-stream.js';

/** Where a request points: a kind, maybe a namespace, a name and a subresource. */
export interface ResourceTarget {
  info: KindInfo;
  namespace?: string;
  name?: string;
  subresource?: string;
  /** The deprecated /watch/ path prefix was used. */
  watchPath: boolean;
}

type Query = Record<string, string | string[] | undefined>;

function one(query: Query, key: string): string | undefined {
  const v = query[key];
  return Array.isArray(v) ? v[v.length - 1] : v;
}

function boolParam(query: Query, key: string): boolean {
  return queryBool(query[key]);
}

/** kube-apiserver's storage key check (path.IsValidPathSegmentName) on a name taken from the URL. */
function checkPathName(name: string): void {
  const problems: string[] = [];
  if (name === '.' || name === '..') problems.push(`may not be '${name}'`);
  for (const forbidden of ['/', '%']) if (name.includes(forbidden)) problems.push(`may not contain '${forbidden}'`);
  if (problems.length > 0)
    throw Errors.badRequest(`Name parameter invalid: ${JSON.stringify(name)}: ${problems.join(';')}`);
}

/** Segments after /api/v1 or /apis/GROUP/VERSION, resolved against the registry as kube-apiserver routes them. */
export function resolveTarget(
  cluster: ServedCluster,
  group: string,
  version: string,
  segments: string[],
): ResourceTarget | undefined {
  let watchPath = false;
  if (segments[0] === 'watch') {
    watchPath = true;
    segments = segments.slice(1);
  }
  const lookup = (resource: string | undefined): KindInfo | undefined =>
    resource ? cluster.registry.lookup(group, version, resource) : undefined;
  if (segments[0] === 'namespaces' && segments.length >= 3) {
    const info = lookup(segments[2]);
    if (info?.namespaced && segments.length <= 5) {
      return { info, namespace: segments[1], name: segments[3], subresource: segments[4], watchPath };
    }
  }
  if (segments.length === 0 || segments.length > 3) return undefined;
  const info = lookup(segments[0]);
  if (!info) return undefined;
  if (info.namespaced && segments.length > 1) return undefined;
  return { info, name: segments[1], subresource: segments[2], watchPath };
}

/** The REST verbs for one resource request; every answer and error is JSON (or YAML) as kube-apiserver gives it. */
export class ResourceHandler {
  constructor(
    private readonly cluster: ServedCluster,
    private readonly kubelet?: KubeletConnector,
  ) {}

  async handle(target: ResourceTarget, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const query = request.query as Query;
    if (request.method === 'GET') {
      // With etcd: a read without a resourceVersion sees every write acknowledged before it, by any API server.
      if (!one(query, 'resourceVersion') && target.subresource !== 'log') {
        const caughtUp = this.cluster.consistentRead();
        if (caughtUp) await caughtUp;
      }
      return this.handleNow(target, request, reply);
    }
    if (!this.cluster.storedInEtcd) return this.handleNow(target, request, reply);
    try {
      return await this.handleNow(target, request, reply);
    } catch (err) {
      // With etcd, a write starts from the object as this server's cache holds it, which may not yet have another
      // server's latest write: a 404 or 409 is only an answer once the cache has caught up with etcd (and the write
      // tried again). The body is decoded afresh from its bytes; nothing was written.
      if (!(err instanceof ApiError && (err.code === 404 || err.code === 409)) || reply.sent) throw err;
      await this.cluster.consistentRead();
      return this.handleNow(target, request, reply);
    }
  }

  private async handleNow(target: ResourceTarget, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const query = request.query as Query;
    let negotiated = negotiate(request.headers.accept);
    if (isPrettyPrint(query.pretty, request.headers['user-agent'])) negotiated = { ...negotiated, pretty: true };
    const { info, namespace, name, subresource } = target;
    const method = request.method;
    if (info.deprecated) addWarnings(reply, [info.deprecated]);
    if (subresource !== undefined && !this.subresourceKnown(info, subresource)) throw Errors.pathNotFound();
    if (
      subresource === undefined &&
      info.verbs &&
      !info.verbs.includes(verbOf(method, name !== undefined, target.watchPath || boolParam(query, 'watch')))
    )
      throw Errors.methodNotAllowed();
    if (name === undefined) {
      if (method === 'GET') {
        if (target.watchPath || boolParam(query, 'watch'))
          return this.watchHttp(target, query, negotiated, request, reply);
        return this.list(info, namespace, query, negotiated, reply);
      }
      if (method === 'POST') {
        if (info.namespaced && namespace === undefined) throw Errors.methodNotAllowed();
        const options = writeOptions(request, query, 'CreateOptions');
        const body = this.body(request, false, info.kind);
        return then(this.cluster.api.create(info, namespace, body.value, options), (created) =>
          this.send(warn(reply, options), 201, created, negotiated, info),
        );
      }
      if (method === 'DELETE') {
        this.checkListOptions(info, query, false);
        const options = this.deleteOptions(request, query);
        return then(this.cluster.api.deleteCollection(info, namespace, listQuery(query), options), (deleted) =>
          this.sendText(warn(reply, options), 200, negotiated, listJson(deleted, deleted.items), deleted),
        );
      }
      throw Errors.methodNotAllowed();
    }
    if (target.watchPath)
      return this.watchHttp(
        target,
        { ...query, fieldSelector: nameSelector(name, one(query, 'fieldSelector')) },
        negotiated,
        request,
        reply,
      );
    checkPathName(name);
    if (subresource === 'scale') return this.scale(info, namespace, name, request, reply, negotiated);
    const extra = subresource === undefined ? undefined : info.extraSubresources?.find((s) => s.name === subresource);
    if (extra?.create) {
      if (method !== 'POST') throw Errors.methodNotAllowed();
      const options = writeOptions(request, query, 'CreateOptions');
      const admitted = this.cluster.api.admitSubresourceCreate(
        info,
        namespace,
        name,
        extra,
        this.body(request, false, extra.kind).value,
        options,
      );
      return then(admitted, (body) =>
        then(extra.create!(this.cluster.api, info, namespace, name, body, { dryRun: options.dryRun }), (result) =>
          this.sendText(warn(reply, options), 201, negotiated, JSON.stringify(result), result),
        ),
      );
    }
    if (info.resource === 'pods' && subresource === 'log') {
      if (method !== 'GET') throw Errors.methodNotAllowed();
      return podLog(this.cluster, this.kubelet, info, namespace, name, query, reply);
    }
    if (
      info.resource === 'pods' &&
      (subresource === 'exec' || subresource === 'attach' || subresource === 'portforward')
    )
      throw Errors.badRequest('Upgrade request required');
    const status =
      subresource === 'status' || subresource === 'finalize' || info.strategy?.subresources?.[subresource ?? '']
        ? subresource
        : undefined;
    if (status === 'finalize' && method !== 'PUT') throw Errors.methodNotAllowed();
    switch (method) {
      case 'GET': {
        this.checkResourceVersion(one(query, 'resourceVersion'));
        return then(this.cluster.api.read(info, namespace, name), (obj) =>
          this.send(reply, 200, obj, negotiated, info),
        );
      }
      case 'PUT': {
        const options = writeOptions(request, query, 'UpdateOptions', status);
        const body = this.body(request, false, info.kind);
        return then(this.cluster.api.update(info, namespace, name, body.value, options), (updated) =>
          this.send(warn(reply, options), 200, updated, negotiated, info),
        );
      }
      case 'PATCH': {
        const options = writeOptions(request, query, 'PatchOptions', status, isApplyPatch(request));
        const body = this.body(request, true);
        return then(this.cluster.api.patch(info, namespace, name, body.patchType!, body.value, options), (patched) =>
          this.send(warn(reply, options), options.created ? 201 : 200, patched, negotiated, info),
        );
      }
      case 'DELETE': {
        if (status) throw Errors.methodNotAllowed();
        const options = this.deleteOptions(request, query);
        // kube-apiserver answers 202 only to an explicit orphanDependents=false; an object kept by finalizers gets 200.
        return then(this.cluster.api.delete(info, namespace, name, options), (result) =>
          this.send(
            warn(reply, options),
            !result.gone && options.orphanDependents === false ? 202 : 200,
            result.body as KubeObject,
            negotiated,
            info,
          ),
        );
      }
      default:
        throw Errors.methodNotAllowed();
    }
  }

  private subresourceKnown(info: KindInfo, sub: string): boolean {
    return (
      (sub === 'status' && info.status === true) ||
      (sub === 'scale' && info.scale !== undefined) ||
      (info.extraSubresources ?? []).some((s) => s.name === sub)
    );
  }

  /** `kind`: what a create or update body must be, named in the errors of one that does not decode. */
  private body(request: FastifyRequest, patch: boolean, kind?: string) {
    return decodeBody(request.headers['content-type'], request.body as Buffer | undefined, {
      patch,
      protobuf: decodeProtobuf,
      ...(kind ? { kind } : {}),
    });
  }

  /** DeleteOptions from the body (then the query is not read) or the query, as kube-apiserver's delete handlers read them. */
  private deleteOptions(request: FastifyRequest, query: Query): DeleteRequestOptions {
    const body = request.body as Buffer | undefined;
    const decoded =
      body && body.length > 0
        ? decodeBody(request.headers['content-type'], body, {
            patch: false,
            deleteOptions: true,
            protobuf: decodeProtobuf,
          }).value
        : undefined;
    const options: DeleteRequestOptions = deleteOptionsFrom(decoded, query);
    const requester = requesterOf(request.raw);
    if (requester) options.requester = requester;
    return options;
  }

  private list(
    info: KindInfo,
    namespace: string | undefined,
    query: Query,
    negotiated: Negotiated,
    reply: FastifyReply,
  ): void | Promise<void> {
    this.checkListOptions(info, query, false);
    return then(this.cluster.api.readList(info, namespace, listQuery(query)), (list) =>
      this.sendList(info, list, query, negotiated, reply),
    );
  }

  private sendList(
    info: KindInfo,
    list: KubeList,
    query: Query,
    negotiated: Negotiated,
    reply: FastifyReply,
  ): void | Promise<void> {
    if (negotiated.transform === 'table') {
      const include = includeObject(query);
      const now = this.cluster.clock.now();
      if (compactJson(negotiated))
        return this.sendText(
          reply,
          200,
          negotiated,
          tableBody(info, list.items, now, include, list.metadata),
          undefined,
        );
      const table = tableOf(info, list.items, now, include, list.metadata);
      return this.sendText(reply, 200, negotiated, '', table);
    }
    if (negotiated.transform === 'partial') {
      const head = { kind: 'PartialObjectMetadataList', apiVersion: 'meta.k8s.io/v1', metadata: list.metadata };
      if (compactJson(negotiated)) {
        const body = arrayBody(
          `${JSON.stringify(head).slice(0, -1)},"items":[`,
          list.items,
          (obj) => JSON.stringify(partialObjectMetadata(obj)),
          ']}\n',
        );
        return this.sendText(reply, 200, negotiated, body, undefined);
      }
      return this.sendText(reply, 200, negotiated, '', { ...head, items: list.items.map(partialObjectMetadata) });
    }
    return this.sendText(reply, 200, negotiated, compactJson(negotiated) ? listBody(list, list.items) : '', list);
  }

  /** Answers with one object, transformed as the Accept header asks. */
  send(
    reply: FastifyReply,
    code: number,
    obj: KubeObject,
    negotiated: Negotiated,
    info: KindInfo,
  ): void | Promise<void> {
    if (negotiated.transform === 'table' && obj.kind === info.kind) {
      const table = tableOf(info, [obj], this.cluster.clock.now(), 'Metadata', {
        resourceVersion: obj.metadata.resourceVersion ?? '',
      });
      return this.sendText(reply, code, negotiated, JSON.stringify(table), table);
    }
    if (negotiated.transform === 'partial' && obj.kind === info.kind) {
      const partial = partialObjectMetadata(obj);
      return this.sendText(reply, code, negotiated, JSON.stringify(partial), partial);
    }
    return this.sendText(reply, code, negotiated, compactJson(negotiated) ? jsonOf(obj) : '', obj);
  }

  /**
   * Every answer with data goes out here, and with --data only once what it shows is durable: a write's
   * response waits for its fsync (group commit), and so does a read of something not yet durable.
   */
  private sendText(
    reply: FastifyReply,
    code: number,
    negotiated: Negotiated,
    json: string | Buffer | Readable,
    value: unknown,
  ): void | Promise<void> {
    const durable = this.cluster.durable();
    if (durable) return durable.then(() => this.sendNow(reply, code, negotiated, json, value));
    return this.sendNow(reply, code, negotiated, json, value);
  }

  private sendNow(
    reply: FastifyReply,
    code: number,
    negotiated: Negotiated,
    json: string | Buffer | Readable,
    value: unknown,
  ): void | Promise<void> {
    if (negotiated.format === 'yaml') {
      void reply.code(code).header('content-type', 'application/yaml').send(render(value, 'yaml'));
      return;
    }
    if (negotiated.pretty) {
      const text = value === undefined ? prettyJson(String(json)) : JSON.stringify(value, null, 2);
      void reply.code(code).header('content-type', 'application/json').send(text);
      return;
    }
    // Go's json.Encoder ends what it writes with a newline; the bodies made as Buffers or streams end with it already.
    void reply
      .code(code)
      .header('content-type', 'application/json')
      .send(typeof json === 'string' ? `${json}\n` : json);
    // A streamed body is sent over many turns of the event loop: the handler ends with it, or fastify, seeing an
    // async handler end before any byte went out, would answer again with an empty body.
    if (typeof json === 'object' && !Buffer.isBuffer(json)) return finished(reply.raw).catch(() => undefined);
  }

  /** GET/PUT/PATCH of the autoscaling/v1 Scale subresource, writing spec.replicas of the owner. */
  private scale(
    info: KindInfo,
    namespace: string | undefined,
    name: string,
    request: FastifyRequest,
    reply: FastifyReply,
    negotiated: Negotiated,
  ): void | Promise<void> {
    const query = request.query as Query;
    if (request.method === 'GET') {
      return then(this.cluster.api.read(info, namespace, name), (obj) => {
        const scale = scaleOf(info, obj);
        return this.sendText(reply, 200, negotiated, JSON.stringify(scale), scale);
      });
    }
    if (request.method !== 'PUT' && request.method !== 'PATCH') throw Errors.methodNotAllowed();
    validateWriteOptions(query, request.method === 'PUT' ? 'UpdateOptions' : 'PatchOptions', isApplyPatch(request));
    const body = this.body(request, request.method === 'PATCH', request.method === 'PUT' ? 'Scale' : undefined);
    const scale = writeScale(
      this.cluster.api,
      info,
      namespace,
      name,
      (current) => {
        if (request.method === 'PUT') return body.value;
        if (body.patchType === 'json') return applyJsonPatch(current, body.value);
        if (body.patchType === 'merge') return applyMergePatch(current, body.value);
        if (body.patchType === 'strategic')
          return applyStrategicMergePatch(current, body.value, 'io.k8s.api.autoscaling.v1.Scale');
        throw Errors.unsupportedMediaType('application/apply-patch+yaml');
      },
      request.method === 'PUT',
      {
        dryRun: dryRunRequested(query),
        fieldManager: one(query, 'fieldManager') || defaultFieldManager(request.headers['user-agent']),
      },
    );
    return then(scale, (written) => this.sendText(reply, 200, negotiated, JSON.stringify(written), written));
  }

  /**
   * What a watch checks before it streams: bad selectors are a plain 400 answer, as in kube-apiserver; only
   * errors found once the watch has started (410 Expired) travel as an ERROR event.
   */
  checkWatch(target: ResourceTarget, query: Query): void {
    this.checkListOptions(target.info, query, true);
  }

  /**
   * A list's, watch's or deletecollection's options in kube-apiserver's order: parameters that do not convert (limit,
   * timeoutSeconds, selectors: 400), ValidateListOptions (422), then the resourceVersion (400 unparsable, 504 future).
   */
  private checkListOptions(info: KindInfo, query: Query, watch: boolean): void {
    listQuery(query);
    parseLabelSelector(one(query, 'labelSelector'));
    parseFieldSelector(one(query, 'fieldSelector'), this.cluster.registry.supportedFields(info));
    validateListOptions(query, watch);
    this.checkResourceVersion(one(query, 'resourceVersion'));
  }

  /**
   * A resourceVersion from the future (a client that saw revisions a crash lost, or another server's) gets
   * kube-apiserver's answer, 504 with a ResourceVersionTooLarge cause, so that clients relist.
   */
  private checkResourceVersion(rv: string | undefined): void {
    const revision = parseResourceVersion(rv);
    if (revision === undefined) return;
    const current = this.cluster.store.currentRevision;
    if (revision > current) throw Errors.resourceVersionTooLarge(revision, current);
  }

  private watchHttp(
    target: ResourceTarget,
    query: Query,
    negotiated: Negotiated,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    this.checkWatch(target, query);
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': negotiated.format === 'yaml' ? 'application/yaml' : 'application/json',
      'cache-control': 'no-cache, private',
      'transfer-encoding': 'chunked',
    });
    res.flushHeaders();
    request.raw.socket.setNoDelay(true);
    this.startWatch(target, query, negotiated, httpTransport(res));
  }

  watchWebSocket(target: ResourceTarget, query: Query, accept: string | undefined, ws: WebSocket): void {
    let negotiated: Negotiated;
    try {
      negotiated = negotiate(accept);
    } catch {
      negotiated = { format: 'json', transform: 'none' };
    }
    this.startWatch(target, query, negotiated, webSocketTransport(ws));
  }

  /**
   * One watch over any transport. Errors after the stream has started (a resourceVersion too old) are sent
   * as an ERROR event carrying the Status, then the stream ends, as kube-apiserver's watch cache does.
   */
  private startWatch(target: ResourceTarget, query: Query, negotiated: Negotiated, transport: Transport): void {
    const { info, namespace } = target;
    const durable = this.cluster.durable();
    if (durable) transport = gatedTransport(transport, durable);
    const encode = this.eventEncoder(info, negotiated, query);
    const format = `${negotiated.transform}:${includeObject(query)}`;
    const stream = new WatchStream(transport, format, encode);
    const watchQuery: WatchQuery = {
      ...listQuery(query),
      resourceVersion: one(query, 'resourceVersion'),
      sendInitialEvents: boolParam(query, 'sendInitialEvents'),
    };
    if (target.name !== undefined) watchQuery.fieldSelector = nameSelector(target.name, watchQuery.fieldSelector);
    try {
      const { watch, revision } = this.cluster.api.watch(info, namespace, watchQuery, stream);
      stream.onEnd = () => watch.stop();
      if (stream.isClosed) watch.stop();
      const bookmark = (annotations?: Record<string, string>): KubeObject => ({
        kind: info.kind,
        apiVersion: groupVersion(info),
        metadata: annotations
          ? { resourceVersion: String(this.cluster.store.currentRevision), annotations }
          : { resourceVersion: String(this.cluster.store.currentRevision) },
      });
      const bookmarks = boolParam(query, 'allowWatchBookmarks');
      if (watchQuery.sendInitialEvents && bookmarks) {
        stream.sendRaw('BOOKMARK', {
          ...bookmark(),
          metadata: { resourceVersion: String(revision), annotations: { 'k8s.io/initial-events-end': 'true' } },
        });
      }
      if (bookmarks) stream.every(60_000, () => stream.sendRaw('BOOKMARK', bookmark()));
      const timeout = int64Param(query, 'timeoutSeconds');
      // 0 means none; a negative timeout ends the watch at once, as kube-apiserver's already-expired timer does.
      if (timeout !== undefined && timeout !== 0) stream.endAfter(Math.max(0, Math.min(timeout, 24 * 3600)) * 1000);
    } catch (err) {
      if (err instanceof ApiError) {
        stream.sendRaw('ERROR', err.toStatus());
        stream.close();
        return;
      }
      stream.close();
      throw err;
    }
  }

  private eventEncoder(info: KindInfo, negotiated: Negotiated, query: Query): EventEncoder {
    if (negotiated.transform === 'table') {
      const include = includeObject(query);
      return (type, object) => {
        const body =
          object.kind === info.kind
            ? tableOf(info, [object], this.cluster.clock.now(), include, {
                resourceVersion: object.metadata.resourceVersion ?? '',
              })
            : object;
        return `{"type":"${type}","object":${JSON.stringify(body)}}\n`;
      };
    }
    if (negotiated.transform === 'partial') {
      return (type, object) => `{"type":"${type}","object":${JSON.stringify(partialObjectMetadata(object))}}\n`;
    }
    if (negotiated.format === 'yaml') {
      return (type, object) => `---\n${render({ type, object }, 'yaml')}`;
    }
    return plainEventEncoder;
  }
}

/** Whether the answer is compact JSON, written from cached text; YAML and pretty JSON are made from the value. */
function compactJson(negotiated: Negotiated): boolean {
  return negotiated.format === 'json' && negotiated.pretty !== true;
}

/** Whether a PATCH request's body is a server-side apply (by its Content-Type). */
function isApplyPatch(request: FastifyRequest): boolean {
  return PATCH_CONTENT_TYPES[bodyMediaType(request.headers['content-type'])] === 'apply';
}

/**
 * Options of a write request, validated as kube-apiserver validates them before it reads the body (422 CreateOptions,
 * UpdateOptions or PatchOptions): dryRun, fieldManager (default: the User-Agent's program), fieldValidation (default
 * Warn), force.
 */
function writeOptions(
  request: FastifyRequest,
  query: Query,
  kind: WriteOptionsKind,
  subresource?: string,
  applyPatch = false,
): WriteOptions {
  validateWriteOptions(query, kind, applyPatch);
  const manager = one(query, 'fieldManager');
  // takeBody: the decoded request body is this request's alone, so the store may keep it rather than copy it.
  const options: WriteOptions = {
    dryRun: dryRunRequested(query),
    fieldManager: manager || defaultFieldManager(request.headers['user-agent']),
    fieldValidation: parseFieldValidation(one(query, 'fieldValidation')) ?? 'Warn',
    force: boolParam(query, 'force'),
    takeBody: true,
  };
  if (subresource) options.subresource = subresource;
  if (subresource && subresource !== 'status' && subresource !== 'finalize') options.managedSubresource = subresource;
  const requester = requesterOf(request.raw);
  if (requester) options.requester = requester;
  return options;
}

/** Sends a write's warnings as `Warning: 299 - "…"` headers (kubectl prints them as `Warning: …`). */
function warn(reply: FastifyReply, options: { warnings?: string[] }): FastifyReply {
  if (options.warnings?.length) addWarnings(reply, options.warnings);
  return reply;
}

/** Adds `Warning: 299 - "…"` headers to the ones the reply carries already. */
function addWarnings(reply: FastifyReply, warnings: readonly string[]): void {
  const existing = reply.getHeader('warning');
  const before = existing === undefined ? [] : Array.isArray(existing) ? existing.map(String) : [String(existing)];
  void reply.header('warning', [...before, ...warnings.map((w) => `299 - ${JSON.stringify(w)}`)]);
}

/** The API verb of a request on a resource (not a subresource), as authorization and discovery name it. */
function verbOf(method: string, named: boolean, watch: boolean): string {
  switch (method) {
    case 'GET':
      return watch ? 'watch' : named ? 'get' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return named ? 'delete' : 'deletecollection';
    default:
      return method.toLowerCase();
  }
}

function listQuery(query: Query): ListQuery {
  const limit = int64Param(query, 'limit');
  int64Param(query, 'timeoutSeconds'); // a list ignores it, but a malformed one is still a 400
  const q: ListQuery = {};
  const labelSelector = one(query, 'labelSelector');
  const fieldSelector = one(query, 'fieldSelector');
  const cont = one(query, 'continue');
  if (labelSelector !== undefined) q.labelSelector = labelSelector;
  if (fieldSelector !== undefined) q.fieldSelector = fieldSelector;
  if (limit !== undefined && limit > 0) q.limit = limit;
  if (cont) q.continue = cont;
  return q;
}

function includeObject(query: Query): IncludeObject {
  const v = one(query, 'includeObject');
  return v === 'None' || v === 'Object' ? v : 'Metadata';
}

function nameSelector(name: string, existing: string | undefined): string {
  const escaped = name.replace(/([\\,=])/g, '\\$1');
  return existing ? `${existing},metadata.name=${escaped}` : `metadata.name=${escaped}`;
}
