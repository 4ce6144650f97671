import type { Readable } from 'node:stream';
import type { KubeObject } from '../api/types.js';
import { ageOf } from '../registry/printers.js';
import type { KindInfo, TableColumn } from '../registry/types.js';
import { arrayBody } from '../storage/encoding.js';

/** Server-side printing: meta.k8s.io/v1 Table objects, which is all kubectl 1.32 prints from. */
const nameColumn: TableColumn = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description:
    'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names',
  cell: (o) => o.metadata.name ?? '',
};

const ageColumn: TableColumn = {
  name: 'Age',
  type: 'string',
  description:
    'CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata',
  cell: (o, now) => ageOf(o.metadata.creationTimestamp, now),
};

const columnCache = new WeakMap<KindInfo, TableColumn[]>();

export function columnsOf(info: KindInfo): TableColumn[] {
  let columns = columnCache.get(info);
  if (!columns) {
    columns = [...(info.noName ? [] : [nameColumn]), ...(info.columns ?? []), ...(info.noAge ? [] : [ageColumn])];
    columnCache.set(info, columns);
  }
  return columns;
}

/** The rows in the order the kind's printer sorts them (FlowSchemas by precedence), else as listed. */
function ordered(info: KindInfo, objects: readonly KubeObject[]): readonly KubeObject[] {
  return info.tableOrder ? [...objects].sort(info.tableOrder) : objects;
}

export type IncludeObject = 'None' | 'Metadata' | 'Object';

export function partialObjectMetadata(obj: KubeObject): KubeObject {
  return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: obj.metadata };
}

function tableHead(info: KindInfo, listMeta: Record<string, unknown>): Record<string, unknown> {
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: listMeta,
    columnDefinitions: columnsOf(info).map((c) => ({
      name: c.name,
      type: c.type,
      format: c.format ?? '',
      description: c.description,
      priority: c.priority ?? 0,
    })),
  };
}

function rowOf(
  columns: readonly TableColumn[],
  obj: KubeObject,
  now: number,
  include: IncludeObject,
): Record<string, unknown> {
  const row: Record<string, unknown> = { cells: columns.map((c) => c.cell(obj, now)) };
  if (include === 'Object') row.object = obj;
  else if (include === 'Metadata') row.object = partialObjectMetadata(obj);
  return row;
}

export function tableOf(
  info: KindInfo,
  objects: readonly KubeObject[],
  now: number,
  include: IncludeObject,
  listMeta: Record<string, unknown>,
): Record<string, unknown> {
  const columns = columnsOf(info);
  return { ...tableHead(info, listMeta), rows: ordered(info, objects).map((obj) => rowOf(columns, obj, now, include)) };
}

/** tableOf's JSON as a response body: a long table is streamed, its rows made as the socket takes them. */
export function tableBody(
  info: KindInfo,
  objects: readonly KubeObject[],
  now: number,
  include: IncludeObject,
  listMeta: Record<string, unknown>,
): Buffer | Readable {
  const columns = columnsOf(info);
  const opening = `${JSON.stringify(tableHead(info, listMeta)).slice(0, -1)},"rows":[`;
  return arrayBody(opening, ordered(info, objects), (obj) => JSON.stringify(rowOf(columns, obj, now, include)), ']}\n');
}
