// What etcd 3.6 added to maintenance Status that etcd3 1.1.2's rpc.proto does not declare, so its
// decoder drops it: field 11 `storageVersion` (string) and field 12 `dbSizeQuota` (int64, the
// member's own --quota-backend-bytes), per etcd's api/etcdserverpb/rpc.proto (v3.6.0,
// "Add quota to endpoint status response", etcd PR 17877). Read from the response bytes beside
// etcd3's own decoding; 3.4 and 3.5 members never send them. Pure.

export interface StatusExtras {
  /** The member's backend quota in bytes, when it reports one (etcd 3.6+); 0 is "not reported". */
  dbSizeQuotaBytes?: number;
  /** The storage version of the member's db file (etcd 3.6+). */
  storageVersion?: string;
}

const STORAGE_VERSION_FIELD = 11;
const DB_SIZE_QUOTA_FIELD = 12;

/** Reads a base-128 varint at `offset`; null when the bytes end first or it runs past 10 bytes. */
function varint(bytes: Uint8Array, offset: number): { value: bigint; next: number } | null {
  let value = 0n;
  for (let index = 0; index < 10; index++) {
    const byte = bytes[offset + index];
    if (byte === undefined) return null;
    value |= BigInt(byte & 0x7f) << BigInt(7 * index);
    if ((byte & 0x80) === 0) return { value, next: offset + index + 1 };
  }
  return null;
}

/** The 3.6 fields of a StatusResponse's wire bytes; {} for anything malformed or older. */
export function statusExtras(bytes: Uint8Array): StatusExtras {
  const extras: StatusExtras = {};
  let offset = 0;
  while (offset < bytes.length) {
    const tag = varint(bytes, offset);
    if (tag === null) return extras;
    const field = Number(tag.value >> 3n);
    const wireType = Number(tag.value & 7n);
    offset = tag.next;
    if (wireType === 0) {
      const read = varint(bytes, offset);
      if (read === null) return extras;
      offset = read.next;
      // int64 is two's complement on the wire: a negative or absurd quota is not a quota.
      if (field === DB_SIZE_QUOTA_FIELD && read.value > 0n && read.value <= BigInt(Number.MAX_SAFE_INTEGER)) {
        extras.dbSizeQuotaBytes = Number(read.value);
      }
    } else if (wireType === 2) {
      const length = varint(bytes, offset);
      if (length === null || length.next + Number(length.value) > bytes.length) return extras;
      const end = length.next + Number(length.value);
      if (field === STORAGE_VERSION_FIELD && end > length.next) {
        extras.storageVersion = Buffer.from(bytes.subarray(length.next, end))
          .toString('utf8')
          .replace(/[^\x20-\x7e]/g, '?')
          .slice(0, 32);
      }
      offset = end;
    } else if (wireType === 1) {
      offset += 8;
    } else if (wireType === 5) {
      offset += 4;
    } else {
      // Groups (3, 4) are not in etcd's API; anything else means we misread: stop.
      return extras;
    }
  }
  return extras;
}
