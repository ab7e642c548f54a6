// Open sockets of this process, counted from /proc/self/fd: what a test compares before and
// after work that must close every connection it opened.
import { readdirSync, readlinkSync } from 'node:fs';

export function openSockets(): number {
  let count = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith('socket:')) count += 1;
    } catch {
      // Closed while listing.
    }
  }
  return count;
}
