import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { checkDns1123Label, validateLabels } from '../../api/validation.js';
import { ageOf, col } from '../printers.js';
import type { KindInfo } from '../types.js';

/** node.k8s.io/v1 RuntimeClass: a container runtime configuration pods name in spec.runtimeClassName. */
function validateRuntimeClass(o: KubeObject): StatusCause[] {
  const handler = typeof o.handler === 'string' ? o.handler : '';
  const causes: StatusCause[] = checkDns1123Label(handler).map((p) => FieldErrors.invalid('handler', handler, p));
  const scheduling = isPlainObject(o.scheduling) ? o.scheduling : {};
  causes.push(...validateLabels(scheduling.nodeSelector, 'scheduling.nodeSelector'));
  return causes;
}

export const runtimeClasses: KindInfo = {
  group: 'node.k8s.io',
  version: 'v1',
  kind: 'RuntimeClass',
  resource: 'runtimeclasses',
  singular: 'runtimeclass',
  namespaced: false,
  strategy: {
    validate: validateRuntimeClass,
    validateUpdate(next, old) {
      return next.handler === old.handler ? [] : [FieldErrors.invalid('handler', next.handler, 'field is immutable')];
    },
  },
  columns: [
    col('Handler', (o) => String(o.handler ?? ''), {
      description:
        'handler specifies the underlying runtime and configuration that the CRI implementation will use to handle pods of this class. The possible values are specific to the node & CRI configuration.  It is assumed that all handlers are available on every node, and handlers of the same name are equivalent on every node. For example, a handler called "runc" might specify that the runc (or equivalent) container runtime should be used to run the containers in the pod. The Handler must be lowercase, conform to the DNS Label (RFC 1123) requirements, and is immutable.',
    }),
    col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
      description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
    }),
  ],
  noAge: true,
};
