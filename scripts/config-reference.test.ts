// The generated configuration reference: docs/configuration.md is current, --check and --write behave, and
// every schema key is described.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { GENERIC_DESCRIPTION, configReferenceRows, renderConfigReference } from './config-reference.js';
import { makeTempDir, removeTempDirs, ROOT, run, TSX } from '../test/harness/manifests.js';

afterAll(removeTempDirs);

describe('configuration reference', () => {
  it('docs/configuration.md is current: `tsx scripts/config-reference.ts --check docs/configuration.md` exits 0', async () => {
    const result = await run(TSX, ['scripts/config-reference.ts', '--check', 'docs/configuration.md']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('--check exits 1 on a stale copy, naming the file and the fix, and 2 without the markers', async () => {
    const dir = makeTempDir();
    const readme = readFileSync(path.join(ROOT, 'docs/configuration.md'), 'utf8');
    const stale = path.join(dir, 'stale.md');
    writeFileSync(stale, readme.replace('| `maxAgeSeconds` |', '| `maxAgeSecondz` |'));
    expect(readFileSync(stale, 'utf8')).not.toBe(readme);
    const staleResult = await run(TSX, ['scripts/config-reference.ts', '--check', stale]);
    expect(staleResult.code).toBe(1);
    expect(staleResult.stderr).toContain(stale);
    expect(staleResult.stderr).toContain('--write');
    const unmarked = path.join(dir, 'unmarked.md');
    writeFileSync(unmarked, '# nothing here\n');
    const unmarkedResult = await run(TSX, ['scripts/config-reference.ts', '--check', unmarked]);
    expect(unmarkedResult.code).toBe(2);
    expect(unmarkedResult.stderr).toContain('config-reference:start');
  });

  it('--write brings a stale section up to date and keeps the rest of the document', async () => {
    const dir = makeTempDir();
    const file = path.join(dir, 'doc.md');
    writeFileSync(file, '# Title\n\nbefore\n<!-- config-reference:start -->\nold\n<!-- config-reference:end -->\nafter\n');
    const result = await run(TSX, ['scripts/config-reference.ts', '--write', file]);
    expect(result.code, result.stderr).toBe(0);
    const written = readFileSync(file, 'utf8');
    expect(written).toContain(renderConfigReference());
    expect(written.startsWith('# Title\n\nbefore\n')).toBe(true);
    expect(written.endsWith('<!-- config-reference:end -->\nafter\n')).toBe(true);
    expect((await run(TSX, ['scripts/config-reference.ts', '--check', file])).code).toBe(0);
  });

  it('lists every schema key with a real description and a default or required/optional', () => {
    const rows = configReferenceRows();
    expect(rows.length).toBeGreaterThan(10);
    expect(rows.filter((row) => row.description === GENERIC_DESCRIPTION).map((row) => row.path)).toEqual([]);
    expect(new Set(rows.map((row) => row.path)).size).toBe(rows.length);
    for (const row of rows) expect(row.default, row.path).toMatch(/^(required|optional|`.*`)$/);
    const timeout = rows.find((row) => row.path === 'targets[].timeout');
    expect(timeout?.type).toMatch(/^duration/);
    expect(timeout?.default).toBe('`"2s"`');
  });

  it("issue 27: docs/configuration.md states the contract's decision rule (Decision, step 3) word for word", () => {
    const step3 =
      '3. An allow rests on what etcd says now: the change is judged on an evaluation of its target that ' +
      'started at most `decisionMaxAgeMs` (default 1000) before the request arrived; otherwise the ' +
      "webhook evaluates inline within the apiserver's remaining budget (leave ≥ 1 s), sharing an " +
      'in-flight evaluation only if it started within that bound. Only where no live evaluation can ' +
      'run (no budget, overload, or a target declared `decision: cached`) may the cached evaluation ' +
      'decide, within maxAgeSeconds, and then the answer warns with its age; no evaluation, or one ' +
      'older than maxAgeSeconds → deny: "no fresh etcd evaluation for <target> (age 95s, max 60s)". ' +
      "Every live evaluation is stored. Every decision's audit annotations carry its evidence age.";
    const doc = readFileSync(path.join(ROOT, 'docs/configuration.md'), 'utf8');
    const quoted = doc
      .split('\n')
      .filter((line) => line.startsWith('>'))
      .map((line) => line.slice(1).trim())
      .join(' ');
    expect(quoted).toContain(step3);
  });
});
