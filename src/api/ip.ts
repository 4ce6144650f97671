import { isIP } from 'node:net';
import { FieldErrors, type StatusCause } from './errors.js';

/**
 * IP addresses as Go's net package reads them: 4 bytes for IPv4 (and IPv4-mapped IPv6), 16 for IPv6; undefined when
 * the text is not an address.
 */
export function parseIp(text: string): Uint8Array | undefined {
  const family = isIP(text);
  if (family === 4) {
    const bytes = new Uint8Array(4);
    let part = 0;
    let n = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 46) {
        bytes[part++] = n;
        n = 0;
      } else n = n * 10 + c - 48;
    }
    bytes[part] = n;
    return bytes;
  }
  if (family !== 6) return undefined;
  let body = text;
  let tail: number[] = [];
  const lastColon = body.lastIndexOf(':');
  if (body.slice(lastColon + 1).includes('.')) {
    tail = body
      .slice(lastColon + 1)
      .split('.')
      .map(Number);
    body = `${body.slice(0, lastColon + 1)}0:0`;
  }
  const [head = '', rest] = body.split('::') as [string, string | undefined];
  const groups = (s: string): number[] => (s === '' ? [] : s.split(':').map((g) => Number.parseInt(g, 16)));
  const left = groups(head);
  const right = rest === undefined ? [] : groups(rest);
  const words = [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  const bytes = new Uint8Array(16);
  words.forEach((w, i) => {
    bytes[2 * i] = w >> 8;
    bytes[2 * i + 1] = w & 255;
  });
  if (tail.length === 4) bytes.set(tail, 12);
  const mapped = bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 255 && bytes[11] === 255;
  return mapped ? bytes.slice(12) : bytes;
}

/** ValidateNonSpecialIP: endpoint and external IPs may not be unspecified, loopback or link-local. */
export function validateNonSpecialIp(value: string, field: string, parsed = parseIp(value)): StatusCause[] {
  const ip = parsed;
  if (!ip) return [FieldErrors.invalid(field, value, 'must be a valid IP address')];
  const causes: StatusCause[] = [];
  const v4 = ip.length === 4;
  if (ip.every((b) => b === 0)) causes.push(FieldErrors.invalid(field, value, `may not be unspecified (${value})`));
  const loopback = v4 ? ip[0] === 127 : ip.slice(0, 15).every((b) => b === 0) && ip[15] === 1;
  if (loopback)
    causes.push(FieldErrors.invalid(field, value, 'may not be in the loopback range (127.0.0.0/8, ::1/128)'));
  const linkLocal = v4 ? ip[0] === 169 && ip[1] === 254 : ip[0] === 0xfe && (ip[1]! & 0xc0) === 0x80;
  if (linkLocal)
    causes.push(FieldErrors.invalid(field, value, 'may not be in the link-local range (169.254.0.0/16, fe80::/10)'));
  const linkLocalMulticast = v4 ? ip[0] === 224 && ip[1] === 0 && ip[2] === 0 : ip[0] === 0xff && (ip[1]! & 0x0f) === 2;
  if (linkLocalMulticast)
    causes.push(
      FieldErrors.invalid(field, value, 'may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)'),
    );
  return causes;
}

/** validation.IsValidIP (1.32): the address must parse. */
export function validateIp(value: string, field: string): StatusCause[] {
  return parseIp(value)
    ? []
    : [FieldErrors.invalid(field, value, 'must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)')];
}

/** Go's net.JoinHostPort: IPv6 addresses in brackets. */
export function joinHostPort(host: string, port: number | string): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
