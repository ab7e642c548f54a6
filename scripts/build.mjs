// Builds the bundle the installed CLI and the image run: dist/cli/etcd-guard.mjs and its lazily
// loaded chunks (esbuild, ESM with code splitting), so `evaluate` loads etcd3 and gRPC only when
// it evaluates and the webhook's modules only for `webhook`. bin/etcd-guard.mjs runs it when it is
// newer than every source file, and the TypeScript through tsx otherwise.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { etcdGrpcDefinitionPlugin } from './etcd-grpc-plugin.mjs';
import { eagerCommonJsChunk } from './eager-cjs.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// --outdir DIR puts the build elsewhere (DIR/cli), e.g. into a rebuilt image layout.
const outdirFlag = process.argv.indexOf('--outdir');
const DIST_DIR = outdirFlag > 0 ? path.resolve(process.argv[outdirFlag + 1] ?? '') : path.join(ROOT, 'dist');
const OUT_DIR = path.join(DIST_DIR, 'cli');

// `prepare` (run by `npm ci`/`npm install` in a checkout) passes --if-possible: an install without
// esbuild (e.g. --omit=dev) then keeps working, and bin/etcd-guard.mjs runs the sources instead.
let build;
try {
  ({ build } = await import('esbuild'));
} catch (error) {
  if (!process.argv.includes('--if-possible')) throw error;
  console.log('etcd-guard: esbuild is not installed; no bundle built (the CLI runs the sources through tsx)');
  process.exit(0);
}

rmSync(OUT_DIR, { recursive: true, force: true });
const started = Date.now();
const result = await build({
  absWorkingDir: ROOT,
  entryPoints: { 'etcd-guard': 'functions/entrypoints/cli.ts' },
  outdir: OUT_DIR,
  outExtension: { '.js': '.mjs' },
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  // Kept as a package: loaded only by the Kubernetes store and inventory paths, and it loads
  // files of its own at run time.
  external: ['@kubernetes/client-node'],
  // Bundled CommonJS code expects require and __dirname. etcd3's .proto files are not read at run
  // time: the plugin turns them into its gRPC definition at build time.
  banner: {
    js: [
      "import { createRequire as __etcdGuardCreateRequire } from 'node:module';",
      "import { dirname as __etcdGuardDirname } from 'node:path';",
      "import { fileURLToPath as __etcdGuardFileURLToPath } from 'node:url';",
      'const require = __etcdGuardCreateRequire(import.meta.url);',
      'const __filename = __etcdGuardFileURLToPath(import.meta.url);',
      'const __dirname = __etcdGuardDirname(__filename);',
    ].join('\n'),
  },
  plugins: [etcdGrpcDefinitionPlugin(ROOT)],
  logLevel: 'warning',
  metafile: true,
});
// The etcd chunk's CommonJS modules (grpc-js, protobufjs, etcd3) compiled with the chunk, so the
// compile cache holds them (eager-cjs.mjs). Only that chunk: every process that loads it runs
// nearly all of them, while the webhook's chunk bundles modules it may never load (iconv-lite's
// encodings), whose eager bytecode would only cost memory.
let eager = 0;
for (const [output, { inputs }] of Object.entries(result.metafile.outputs)) {
  if (!Object.keys(inputs).some((input) => input.includes('node_modules/@grpc/grpc-js/'))) continue;
  const file = path.join(ROOT, output);
  const chunk = await eagerCommonJsChunk(readFileSync(file, 'utf8'));
  if (chunk.skipped !== undefined) console.warn(`etcd-guard: ${output}: CommonJS modules left lazy (${chunk.skipped})`);
  if (chunk.count > 0) writeFileSync(file, chunk.source);
  eager += chunk.count;
}
const bytes = Object.values(result.metafile.outputs).reduce((sum, output) => sum + output.bytes, 0);
// Written last: its presence says the build finished.
writeFileSync(path.join(OUT_DIR, 'BUILD'), `${new Date().toISOString()}\n`);
console.log(
  `built ${OUT_DIR}: ${Object.keys(result.metafile.outputs).length} files, ${(bytes / 1024).toFixed(0)} KiB (${eager} CommonJS modules compiled eagerly) in ${(Date.now() - started).toFixed(0)} ms`,
);
