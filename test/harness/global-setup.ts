// Prints which etcd the real-etcd suites run against, once per vitest run, so a CI log says it;
// and after the run, kills etcd members a crashed worker left behind.
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { etcdBinaries, etcdVersion } from './etcd-cluster.js';

export default async function setup(): Promise<() => void> {
  const { etcd } = etcdBinaries();
  try {
    console.log(`etcd under test: ${await etcdVersion(etcd)} (${etcd})`);
  } catch (error) {
    // Suites without etcd still run; the ones that need it fail naming the binary.
    console.log(`etcd under test: none usable (${error instanceof Error ? error.message : String(error)})`);
  }
  return killOrphanedMembers;
}

/**
 * An etcd of this harness: its data dir lies in a temp dir the harness named etcd-guard-*; a
 * kube-apiserver of test/harness/kube-apiserver.ts: its audit log does.
 */
const HARNESS_DATA_DIR = new RegExp(`^--(?:data-dir|audit-log-path)=(${escapeRegExp(path.join(tmpdir(), 'etcd-guard-'))}[^/]+)/`);

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * A worker that dies (crash, OOM) runs none of the harness's exit handlers, so its members are
 * re-parented to PID 1 and keep running. After every worker has ended, a harness member whose
 * parent is PID 1 can only be such an orphan; a member of another live run still has its worker
 * as parent and is left alone. Each kill is printed so the log shows the crash it came from.
 */
function killOrphanedMembers(): void {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      const dataDir = args.map((arg) => HARNESS_DATA_DIR.exec(arg)?.[1]).find((dir) => dir !== undefined);
      if (dataDir === undefined) continue;
      // Field 4 of /proc/PID/stat is the parent pid; the command name before it may hold spaces.
      const parentPid = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.split(' ')[1];
      if (parentPid !== '1') continue;
      process.kill(Number(entry), 'SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
      console.log(`etcd harness: killed orphaned member pid ${entry} (${dataDir}): a test worker died without cleaning up`);
    } catch {
      // The process ended while we looked, or is not ours to read: nothing to clean.
    }
  }
}
