// The rings of ARCHITECTURE.md as eslint.config.js enforces them: each rule is shown firing on an
// import planted into a real file of the ring it guards, and staying quiet where the import is
// allowed (an entry point importing an entry point). A rule that never fires here is a wish.
import path from 'node:path';
import { ESLint } from 'eslint';
import { beforeAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
let eslint: ESLint;

beforeAll(() => {
  eslint = new ESLint({ cwd: ROOT });
});

/** The messages eslint gives `file` when its text is `code` (the file on disk is not changed). */
async function messagesFor(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  return (result?.messages ?? []).filter((message) => message.ruleId !== null).map((message) => message.message);
}

const ENTRY_POINT = 'only entry points import entry points';
const USE_CASE = 'adapters implement ports (functions/ports) and never import use cases';
const PURE_ADAPTER = 'core and shared code must not import adapters';
const TESTS = 'product code never imports tests or the test harness';

const planted = (from: string) => `import { loadGuardConfigFile } from '${from}';\nexport const planted = loadGuardConfigFile;\n`;

describe('the rings hold: an upward import is an eslint error naming the rule', () => {
  it.each([
    { ring: 'functions domain', file: 'functions/domain/targets.ts', from: '../entrypoints/config-file.js', says: ENTRY_POINT },
    {
      ring: 'controller kinds',
      file: 'functions/domain/kinds/discovery-common.ts',
      from: '../../entrypoints/config-file.js',
      says: ENTRY_POINT,
    },
    { ring: 'ports', file: 'functions/ports/etcd-access.ts', from: '../entrypoints/config-file.js', says: ENTRY_POINT },
    { ring: 'shared helpers', file: 'functions/shared/names.ts', from: '../entrypoints/config-file.js', says: ENTRY_POINT },
    { ring: 'use cases', file: 'functions/usecases/scheduled-run.ts', from: '../entrypoints/config-file.js', says: ENTRY_POINT },
    { ring: 'adapters', file: 'functions/adapters/kube-events.ts', from: '../entrypoints/config-file.js', says: ENTRY_POINT },
    { ring: 'adapters', file: 'functions/adapters/kube-events.ts', from: '../usecases/event-recorder.js', says: USE_CASE },
    { ring: 'adapters', file: 'functions/adapters/capi-etcd-access.ts', from: '../usecases/etcd-access.js', says: USE_CASE },
    {
      ring: 'webhook domain',
      file: 'webhook/domain/classify.ts',
      from: '../../functions/entrypoints/config-file.js',
      says: ENTRY_POINT,
    },
    {
      ring: 'webhook server',
      file: 'webhook/server/app.ts',
      from: '../../functions/entrypoints/config-file.js',
      says: ENTRY_POINT,
    },
    { ring: 'functions domain', file: 'functions/domain/targets.ts', from: '../adapters/kube.js', says: PURE_ADAPTER },
    { ring: 'functions domain', file: 'functions/domain/targets.ts', from: '../../test/harness/probe-input.js', says: TESTS },
    { ring: 'adapters', file: 'functions/adapters/kube.ts', from: './kube-agents.test.js', says: TESTS },
    { ring: 'webhook server', file: 'webhook/server/app.ts', from: '../../test/harness/webhook.js', says: TESTS },
  ])('$ring ($file) importing $from', async ({ file, from, says }) => {
    const messages = await messagesFor(file, planted(from));
    expect(
      messages.some((message) => message.includes(says)),
      messages.join('\n'),
    ).toBe(true);
  });

  it('a dynamic import of an entry point from the domain fires too', async () => {
    const code = "export const later = () => import('../entrypoints/config-file.js');\n";
    const messages = await messagesFor('functions/domain/targets.ts', code);
    expect(
      messages.some((message) => message.includes(ENTRY_POINT)),
      messages.join('\n'),
    ).toBe(true);
  });

  it.each([
    { file: 'webhook/server/main.ts', from: '../../functions/entrypoints/config-file.js', name: 'loadGuardConfigFile' },
    { file: 'functions/entrypoints/handlers.ts', from: './config-file.js', name: 'loadGuardConfigFile' },
    { file: 'functions/usecases/scheduled-run.ts', from: '../domain/config.js', name: 'ConfigError' },
    // A test beside a domain module reaches across the rings: the harness, adapters, the entry points.
    { file: 'functions/domain/shard.test.ts', from: '../../test/harness/probe-input.js', name: 'probedThree' },
    { file: 'webhook/domain/decide.test.ts', from: '../../functions/entrypoints/config-file.js', name: 'loadGuardConfigFile' },
  ])('stays quiet where the import is allowed: $file importing $from', async ({ file, from, name }) => {
    const code = `import { ${name} } from '${from}';\nexport const planted = ${name};\n`;
    expect(await messagesFor(file, code)).toEqual([]);
  });
});
