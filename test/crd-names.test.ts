import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { kubectlAgainst, kubectlMissing, type KubectlResult } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// Issue 10: CRD names within a group are first come, first served, as kube-apiserver's NamingConditionController
// grants them: a CRD asking for a plural, singular, short name, kind or list kind another CRD of the group was
// granted gets NamesAccepted=False (PluralConflict, SingularConflict, ShortNamesConflict, KindConflict,
// ListKindConflict: "X" is already in use), is not Established and not served; once the holder goes, it is.

const missing = kubectlMissing();

function crd(plural: string, names: string): string {
  return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: ${plural}.names.example.com}
spec:
  group: names.example.com
  scope: Namespaced
  names: {plural: ${plural}, ${names}}
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]
`;
}

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

describe('CRD names in use by another CRD of the group', { skip: missing }, () => {
  let server: SimServer;
  const k = (args: string[]): Promise<KubectlResult> => kubectlAgainst(server).run(args);
  const ok = (args: string[], input?: string): Promise<string> => kubectlAgainst(server).ok(args, input);
  /** status.acceptedNames and the NamesAccepted and Established conditions (type, status, reason, message). */
  const naming = async (
    plural: string,
  ): Promise<{
    acceptedNames: unknown;
    namesAccepted: Omit<Condition, 'type'>;
    established: Omit<Condition, 'type'>;
  }> => {
    const status = (
      JSON.parse(await ok(['get', 'crd', `${plural}.names.example.com`, '-o', 'json'])) as {
        status: { acceptedNames: unknown; conditions: Condition[] };
      }
    ).status;
    const condition = (type: string): Omit<Condition, 'type'> => {
      const c = status.conditions.find((x) => x.type === type)!;
      return { status: c.status, reason: c.reason, message: c.message };
    };
    return {
      acceptedNames: status.acceptedNames,
      namesAccepted: condition('NamesAccepted'),
      established: condition('Established'),
    };
  };
  const notEstablished = { status: 'False', reason: 'NotAccepted', message: 'not all names are accepted' };
  const established = {
    status: 'True',
    reason: 'InitialNamesAccepted',
    message: 'the initial names have been accepted',
  };

  before(async () => {
    server = await startServer(['--nodes', '0']);
    await ok(['apply', '-f', '-'], crd('widgets', 'kind: Widget, shortNames: [wd]'));
    await ok(['wait', '--for=condition=Established', 'crd/widgets.names.example.com', '--timeout=10s']);
  });
  after(async () => {
    await server?.stop();
  });

  it('refuses a kind another CRD holds: KindConflict, not Established, not served', async () => {
    await ok(['apply', '-f', '-'], crd('gadgets', 'singular: gadget, kind: Widget, listKind: GadgetList'));
    assert.deepEqual(await naming('gadgets'), {
      // The names that are free are granted; the kind stays unset.
      acceptedNames: { plural: 'gadgets', singular: 'gadget', kind: '', listKind: 'GadgetList' },
      namesAccepted: { status: 'False', reason: 'KindConflict', message: '"Widget" is already in use' },
      established: notEstablished,
    });
    const get = await k(['get', 'gadgets']);
    assert.notEqual(get.code, 0);
    assert.match(get.stderr, /the server doesn't have a resource type "gadgets"/);
    assert.notEqual((await k(['get', '--raw', '/apis/names.example.com/v1/namespaces/default/gadgets'])).code, 0);
    assert.doesNotMatch(await ok(['api-resources', '--api-group=names.example.com']), /gadgets/);
    const wait = await k(['wait', '--for=condition=Established', 'crd/gadgets.names.example.com', '--timeout=1s']);
    assert.notEqual(wait.code, 0, 'never Established while the kind is taken');
    // The holder is untouched.
    assert.match(await ok(['get', 'wd']), /No resources found|^$/);
  });

  it('refuses a plural that is another CRD’s short name: PluralConflict', async () => {
    await ok(['apply', '-f', '-'], crd('wd', 'singular: wdsingle, kind: Wd'));
    assert.deepEqual(await naming('wd'), {
      acceptedNames: { plural: '', singular: 'wdsingle', kind: 'Wd', listKind: 'WdList' },
      namesAccepted: { status: 'False', reason: 'PluralConflict', message: '"wd" is already in use' },
      established: notEstablished,
    });
    await ok(['delete', 'crd', 'wd.names.example.com']);
  });

  it('reports the last conflict found, as kube-apiserver does: singular, kind and list kind taken → ListKindConflict', async () => {
    // singular defaults to "widget" and listKind to "WidgetList": all three are the first CRD's.
    await ok(['apply', '-f', '-'], crd('samewidgets', 'kind: Widget'));
    assert.deepEqual(await naming('samewidgets'), {
      acceptedNames: { plural: 'samewidgets', kind: '' },
      namesAccepted: { status: 'False', reason: 'ListKindConflict', message: '"WidgetList" is already in use' },
      established: notEstablished,
    });
    await ok(['delete', 'crd', 'samewidgets.names.example.com']);
  });

  it('keeps an Established CRD served under its granted names when a new short name is taken', async () => {
    // "gadget" is the refused CRD's granted singular: names granted count even while that CRD is not Established.
    await ok(['apply', '-f', '-'], crd('widgets', 'kind: Widget, shortNames: [wd, gadget]'));
    assert.deepEqual(await naming('widgets'), {
      acceptedNames: {
        plural: 'widgets',
        singular: 'widget',
        shortNames: ['wd'],
        kind: 'Widget',
        listKind: 'WidgetList',
      },
      namesAccepted: { status: 'False', reason: 'ShortNamesConflict', message: '"gadget" is already in use' },
      established,
    });
    await ok(['create', '-f', '-'], 'apiVersion: names.example.com/v1\nkind: Widget\nmetadata: {name: w1}\n');
    assert.equal(await ok(['get', 'wd', '-o', 'name']), 'widget.names.example.com/w1\n');
  });

  it('grants the names once their holder is deleted', async () => {
    await ok(['delete', 'crd', 'widgets.names.example.com']);
    assert.match(
      await ok(['wait', '--for=condition=Established', 'crd/gadgets.names.example.com', '--timeout=10s']),
      /condition met/,
    );
    assert.deepEqual(await naming('gadgets'), {
      acceptedNames: { plural: 'gadgets', singular: 'gadget', kind: 'Widget', listKind: 'GadgetList' },
      namesAccepted: { status: 'True', reason: 'NoConflicts', message: 'no conflicts found' },
      established,
    });
    // api-resources reads discovery afresh (kubectl's cache still maps Widget to the deleted widgets).
    assert.match(
      await ok(['api-resources', '--api-group=names.example.com']),
      /gadgets\s+names\.example\.com\/v1\s+true\s+Widget/,
    );
    assert.doesNotMatch(await ok(['api-resources', '--api-group=names.example.com']), /widgets/);
    await ok(['create', '-f', '-'], 'apiVersion: names.example.com/v1\nkind: Widget\nmetadata: {name: g1}\n');
    assert.equal(await ok(['get', 'gadgets', '-o', 'name']), 'widget.names.example.com/g1\n');
  });
});
