import { X509Certificate } from 'node:crypto';
import { ignoreNotFound } from '../../api/errors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { Resources } from '../../client/client.js';
import {
  ReconcileLoop,
  type Controller,
  type ControllerContext,
  type ReconcileResult,
} from '../../runtime/controller.js';

const HOUR_MS = 3600 * 1000;
/** How long each kind of request is kept (cleaner.go): an issued or denied one an hour, an unhandled one a day. */
const APPROVED_EXPIRATION_MS = HOUR_MS;
const DENIED_EXPIRATION_MS = HOUR_MS;
const PENDING_EXPIRATION_MS = 24 * HOUR_MS;

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});

/** The certificate's NotAfter, if the request has one that parses. */
function certificateNotAfter(certificate: unknown): number | undefined {
  if (typeof certificate !== 'string' || certificate === '') return undefined;
  try {
    return Date.parse(new X509Certificate(Buffer.from(certificate, 'base64')).validTo);
  } catch {
    return undefined;
  }
}

/**
 * When a request is to be deleted, on the clock (cleaner.go's rules): an hour after it was approved (once issued)
 * or denied, when its certificate expires, a day after it was made if nobody acted on it. Undefined: never
 * (approved but not issued, or failed). Example: denied at 12:00 → 13:00; made at 12:00 and left → 12:00 next day.
 */
export function csrDeleteAt(csr: KubeObject): number | undefined {
  const status = obj(csr.status);
  const conditions = Array.isArray(status.conditions) ? status.conditions.map(obj) : [];
  const issued = typeof status.certificate === 'string' && status.certificate !== '';
  const times: number[] = [];
  const since = (t: unknown, ms: number): void => {
    const at = typeof t === 'string' ? Date.parse(t) : Number.NaN;
    if (!Number.isNaN(at)) times.push(at + ms);
  };
  if (conditions.length === 0) since(csr.metadata.creationTimestamp, PENDING_EXPIRATION_MS);
  // When the decision was made: the API server's lastTransitionTime, which is on the cluster's clock (kubectl writes
  // lastUpdateTime from its own, the wall clock, which a virtual clock is not); without one, lastUpdateTime.
  const decided = (c: Obj): unknown => c.lastTransitionTime ?? c.lastUpdateTime;
  for (const c of conditions) {
    if (c.type === 'Denied') since(decided(c), DENIED_EXPIRATION_MS);
    if (c.type === 'Approved' && issued) {
      since(decided(c), APPROVED_EXPIRATION_MS);
      const notAfter = certificateNotAfter(status.certificate);
      if (notAfter !== undefined) times.push(notAfter);
    }
  }
  return times.length > 0 ? Math.min(...times) : undefined;
}

/**
 * kube-controller-manager's csrcleaner: CertificateSigningRequests do not pile up. Instead of listing every request
 * each hour, each is looked at again when its time comes.
 */
export function csrCleanerController(ctx: ControllerContext): Controller {
  const csrs = ctx.informers.for(Resources.certificatesigningrequests);
  const loop = new ReconcileLoop('csrcleaner', ctx, reconcile);
  const enqueue = (csr: KubeObject): void => {
    if (!csr.metadata.deletionTimestamp) loop.queue.add(csr.metadata.name!);
  };
  csrs.addEventHandler({ add: enqueue, update: (_old, csr) => enqueue(csr) });

  async function reconcile(name: string): Promise<ReconcileResult | void> {
    const csr = csrs.get(undefined, name);
    if (!csr || csr.metadata.deletionTimestamp) return;
    const at = csrDeleteAt(csr);
    if (at === undefined) return;
    const left = at - ctx.clock.now();
    if (left > 0) return { requeueAfterMs: left };
    ctx.log('info', `csrcleaner: deleting CertificateSigningRequest ${name}, past its time`);
    await ignoreNotFound(
      ctx.client.delete(Resources.certificatesigningrequests, undefined, name, {
        preconditions: { uid: csr.metadata.uid! },
      }),
    );
  }

  return { name: 'csrcleaner', start: async () => loop.start(), stop: () => loop.stop() };
}
