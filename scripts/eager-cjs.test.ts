// The CLI build rewrites the etcd chunk's CommonJS wrappers into parenthesized function
// expressions (scripts/eager-cjs.mjs) so V8 compiles them with the chunk and Node's compile cache
// keeps them. The rewrite must leave the bundle's behaviour alone, and leave a chunk it does not
// recognise exactly as it was.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs build script without type declarations
import { eagerCommonJsChunk, eagerCommonJsWrappers } from './eager-cjs.mjs';

type Rewrite = { source: string; count: number; skipped?: string };
const rewrite = eagerCommonJsWrappers as (source: string) => Rewrite;
const rewriteChecked = eagerCommonJsChunk as (source: string) => Promise<Rewrite>;

/** Two CommonJS modules (one requiring the other, one with a multi-line template) bundled as ESM by esbuild. */
const MODULES: Record<string, string> = {
  'a.cjs':
    'const b = require("./b.cjs");\nconst c = require("./c.mjs");\nexports.greet = (name) => `${b.prefix}, ${name}${c.suffix}`;\nexports.self = function () { return this === exports; };\n',
  // An ES module required from CommonJS: esbuild wraps it in a lazy `__esm` initializer.
  'c.mjs': 'export const suffix = [1, 2].map((n) => `${n}`).length === 2 ? "!" : "?";\n',
  'b.cjs': 'module.exports = { prefix: "hello", text: `line one\n  }\nline three` };\n',
  'entry.mjs':
    'import a from "./a.cjs";\nimport b from "./b.cjs";\nexport const greeting = a.greet("etcd");\nexport const text = b.text;\nexport const self = a.self();\n',
};

describe('eager CommonJS wrappers', () => {
  let dir: string;
  let bundled: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'eager-cjs-'));
    for (const [name, source] of Object.entries(MODULES)) await writeFile(path.join(dir, name), source);
    const result = await build({
      entryPoints: [path.join(dir, 'entry.mjs')],
      bundle: true,
      format: 'esm',
      platform: 'node',
      write: false,
      logLevel: 'silent',
    });
    bundled = result.outputFiles[0]?.text ?? '';
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function run(source: string): Promise<Record<string, unknown>> {
    const file = path.join(dir, `out-${Math.random().toString(36).slice(2)}.mjs`);
    await writeFile(file, source);
    return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  }

  it('rewrites every wrapper of an esbuild bundle (CommonJS and ES module initializers) into a parenthesized function, same exports', async () => {
    expect(bundled).toContain('= __esm({');
    const result = await rewriteChecked(bundled);
    expect(result.skipped).toBeUndefined();
    expect(result.count).toBe(3);
    expect(result.source.match(/": \(function \(/g)).toHaveLength(3);
    expect(result.source).not.toMatch(/^ {2}"[^"]+"\([^)]*\) \{$/m);
    const [rewritten, original] = [{ ...(await run(result.source)) }, { ...(await run(bundled)) }];
    expect(rewritten).toEqual(original);
    expect(rewritten).toEqual({ greeting: 'hello, etcd!', text: 'line one\n  }\nline three', self: true });
  });

  it.each([
    ['no CommonJS wrapper', 'export const x = 1;\n'],
    ['a wrapper esbuild did not print that way', 'var require_x = __commonJS({\n  "x.js": function (exports) {\n  }\n});\n'],
    ['a wrapper that never closes', 'var require_x = __commonJS({\n  "x.js"(exports) {\n    exports.x = 1;\n'],
    ['an ES module initializer esbuild did not print that way', 'var init_x = __esm({\n  "x.mjs": () => {\n  }\n});\n'],
  ])('leaves a chunk unchanged when it has %s', async (_, source) => {
    expect(rewrite(source)).toEqual({ source, count: 0 });
    expect((await rewriteChecked(source)).source).toBe(source);
  });
});
