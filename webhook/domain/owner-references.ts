// The owner references of an object as an AdmissionReview carries it: tenant-writable, so a field
// of the wrong type reads as empty rather than throwing. A member's DELETE (member-exits.ts) and
// the UPDATE that would let it go unseen (member-strips.ts) read them through this one parser, so
// the UPDATE is judged by the owners its DELETE would find. Pure.
import { record, text } from '../../functions/shared/records.js';

export interface OwnerReference {
  /** What precedes the first '/' of apiVersion; '' for the core group (no '/'). */
  group: string;
  /** The version after the group, or the whole apiVersion of the core group; absent when empty. */
  version: string | undefined;
  /** As written; '' when absent or not a string. */
  kind: string;
  /** As written; '' when absent or not a string. */
  name: string;
}

const written = (value: unknown): string => (typeof value === 'string' ? value : '');

/** Every owner reference of `object`, in order, duplicates included. */
export function ownerReferences(object: unknown): OwnerReference[] {
  const owners = record(record(object).metadata).ownerReferences;
  return (Array.isArray(owners) ? owners : []).map((owner) => {
    const fields = record(owner);
    const apiVersion = written(fields.apiVersion);
    const [group = '', version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
    return { group, version: text(version), kind: written(fields.kind), name: written(fields.name) };
  });
}

/** The owner references of `object` of this kind in this API group (any version), once a name. */
export function ownersOf(object: unknown, id: { group: string; kind: string }): { name: string; version: string | undefined }[] {
  const found: { name: string; version: string | undefined }[] = [];
  for (const owner of ownerReferences(object)) {
    if (owner.kind !== id.kind || owner.group !== id.group || owner.name === '') continue;
    if (!found.some((entry) => entry.name === owner.name)) found.push({ name: owner.name, version: owner.version });
  }
  return found;
}

export function hasOwners(object: unknown): boolean {
  return ownerReferences(object).length > 0;
}
