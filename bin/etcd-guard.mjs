#!/usr/bin/env node
// Starts the CLI in one of two layouts, decided by what is on disk, never by a flag that could
// outlive an edit:
// - a source checkout (functions/cli.ts next to bin/): the TypeScript runs through tsx, so
//   `npx etcd-guard` works right after `npm ci` and always runs the sources as they are now;
//   a dist/ left over from an earlier `npm run build` is never picked up by mistake.
// - the image (Dockerfile): only the compiled dist/ is shipped, run by plain node. No tsx
//   loader in the process: ~30 MB less resident and no compile at start.
import { existsSync } from 'node:fs';
import { URL } from 'node:url';

const sourceEntry = new URL('../functions/cli.ts', import.meta.url);
const compiledEntry = new URL('../dist/functions/cli.js', import.meta.url);

let main;
if (existsSync(sourceEntry)) {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import(sourceEntry.href));
} else if (existsSync(compiledEntry)) {
  ({ main } = await import(compiledEntry.href));
} else {
  process.stderr.write(
    `etcd-guard: found neither ${sourceEntry.pathname} (source checkout) nor ${compiledEntry.pathname} (run \`npm run build\`)\n`,
  );
  process.exit(2);
}
const code = await main(process.argv.slice(2), process.env, {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
});
process.exitCode = code;
// A gRPC channel to a hung member can linger past the evaluation's deadline; the answer is
// already decided, so flush stdout/stderr and leave instead of waiting for it.
await Promise.all([
  new Promise((resolve) => process.stdout.write('', resolve)),
  new Promise((resolve) => process.stderr.write('', resolve)),
]);
process.exit(code);
