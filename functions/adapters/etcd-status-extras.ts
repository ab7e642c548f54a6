// What etcd 3.6 added to maintenance Status that etcd3 1.1.2's rpc.proto does not declare, so its
// decoder drops it: field 11 `storageVersion` (string), field 12 `dbSizeQuota` (int64, the
// member's own --quota-backend-bytes) and field 13 `downgradeInfo` (message DowngradeInfo: bool
// `enabled` = 1, string `targetVersion` = 2), per etcd's api/etcdserverpb/rpc.proto (v3.6.0;
// quota from etcd PR 17877). Read from the response bytes beside etcd3's own decoding; 3.4 and 3.5
// members never send them. A 3.6 member always sends downgradeInfo (empty while no downgrade is
// enabled). Pure.

export interface StatusExtras {
  /** The member's backend quota in bytes, when it reports one (etcd 3.6+); 0 is "not reported". */
  dbSizeQuotaBytes?: number;
  /** The storage version of the member's db file (etcd 3.6+). */
  storageVersion?: string;
  /** The cluster's downgrade as this member knows it (etcd 3.6+): `etcdctl downgrade enable` sets it. */
  downgrade?: { enabled: boolean; targetVersion: string };
}

const STORAGE_VERSION_FIELD = 11;
const DB_SIZE_QUOTA_FIELD = 12;
const DOWNGRADE_INFO_FIELD = 13;
const DOWNGRADE_ENABLED_FIELD = 1;
const DOWNGRADE_TARGET_FIELD = 2;

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

/** A version string as shown: printable ASCII only, and short (it comes from the wire). */
function shownText(bytes: Uint8Array): string {
  return Buffer.from(bytes)
    .toString('utf8')
    .replace(/[^\x20-\x7e]/g, '?')
    .slice(0, 32);
}

type Field = { field: number; varint: bigint } | { field: number; bytes: Uint8Array };

/**
 * Calls `visit` for each varint and length-delimited field of a message's bytes, in order; stops
 * at the first malformed field (what came before it stays read).
 */
function eachField(bytes: Uint8Array, visit: (field: Field) => void): void {
  let offset = 0;
  while (offset < bytes.length) {
    const tag = varint(bytes, offset);
    if (tag === null) return;
    const field = Number(tag.value >> 3n);
    const wireType = Number(tag.value & 7n);
    offset = tag.next;
    if (wireType === 0) {
      const read = varint(bytes, offset);
      if (read === null) return;
      offset = read.next;
      visit({ field, varint: read.value });
    } else if (wireType === 2) {
      const length = varint(bytes, offset);
      if (length === null || length.next + Number(length.value) > bytes.length) return;
      const end = length.next + Number(length.value);
      visit({ field, bytes: bytes.subarray(length.next, end) });
      offset = end;
    } else if (wireType === 1) {
      offset += 8;
    } else if (wireType === 5) {
      offset += 4;
    } else {
      // Groups (3, 4) are not in etcd's API; anything else means we misread: stop.
      return;
    }
  }
}

function downgradeInfo(bytes: Uint8Array): NonNullable<StatusExtras['downgrade']> {
  const info = { enabled: false, targetVersion: '' };
  eachField(bytes, (each) => {
    if (each.field === DOWNGRADE_ENABLED_FIELD && 'varint' in each) info.enabled = each.varint !== 0n;
    if (each.field === DOWNGRADE_TARGET_FIELD && 'bytes' in each) info.targetVersion = shownText(each.bytes);
  });
  return info;
}

/** The 3.6 fields of a StatusResponse's wire bytes; {} for anything malformed or older. */
export function statusExtras(bytes: Uint8Array): StatusExtras {
  const extras: StatusExtras = {};
  eachField(bytes, (each) => {
    if ('varint' in each) {
      // int64 is two's complement on the wire: a negative or absurd quota is not a quota.
      if (each.field === DB_SIZE_QUOTA_FIELD && each.varint > 0n && each.varint <= BigInt(Number.MAX_SAFE_INTEGER)) {
        extras.dbSizeQuotaBytes = Number(each.varint);
      }
    } else if (each.field === STORAGE_VERSION_FIELD && each.bytes.length > 0) {
      extras.storageVersion = shownText(each.bytes);
    } else if (each.field === DOWNGRADE_INFO_FIELD) {
      extras.downgrade = downgradeInfo(each.bytes);
    }
  });
  return extras;
}
