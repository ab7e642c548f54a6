// The CLI build loads Node's built-ins the cheap way (scripts/builtin-require-plugin.mjs,
// scripts/grpc-builtins-plugin.mjs): our ES module imports of built-ins become requires (no ES
// module facade reading every export, so no fs streams loaded for nothing), grpc-js's `net`
// answers isIPv6/isIP without Node's IPv6 regular expression for colon-free strings, and its
// `zlib` loads at first use. Each bundle runs in a fresh node, whose process.moduleLoadList says
// which of Node's modules were loaded; the answers must be Node's own.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs build script without type declarations
import { builtinName, builtinRequirePlugin } from './builtin-require-plugin.mjs';
// @ts-expect-error: a plain .mjs build script without type declarations
import { grpcBuiltinsPlugin } from './grpc-builtins-plugin.mjs';

const run = promisify(execFile);
const BANNER = "import { createRequire as __cr } from 'node:module';\nconst require = __cr(import.meta.url);";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'builtin-plugins-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Bundles `files` (entry.mjs first) with `plugins` as the CLI build does, runs it in a fresh node, and returns its JSON. */
async function bundleAndRun(files: Record<string, string>, plugins: unknown[]): Promise<Record<string, unknown>> {
  const base = await mkdtemp(path.join(dir, 'case-'));
  for (const [name, source] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(base, name)), { recursive: true });
    await writeFile(path.join(base, name), source);
  }
  const out = path.join(base, 'out.mjs');
  await build({
    entryPoints: [path.join(base, 'entry.mjs')],
    outfile: out,
    bundle: true,
    format: 'esm',
    platform: 'node',
    banner: { js: BANNER },
    plugins: plugins as never[],
    logLevel: 'silent',
  });
  const { stdout } = await run(process.execPath, [out]);
  return JSON.parse(stdout) as Record<string, unknown>;
}

const LOADED = (names: string[]) =>
  `Object.fromEntries(${JSON.stringify(names)}.map((n) => [n, process.moduleLoadList.includes('NativeModule ' + n)]))`;

describe('built-ins imported by our ES modules (builtin-require-plugin)', () => {
  const files = {
    'entry.mjs': [
      "import { readFileSync } from 'node:fs';",
      "import fs from 'fs';",
      "import * as path from 'node:path';",
      "import { types } from 'node:util';",
      `const loaded = ${LOADED(['internal/fs/streams', 'internal/fs/promises'])};`,
      'console.log(JSON.stringify({ loaded, read: readFileSync(process.execPath).length > 0, same: fs.readFileSync === readFileSync,',
      "  join: path.join('a', 'b'), isDate: types.isDate(new Date()), promises: typeof fs.promises.readFile }));",
    ].join('\n'),
  };

  it.each([
    ['with the plugin: no facade, so neither the fs streams nor fs/promises load at import', [builtinRequirePlugin()], false],
    ['without it (the control: the facade loads them)', [], true],
  ])('%s', async (_case, plugins, facadeLoads) => {
    const result = await bundleAndRun(files, plugins);
    expect(result).toEqual({
      loaded: { 'internal/fs/streams': facadeLoads, 'internal/fs/promises': facadeLoads },
      read: true,
      same: true,
      join: path.join('a', 'b'),
      isDate: true,
      promises: 'function',
    });
  });

  it.each([
    ['node:fs', 'fs'],
    ['fs/promises', 'fs/promises'],
    ['node:timers/promises', 'timers/promises'],
    ['zod', null],
    ['./fs', null],
    ['node:nothing', null],
  ])('%s is the built-in %s', (specifier, expected) => {
    expect(builtinName(specifier)).toBe(expected);
  });
});

describe("grpc-js's net and zlib (grpc-builtins-plugin)", () => {
  const INPUTS = [
    '127.0.0.1',
    '::',
    '::1',
    'fe80::1%eth0',
    '1:2:3:4:5:6:7:8',
    '[::1]',
    'x:y',
    'etcd-0.example',
    '',
    '256.1.1.1',
    '::ffff:127.0.0.1',
    7,
    null,
  ];
  const grpcModule = [
    "const net = require('net');",
    "const zlib = require('zlib');",
    `const inputs = ${JSON.stringify(INPUTS)};`,
    'exports.answers = inputs.map((s) => [net.isIPv6(s), net.isIP(s), net.isIPv4(s)]);',
    `exports.zlibBefore = ${LOADED(['zlib'])}.zlib;`,
    "exports.gzipped = zlib.gunzipSync(zlib.gzipSync('etcd')).toString();",
    `exports.zlibAfter = ${LOADED(['zlib'])}.zlib;`,
    'exports.socket = typeof net.Socket;',
  ].join('\n');
  const files = {
    'entry.mjs': [
      "import grpc from './node_modules/@grpc/grpc-js/build/src/index.js';",
      "import net from 'node:net';",
      `const inputs = ${JSON.stringify(INPUTS)};`,
      'const node = inputs.map((s) => [net.isIPv6(s), net.isIP(s), net.isIPv4(s)]);',
      'console.log(JSON.stringify({ ...grpc, node }));',
    ].join('\n'),
    'node_modules/@grpc/grpc-js/build/src/index.js': grpcModule,
  };

  it('answers as Node does for every input, and loads zlib only when grpc-js first uses it', async () => {
    const result = await bundleAndRun(files, [grpcBuiltinsPlugin()]);
    expect(result.answers).toEqual(result.node);
    expect(result).toMatchObject({ zlibBefore: false, gzipped: 'etcd', zlibAfter: true, socket: 'function' });
  });

  it('changes nothing outside grpc-js: the same module elsewhere gets Node’s own zlib at once', async () => {
    const result = await bundleAndRun(
      {
        'entry.mjs': files['entry.mjs'].replace('./node_modules/@grpc/grpc-js/build/src/index.js', './other.js'),
        'other.js': grpcModule,
      },
      [grpcBuiltinsPlugin()],
    );
    expect(result).toMatchObject({ zlibBefore: true, zlibAfter: true });
    expect(result.answers).toEqual(result.node);
  });
});
