import { isPlainObject, type KubeObject } from '../../api/types.js';
import { parseCertificateRequest, type CertificateRequest } from '../../api/x509.js';
import { Resources } from '../../client/client.js';
import { ReconcileLoop, type Controller, type ControllerContext } from '../../runtime/controller.js';
import { KUBE_APISERVER_CLIENT_KUBELET, kubeletClientProblem } from './signer.js';

/**
 * kube-controller-manager's csrapproving (sarapprove.go): a kubelet's client-certificate request is approved when
 * the user who made it may create the matching virtual subresource — certificatesigningrequests/selfnodeclient for
 * a node renewing its own certificate, /nodeclient for one made on a node's behalf (TLS bootstrapping). Anything
 * else waits for a person (`kubectl certificate approve`).
 */

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});
const strings = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : []);

interface Recognizer {
  recognize(spec: Obj, request: CertificateRequest): boolean;
  subresource: 'selfnodeclient' | 'nodeclient';
  message: string;
}

const isNodeClient = (spec: Obj, request: CertificateRequest): boolean =>
  spec.signerName === KUBE_APISERVER_CLIENT_KUBELET &&
  kubeletClientProblem(request, strings(spec.usages)) === undefined;

/** In the order they are tried: the self-renewal first. */
const RECOGNIZERS: readonly Recognizer[] = [
  {
    recognize: (spec, request) => spec.username === request.commonName && isNodeClient(spec, request),
    subresource: 'selfnodeclient',
    message: 'Auto approving self kubelet client certificate after SubjectAccessReview.',
  },
  {
    recognize: isNodeClient,
    subresource: 'nodeclient',
    message: 'Auto approving kubelet client certificate after SubjectAccessReview.',
  },
];

/** Whether a request is still for someone to decide: no certificate, no Approved or Denied condition. */
function undecided(csr: KubeObject): boolean {
  const status = obj(csr.status);
  if (typeof status.certificate === 'string' && status.certificate !== '') return false;
  const conditions = Array.isArray(status.conditions) ? status.conditions.map(obj) : [];
  return !conditions.some((c) => c.type === 'Approved' || c.type === 'Denied');
}

export function csrApprovingController(ctx: ControllerContext): Controller {
  const csrs = ctx.informers.for(Resources.certificatesigningrequests);
  const loop = new ReconcileLoop('csrapproving', ctx, reconcile);
  csrs.addEventHandler({
    add: (csr) => loop.queue.add(csr.metadata.name!),
    update: (_old, csr) => loop.queue.add(csr.metadata.name!),
  });

  /** A SubjectAccessReview for the request's maker, as the API server recorded them in spec. */
  async function allowed(spec: Obj, subresource: string): Promise<boolean> {
    const review = await ctx.client.create(Resources.subjectaccessreviews, undefined, {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      metadata: {},
      spec: {
        user: spec.username,
        uid: spec.uid,
        groups: spec.groups,
        extra: spec.extra,
        resourceAttributes: {
          group: 'certificates.k8s.io',
          resource: 'certificatesigningrequests',
          verb: 'create',
          subresource,
        },
      },
    });
    return obj(review.status).allowed === true;
  }

  async function reconcile(name: string): Promise<void> {
    const csr = csrs.get(undefined, name);
    if (!csr || !undecided(csr)) return;
    const spec = obj(csr.spec);
    if (spec.signerName !== KUBE_APISERVER_CLIENT_KUBELET) return;
    let request: CertificateRequest;
    try {
      request = parseCertificateRequest(Buffer.from(String(spec.request ?? ''), 'base64').toString('latin1'));
    } catch (err) {
      throw new Error(`unable to parse csr "${name}": ${err instanceof Error ? err.message : String(err)}`);
    }
    const tried: string[] = [];
    for (const recognizer of RECOGNIZERS) {
      if (!recognizer.recognize(spec, request)) continue;
      tried.push(recognizer.subresource);
      if (!(await allowed(spec, recognizer.subresource))) continue;
      const approved = { type: 'Approved', status: 'True', reason: 'AutoApproved', message: recognizer.message };
      const status = obj(csr.status);
      const conditions = Array.isArray(status.conditions) ? status.conditions : [];
      await ctx.client.updateApproval({ ...csr, status: { ...status, conditions: [...conditions, approved] } });
      return;
    }
    // Not an error to retry: the request waits for a person, or for a change to it.
    if (tried.length > 0)
      ctx.log(
        'debug',
        `csrapproving: recognized csr "${name}" as [${tried.join(' ')}] but subject access review was not approved`,
      );
  }

  return { name: 'csrapproving', start: async () => loop.start(), stop: () => loop.stop() };
}
