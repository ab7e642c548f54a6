// The etcd test harness cleans up after a test process that is ended by SIGINT or SIGTERM, not
// only after one that exits: its members are killed and its temp dir removed.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitFor } from './wait.js';

const HOLDER = path.resolve(import.meta.dirname, 'hold-etcd-cluster.ts');

/** Running, not a zombie waiting for PID 1 to reap it (a zombie still passes kill -0). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

describe('etcd test harness teardown', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)(
    'kills the members and removes the temp dir when the test process gets %s',
    async (signal) => {
      // tsx as a loader, not its CLI: the signal must reach the process that holds the cluster.
      const child = spawn(process.execPath, ['--import', 'tsx', HOLDER], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, how) => resolve(how)));
      try {
        await waitFor(`the child to start its cluster (stderr: ${stderr})`, 30_000, () => stdout.includes('\n'));
        const { pids, dir } = JSON.parse(stdout) as { pids: number[]; dir: string };
        expect(pids.length).toBe(1);
        expect(pids.every(running)).toBe(true);
        expect(existsSync(dir)).toBe(true);

        child.kill(signal);
        expect(await exited).toBe(signal);
        await waitFor(`etcd ${pids.join(', ')} to be gone after ${signal}`, 10_000, () => !pids.some(running));
        expect(existsSync(dir)).toBe(false);
      } finally {
        child.kill('SIGKILL');
      }
    },
    60_000,
  );
});
