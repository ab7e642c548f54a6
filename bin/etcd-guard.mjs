#!/usr/bin/env node
// Runs the TypeScript CLI directly through tsx, so `npx etcd-guard` works right after `npm ci`
// without a build step.
import { register } from 'tsx/esm/api';

// grpc-js passes an IP address as the TLS server name, which makes Node print DEP0123 on stderr:
// noise for CLI users, and nothing they can act on.
process.noDeprecation = true;

register();
const { main } = await import('../functions/cli.ts');
// startedAtMs 0 is process start on the performance clock: --timeout covers start-up too.
const code = await main(process.argv.slice(2), process.env, {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  startedAtMs: 0,
});
process.exitCode = code;
// A gRPC channel to a hung member can linger past the evaluation's deadline; the answer is
// already decided, so flush stdout/stderr and leave instead of waiting for it.
await Promise.all([
  new Promise((resolve) => process.stdout.write('', resolve)),
  new Promise((resolve) => process.stderr.write('', resolve)),
]);
process.exit(code);
