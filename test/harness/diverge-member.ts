// A member whose data diverge from its peers': a value of its newest revision changed in its bbolt
// file while it was stopped (test/fixtures/bbolt-edit, bbolt as a library, built with the Go
// toolchain and the Go module proxy). Its peers keep the value written.
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { EtcdTestCluster, EtcdTestMember } from './etcd-cluster.js';

export async function divergeMember(cluster: EtcdTestCluster, index: number): Promise<EtcdTestMember> {
  const toolDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-bbolt-edit-'));
  try {
    const tool = path.join(toolDir, 'bbolt-edit');
    // go.sum pins the modules; the module proxy serves what the module cache lacks (a fresh
    // machine's etcd build does not fetch every version this tool names).
    await promisify(execFile)('go', ['build', '-o', tool, '.'], {
      cwd: path.join(import.meta.dirname, '../fixtures/bbolt-edit'),
      env: { ...process.env, GOFLAGS: '-mod=mod', GOTOOLCHAIN: 'local' },
      timeout: 150_000,
    });
    const changed = cluster.members[index];
    if (changed === undefined) throw new Error(`no member ${index}`);
    const put = await cluster.etcdctl(['put', 'hash/last', 'written-before-the-edit']);
    if (put.code !== 0) throw new Error(`put: ${put.stderr}`);
    // The member must hold the write before it stops: a serializable read on it sees its own store.
    let held = false;
    for (let attempt = 0; attempt < 100 && !held; attempt += 1) {
      const read = await cluster.etcdctl(['get', 'hash/last', '--consistency=s', '--print-value-only'], {
        endpoints: [changed.clientUrl],
      });
      held = read.stdout.trim() === 'written-before-the-edit';
    }
    if (!held) throw new Error(`member ${changed.name} never held the write`);
    await cluster.stop(index);
    const edited = await promisify(execFile)(tool, [path.join(changed.dataDir, 'member/snap/db')]);
    if (!edited.stdout.includes('changed the value at revision key')) throw new Error(`bbolt-edit: ${edited.stdout}`);
    await cluster.start(index);
    await cluster.waitHealthy();
    return changed;
  } finally {
    await rm(toolDir, { recursive: true, force: true });
  }
}
