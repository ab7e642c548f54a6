// Byte counts as people read them. etcd's sizes and quotas are powers of two, so the units are
// binary (KiB, MiB, GiB) and say so: "2.0 GiB" is the quota etcd calls 2 GiB, not 2 GB.

const KIB = 1024;
const MIB = 1024 * KIB;
const GIB = 1024 * MIB;

/** "512 B", "20 KiB", "85.0 MiB", "2.0 GiB". */
export function formatBytes(bytes: number): string {
  if (bytes >= GIB) return `${(bytes / GIB).toFixed(1)} GiB`;
  if (bytes >= MIB) return `${(bytes / MIB).toFixed(1)} MiB`;
  if (bytes >= KIB) return `${(bytes / KIB).toFixed(0)} KiB`;
  return `${bytes} B`;
}
