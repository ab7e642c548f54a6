#!/usr/bin/env node
// Starts the CLI from what is on disk, never from a flag that could outlive an edit:
// - the bundle (dist/cli/etcd-guard.mjs, built by `npm run build`, which `npm ci` runs as the
//   `prepare` step): plain node, lazily loaded chunks, the fast start. In a source checkout it is
//   used only while it is newer than every source file, so an edit is never hidden by it.
// - otherwise, in a source checkout (functions/entrypoints/cli.ts next to bin/): the TypeScript through
//   tsx (a dev dependency, as esbuild is: `npm ci` installs both).
// - the image and other layouts without sources: the bundle, or tsc's dist/functions/entrypoints/cli.js.
import { createRequire } from 'node:module';

// Built-ins through require: an ES module import of one makes Node build a facade that reads all
// its exports, and node:fs's getters then load fs/promises and the fs streams.
const require = createRequire(import.meta.url);
const { existsSync, readdirSync, statSync } = require('node:fs');
const module = require('node:module');
const { URL, fileURLToPath } = require('node:url');

// No node flags are set here: node takes them only at start, and the image's ENTRYPOINT gives
// them (Dockerfile; docs/operations.md, "Memory"), so nothing re-executes itself.

// Node 22.1+ keeps V8's compiled code of every module loaded after this call on disk (in
// NODE_COMPILE_CACHE, else <tmpdir>/node-compile-cache), so a later start skips compiling the
// bundle's chunks (see docs/operations.md for the measured start-up). Called before any chunk
// loads; absent on older Node, where it is a no-op. A cache that cannot be written is skipped by
// Node itself, never an error; NODE_DISABLE_COMPILE_CACHE=1 turns it off.
module.enableCompileCache?.();

const root = new URL('../', import.meta.url);
const sourceEntry = new URL('functions/entrypoints/cli.ts', root);
const bundleEntry = new URL('dist/cli/etcd-guard.mjs', root);
const bundleStamp = new URL('dist/cli/BUILD', root);
const compiledEntry = new URL('dist/functions/entrypoints/cli.js', root);
// What the bundle is built from: a newer file here makes it stale.
const BUNDLED_SOURCES = ['functions', 'webhook', 'package-lock.json'];

function mtimeMs(url) {
  try {
    return statSync(url).mtimeMs;
  } catch {
    return null;
  }
}

/** The newest modification time under `path` (a file or a directory tree). */
function newestMtimeMs(path) {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (stat === undefined) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const entry of readdirSync(path, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(`${entry.parentPath ?? entry.path}/${entry.name}`).mtimeMs);
  }
  return newest;
}

function bundleIsCurrent() {
  const built = mtimeMs(bundleStamp);
  if (built === null || !existsSync(bundleEntry)) return false;
  if (!existsSync(sourceEntry)) return true;
  return BUNDLED_SOURCES.every((source) => newestMtimeMs(fileURLToPath(new URL(source, root))) <= built);
}

let main;
if (bundleIsCurrent()) {
  ({ main } = await import(bundleEntry.href));
} else if (existsSync(sourceEntry)) {
  // tsx is a dev dependency: an install with --omit=dev has neither it nor esbuild, so no bundle.
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch {
    process.stderr.write(
      'etcd-guard: this source checkout has no current bundle and no tsx to run the sources ' +
        '(installed with --omit=dev?): run `npm ci`, or `npm run build` where esbuild is installed\n',
    );
    process.exit(2);
  }
  register();
  ({ main } = await import(sourceEntry.href));
} else if (existsSync(compiledEntry)) {
  ({ main } = await import(compiledEntry.href));
} else {
  process.stderr.write(
    `etcd-guard: found neither ${fileURLToPath(bundleEntry)} nor ${fileURLToPath(sourceEntry)} (run \`npm run build\`)\n`,
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
