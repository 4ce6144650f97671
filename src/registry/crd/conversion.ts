import { ApiError } from '../../api/errors.js';
import type { MaybePromise } from '../../api/maybe-async.js';
import { deepCopy, isPlainObject, type KubeObject } from '../../api/types.js';
import type { SeededRandom } from '../../clock/random.js';
import { clientConfigOf, WebhookCallError, type WebhookClients } from '../webhook-client.js';
import type { KindInfo } from '../types.js';
import type { CrdConversion } from './kind.js';

/**
 * A CRD's conversion webhook (spec.conversion.strategy: Webhook; apiextensions-apiserver's webhookConverter): the
 * objects of a read that are not in the version asked for go to the webhook in one ConversionReview, and a write in
 * another version than the storage version is converted to it before it is stored. The answer is checked as
 * kube-apiserver checks it (uid, count, apiVersion and kind, the same name, namespace and uid), and only labels and
 * annotations of its metadata are taken. A failure fails the request, 500, in kube-apiserver's words
 * (`conversion webhook for GROUP/VERSION, Kind=KIND failed: …`).
 */
type Obj = Record<string, unknown>;

/**
 * kube-apiserver gives a conversion call no timeout of its own (and sends none): the request's bounds it, 60 s by
 * default (--request-timeout).
 */
const CONVERSION_TIMEOUT_SECONDS = 60;

export interface ConversionTarget {
  group: string;
  kind: string;
  /** The version the row serves. */
  version: string;
  storageVersion: string;
}

function failure(message: string): ApiError {
  return new ApiError(500, '', message);
}

export function webhookConversion(
  clients: WebhookClients,
  random: SeededRandom,
  conversion: CrdConversion,
  target: ConversionTarget,
): NonNullable<KindInfo['conversion']> {
  const webhook = conversion.webhook ?? {};
  const config = clientConfigOf(webhook.clientConfig);
  const reviewVersion = (webhook.conversionReviewVersions ?? []).find((v) => v === 'v1' || v === 'v1beta1');
  const gv = (version: string): string => `${target.group}/${version}`;

  /** objs converted to `version`; those already in it are not sent. */
  const convert = (objs: readonly KubeObject[], version: string, list = false): MaybePromise<KubeObject[]> => {
    const desired = gv(version);
    const pending = objs.filter((o) => o.apiVersion !== desired);
    if (pending.length === 0) return objs as KubeObject[];
    // The GroupVersionKind of what was converted, as Go prints it: a list is converted as one.
    const described = `${pending[0]!.apiVersion}, Kind=${target.kind}${list ? 'List' : ''}`;
    const failed = (why: string): ApiError => failure(`conversion webhook for ${described} failed: ${why}`);
    if (!reviewVersion) return Promise.reject(failed('no supported conversion review versions'));
    const uid = random.uuid();
    const review = {
      kind: 'ConversionReview',
      apiVersion: `apiextensions.k8s.io/${reviewVersion}`,
      request: { uid, desiredAPIVersion: desired, objects: pending },
    };
    return clients.post(config, review, CONVERSION_TIMEOUT_SECONDS, false).then(
      (answer) => {
        const converted = convertedObjects(answer, uid, reviewVersion, failed);
        if (converted.length !== pending.length)
          throw failure(
            `conversion webhook for ${described} returned ${converted.length} objects, expected ${pending.length}`,
          );
        let next = 0;
        return objs.map((original) => {
          if (original.apiVersion === desired) return original;
          const index = next++;
          const single = objs.length === 1;
          const at = single ? 'invalid object' : `invalid converted object at index ${index}`;
          const out = converted[index];
          if (!isPlainObject(out)) throw failure(`conversion webhook for ${described} returned ${at}: not an object`);
          if (out.apiVersion !== desired)
            throw failure(
              `conversion webhook for ${described} returned ${single ? 'invalid object at index 0' : at}: invalid groupVersion (expected ${desired}, received ${String(out.apiVersion ?? '')})`,
            );
          if (out.kind !== original.kind)
            throw failure(
              `conversion webhook for ${described} returned ${single ? 'invalid object at index 0' : at}: invalid kind (expected ${original.kind}, received ${String(out.kind ?? '')})`,
            );
          const problem = sameIdentity(original, out as KubeObject);
          if (problem) throw failure(`conversion webhook for ${described} returned ${at}: ${problem}`);
          return restoreMetadata(original, out as KubeObject, described);
        });
      },
      (err: unknown) => {
        if (err instanceof ApiError) throw err;
        throw failed(err instanceof WebhookCallError || err instanceof Error ? err.message : String(err));
      },
    );
  };

  return {
    fromStorage: (objs, list) => convert(objs, target.version, list),
    toStorage: (obj) => {
      const out = convert([obj], target.storageVersion);
      return out instanceof Promise ? out.then((o) => o[0]!) : out[0]!;
    },
  };
}

/** getConvertedObjectsFromResponse. */
function convertedObjects(answer: Obj, uid: string, version: string, failed: (why: string) => ApiError): unknown[] {
  if (version === 'v1' && (answer.apiVersion !== 'apiextensions.k8s.io/v1' || answer.kind !== 'ConversionReview'))
    throw failed(
      `expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got ${String(answer.apiVersion ?? '')}, Kind=${String(answer.kind ?? '')}`,
    );
  const response = answer.response;
  if (!isPlainObject(response)) throw failed('no response provided');
  if (version === 'v1' && response.uid !== uid)
    throw failed(`expected response.uid=${JSON.stringify(uid)}, got ${JSON.stringify(String(response.uid ?? ''))}`);
  const result = isPlainObject(response.result) ? response.result : {};
  if (result.status !== 'Success') {
    if (typeof result.message === 'string' && result.message !== '') throw failed(result.message);
    throw failed(`response.result.status was '${String(result.status ?? '')}', not 'Success'`);
  }
  return Array.isArray(response.convertedObjects) ? response.convertedObjects : [];
}

/** validateConvertedObject: name, namespace and uid as sent. */
function sameIdentity(original: KubeObject, converted: KubeObject): string | undefined {
  const a = original.metadata ?? {};
  const b = (isPlainObject(converted.metadata) ? converted.metadata : {}) as KubeObject['metadata'];
  if ((a.name ?? '') !== (b.name ?? '')) return `must have the same name: ${a.name ?? ''} != ${b.name ?? ''}`;
  if ((a.namespace ?? '') !== (b.namespace ?? ''))
    return `must have the same namespace: ${a.namespace ?? ''} != ${b.namespace ?? ''}`;
  if ((a.uid ?? '') !== (b.uid ?? '')) return `must have the same UID: ${a.uid ?? ''} != ${b.uid ?? ''}`;
  return undefined;
}

/** restoreObjectMeta: the original metadata, but for the labels and annotations the webhook gave. */
function restoreMetadata(original: KubeObject, converted: KubeObject, described: string): KubeObject {
  if (!isPlainObject(converted.metadata))
    throw failure(
      `conversion webhook for ${described} returned invalid metadata: missing metadata in converted object`,
    );
  const given = converted.metadata as Obj;
  const metadata: Obj = deepCopy(original.metadata) as unknown as Obj;
  for (const field of ['labels', 'annotations'] as const) {
    const value = given[field];
    if (value === undefined || value === null) {
      delete metadata[field];
      continue;
    }
    if (!isPlainObject(value) || Object.values(value).some((v) => typeof v !== 'string'))
      throw failure(
        `conversion webhook for ${described} returned invalid metadata: metadata.${field} must be a map of strings`,
      );
    metadata[field] = value;
  }
  return { ...converted, metadata } as KubeObject;
}
