// The unit suite's guard (test/harness/no-io.ts) must stop every way a test file can reach a
// process or a socket, including named ESM imports, which bind separately from the default export.
// Checked in a child process so the guard never patches this worker.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const REPO = path.resolve(import.meta.dirname, '../..');
const GUARD = path.join(REPO, 'test/harness/no-io.ts');

const PROBE = `
import childProcess, { execFile, spawn, execFileSync } from 'node:child_process';
import net, { connect, createConnection } from 'node:net';
import http from 'node:http';
await import(${JSON.stringify(GUARD)});
const attempts = {
  'named execFile': () => execFile('true'),
  'named spawn': () => spawn('true'),
  'named execFileSync': () => execFileSync('true'),
  'default exec': () => childProcess.exec('true'),
  'named net.connect': () => connect(1, '127.0.0.1'),
  'named createConnection': () => createConnection(1, '127.0.0.1'),
  'net.Socket connect': () => new net.Socket().connect(1, '127.0.0.1'),
  'http.request': () => http.request('http://127.0.0.1:1/').end(),
  'server listen': () => net.createServer().listen(0),
};
const result = {};
for (const [name, attempt] of Object.entries(attempts)) {
  try { attempt(); result[name] = 'allowed'; } catch (error) { result[name] = /a unit test may not/.test(error.message) ? 'refused' : 'other error'; }
}
console.log(JSON.stringify(result));
process.exit(0);
`;

describe('the unit suite guard', () => {
  it('refuses processes and sockets however the test file imported them', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', PROBE], {
      cwd: REPO,
      timeout: 30_000,
    });
    const result = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, string>;
    expect(Object.entries(result).filter(([, outcome]) => outcome !== 'refused')).toEqual([]);
    expect(Object.keys(result)).toHaveLength(9);
  });
});
