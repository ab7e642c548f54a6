// The maps a newcomer follows (ARCHITECTURE.md, docs/testing.md) name files, folders and code that
// exist. Every file or folder a page names (in backticks, or in ARCHITECTURE.md's tree) must be in
// the repository, and every code name in backticks must occur as a word in its sources: a module
// moved or a function renamed fails here, naming the page and the reference. The tree lists every
// product module, so a new one fails here until it has its line.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const PAGES = ['ARCHITECTURE.md', 'docs/testing.md'];

const tracked = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
  cwd: ROOT,
  encoding: 'utf8',
})
  .split('\0')
  .filter((file) => file !== '' && existsSync(path.join(ROOT, file)));
const trackedSet = new Set(tracked);
const folders = new Set(
  tracked.flatMap((file) =>
    file
      .split('/')
      .slice(0, -1)
      .map((_, at, parts) => parts.slice(0, at + 1).join('/')),
  ),
);
const TOP = new Set([...folders].filter((folder) => !folder.includes('/')));
const FILE = /\.(ts|mjs|js|md|sh|json|ya?ml|env)$/;
/** Names in other projects' code that a page quotes. */
const OUTSIDE = new Set(['etcdmain.Main']);

/** A path exists as written from the root, or (a short form such as `checks/registry.ts`) at the end of one. */
function pathExists(reference: string): boolean {
  const bare = reference.replace(/\/$/, '');
  if (trackedSet.has(bare) || folders.has(bare)) return true;
  return tracked.some((file) => file.endsWith(`/${bare}`)) || [...folders].some((folder) => folder.endsWith(`/${bare}`));
}

/** Every word of the sources, for code names (not this file's: it names what does not exist). */
const SELF = path.relative(ROOT, import.meta.filename);
const SOURCES = tracked.filter((file) => /\.(ts|mjs|js)$/.test(file) && !file.startsWith('dist/') && file !== SELF);
const words = new Set(SOURCES.flatMap((file) => readFileSync(path.join(ROOT, file), 'utf8').match(/[A-Za-z_$][\w$]*/g) ?? []));

interface Reference {
  page: string;
  line: number;
  text: string;
}

/** Inline code spans outside fenced blocks, with their line. */
function codeSpans(page: string): Reference[] {
  const lines = readFileSync(path.join(ROOT, page), 'utf8').split('\n');
  const spans: Reference[] = [];
  let fenced = false;
  lines.forEach((line, index) => {
    if (/^\s*```/.test(line)) fenced = !fenced;
    if (fenced) return;
    for (const [, text] of line.matchAll(/`([^`]+)`/g)) spans.push({ page, line: index + 1, text: text ?? '' });
  });
  return spans;
}

/** A span that names a file or a folder of the repository (placeholders like `<kind>.ts` are not checked). */
function isPathReference(text: string): boolean {
  if (/[\s<>*…{}]/.test(text) || text.includes('://') || text.startsWith('/')) return false;
  if (FILE.test(text)) return true;
  return text.includes('/') && TOP.has(text.split('/')[0] ?? '');
}

/** A span that is a code name or a dotted chain of them (`OnDemandEvaluations.handle`, `call()`). */
function codeNames(text: string): string[] {
  const bare = text.replace(/\(\w*\)$/, '');
  if (OUTSIDE.has(bare)) return [];
  if (!/^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/.test(bare) || FILE.test(bare)) return [];
  return bare.split('.');
}

/** The files and folders of ARCHITECTURE.md's tree, each resolved against the folders above it. */
function treeEntries(page: string): Reference[] {
  const lines = readFileSync(path.join(ROOT, page), 'utf8').split('\n');
  const start = lines.findIndex((line) => line === '## The tree');
  const open = lines.findIndex((line, at) => at > start && line.startsWith('```'));
  const close = lines.findIndex((line, at) => at > open && line.startsWith('```'));
  const entries: Reference[] = [];
  const parents: { indent: number; folder: string }[] = [];
  for (let at = open + 1; at < close; at++) {
    const line = lines[at] ?? '';
    const indent = line.length - line.trimStart().length;
    const [names = '', description = ''] = line.trim().split(/\s{2,}/);
    while (parents.length > 0 && (parents.at(-1)?.indent ?? 0) >= indent) parents.pop();
    const base = parents.at(-1)?.folder ?? '';
    for (const name of names.split(/,\s*/)) {
      entries.push({ page, line: at + 1, text: `${base}${name}` });
      if (name.endsWith('/')) parents.push({ indent, folder: `${base}${name}` });
    }
    // File names in the description column are checked too.
    for (const [named] of description.matchAll(/[\w.-]+\.(?:ts|mjs|md|sh)\b/g)) entries.push({ page, line: at + 1, text: named });
  }
  return entries;
}

describe('ARCHITECTURE.md and docs/testing.md name what exists', () => {
  const spans = PAGES.flatMap(codeSpans);

  it('finds what to check', () => {
    expect(spans.filter((span) => isPathReference(span.text)).length).toBeGreaterThan(50);
    expect(treeEntries('ARCHITECTURE.md').length).toBeGreaterThan(100);
  });

  it('every file and folder in the tree exists where the tree puts it', () => {
    const missing = treeEntries('ARCHITECTURE.md').filter(
      (entry) =>
        !(entry.text.includes('/')
          ? trackedSet.has(entry.text) || folders.has(entry.text.replace(/\/$/, ''))
          : pathExists(entry.text)),
    );
    expect(missing.map((entry) => `${entry.page}:${entry.line} ${entry.text}`)).toEqual([]);
  });

  it('every product module is in the tree', () => {
    const listed = new Set(treeEntries('ARCHITECTURE.md').map((entry) => entry.text));
    const modules = tracked.filter(
      (file) => /^(functions|webhook)\/.*\.ts$|^bin\/.*\.mjs$/.test(file) && !file.endsWith('.test.ts'),
    );
    expect(modules.length).toBeGreaterThan(100);
    expect(
      modules.filter((file) => !listed.has(file)),
      "add a line for each to ARCHITECTURE.md's tree",
    ).toEqual([]);
  });

  it('every file and folder in backticks exists', () => {
    const missing = spans.filter((span) => isPathReference(span.text) && !pathExists(span.text));
    expect(missing.map((span) => `${span.page}:${span.line} ${span.text}`)).toEqual([]);
  });

  it('every code name in backticks occurs in the sources', () => {
    const missing = spans.flatMap((span) =>
      codeNames(span.text)
        .filter((name) => !words.has(name))
        .map((name) => `${span.page}:${span.line} ${name}`),
    );
    expect(missing).toEqual([]);
  });

  it('the check itself fails on a name that does not exist', () => {
    expect(pathExists('functions/adapters/no-such-module.ts')).toBe(false);
    expect(pathExists('checks/registry.ts')).toBe(true);
    expect(codeNames('OnDemandEvaluations.evaluateForAdmission')).toEqual(['OnDemandEvaluations', 'evaluateForAdmission']);
    expect(words.has('evaluateForAdmission')).toBe(true);
    expect(words.has('evaluateForAdmissionGone')).toBe(false);
  });
});
