import { readFileSync } from 'node:fs';
import type { UserInfo } from './user.js';

/**
 * Splits CSV text into records as Go's encoding/csv does with FieldsPerRecord = -1: fields separated by commas,
 * double-quoted fields may hold commas, newlines and "" (a quote); blank lines are skipped.
 */
export function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let quoted = false;
  let fieldStarted = false;
  const endRecord = (): void => {
    if (fieldStarted || record.length > 0) {
      record.push(field);
      records.push(record);
    }
    record = [];
    field = '';
    fieldStarted = false;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
      continue;
    }
    if (c === '"' && field === '') {
      quoted = true;
      fieldStarted = true;
    } else if (c === ',') {
      record.push(field);
      field = '';
      fieldStarted = true;
    } else if (c === '\n') endRecord();
    else if (c === '\r' && text[i + 1] === '\n') continue;
    else {
      field += c;
      fieldStarted = true;
    }
  }
  if (quoted) throw new Error('extraneous or missing " in quoted-field');
  endRecord();
  return records;
}

/**
 * A static token file (kube-apiserver --token-auth-file): lines `token,user,uid[,"group1,group2"]`.
 * Returns the users by token; throws with kube-apiserver's message on a line with fewer than three columns.
 */
export function loadTokenFile(path: string): { users: Map<string, UserInfo>; warnings: string[] } {
  const records = parseCsv(readFileSync(path, 'utf8'));
  const users = new Map<string, UserInfo>();
  const warnings: string[] = [];
  records.forEach((record, i) => {
    if (record.length < 3)
      throw new Error(
        `token file '${path}' must have at least 3 columns (token, user name, user uid), found ${record.length}`,
      );
    const [token, username, uid] = record as [string, string, string];
    if (token === '') {
      warnings.push(`empty token has been found in token file '${path}', record number '${i + 1}'`);
      return;
    }
    if (users.has(token))
      warnings.push(`duplicate token has been found in token file '${path}', record number '${i + 1}'`);
    users.set(token, {
      username,
      uid,
      groups: record.length >= 4 ? record[3]!.split(',').filter((g) => g !== '') : [],
    });
  });
  return { users, warnings };
}
