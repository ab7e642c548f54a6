// Setup of the unit suite (vitest.unit.config.ts): a unit test opens no socket and starts no
// process. Anything that tries fails at once, naming what it tried, so a file that needs the
// network or a child process cannot slip into `npm run test:unit`.
import childProcess from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
import net from 'node:net';

function forbid(what: string): never {
  throw new Error(`a unit test may not ${what}: move the test to the integration suite (npm test)`);
}

net.Socket.prototype.connect = function connect(): never {
  return forbid('open a socket');
};
net.Server.prototype.listen = function listen(): never {
  return forbid('listen on a socket');
};
for (const name of ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'] as const) {
  Object.defineProperty(childProcess, name, { value: () => forbid(`start a process (${name})`), configurable: true });
}
for (const name of ['connect', 'createConnection'] as const) {
  Object.defineProperty(net, name, { value: () => forbid(`open a socket (${name})`), configurable: true });
}
// `import { execFile } from 'node:child_process'` binds to the module's ESM exports, which keep the
// originals until they are synced with the patched CommonJS object.
syncBuiltinESMExports();
