// What in-process caches know TLS material by (a kept API server agent, credentials found usable,
// the probe's TLS sessions and secure contexts): a sha256 over named fields, never the PEM bytes
// themselves. Every value is written with its type and length, so moving bytes between fields,
// or a string between list items, never gives another field set's digest.
import { createHash, type Hash } from 'node:crypto';

function add(hash: Hash, value: unknown): void {
  if (Array.isArray(value)) {
    hash.update(`[${value.length}`);
    for (const item of value) add(hash, item);
    hash.update(']');
  } else if (Buffer.isBuffer(value)) {
    hash.update(`b${value.length}:`).update(value);
  } else if (typeof value === 'string') {
    hash.update(`s${value.length}:`).update(value);
  } else {
    hash.update(`v:${String(value)}`);
  }
}

/** The hex sha256 of `fields`, in their insertion order; an absent field counts as undefined. */
export function tlsMaterialDigest(fields: Readonly<Record<string, unknown>>): string {
  const hash = createHash('sha256');
  for (const [name, value] of Object.entries(fields)) {
    hash.update(`\0${name}=`);
    add(hash, value);
  }
  return hash.digest('hex');
}
