// A real cgroup with a memory limit, for tests that must see what node does inside a container:
// node reads its limit through libuv (uv_get_constrained_memory), from the cgroup of the process,
// as it does in a pod. cgroup v2 where the memory controller is enabled for the root's children,
// else v1's memory hierarchy. Creating one needs write access to /sys/fs/cgroup (root, or a
// delegated subtree); without it the test fails saying so, rather than passing on no evidence.
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

const ROOT = '/sys/fs/cgroup';

export interface MemoryCgroup {
  dir: string;
  version: 1 | 2;
  /** `command args…` as a command line that joins this cgroup, then execs it (same pid). */
  wrap(command: string, args: readonly string[]): [string, string[]];
  /** Removes the cgroup; every process started in it must have exited. */
  remove(): Promise<void>;
}

function v2MemoryEnabled(): boolean {
  try {
    return readFileSync(path.join(ROOT, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes('memory');
  } catch {
    return false;
  }
}

export async function createMemoryCgroup(name: string, limitBytes: number): Promise<MemoryCgroup> {
  const unique = `${name}-${process.pid}-${Date.now()}`;
  const [dir, limitFile, version] = v2MemoryEnabled()
    ? [path.join(ROOT, unique), 'memory.max', 2 as const]
    : [path.join(ROOT, 'memory', unique), 'memory.limit_in_bytes', 1 as const];
  if (version === 1 && !existsSync(path.join(ROOT, 'memory'))) {
    throw new Error(`no cgroup memory controller: neither ${ROOT}/cgroup.subtree_control lists memory nor ${ROOT}/memory exists`);
  }
  try {
    await mkdir(dir);
    await writeFile(path.join(dir, limitFile), String(limitBytes));
  } catch (error) {
    throw new Error(
      `cannot create a memory-limited cgroup at ${dir} (this test needs write access to ${ROOT}, e.g. root): ${String(error)}`,
    );
  }
  return {
    dir,
    version,
    wrap: (command, args) => ['/bin/sh', ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', dir, command, ...args]],
    remove: () => rmdir(dir),
  };
}
