// Config and stored files as untrusted input: URL credentials are refused at config load without
// being repeated, errors about files describe their content (where, what kind) instead of quoting
// it, and numbers that would break timers are bounded.
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileStore } from '../../functions/adapters/file-store.js';
import { ConfigError, parseGuardConfig } from '../../functions/domain/config.js';
import { loadGuardConfigFile, parseGuardConfigText } from '../../functions/entrypoints/config-file.js';
import { parseEvaluationJson } from '../../functions/domain/evaluation-document.js';
import { redactUrlUserinfo } from '../../functions/shared/redact.js';
import { makeEvaluation } from '../harness/evaluation-fixture.js';
import { captureStoreError } from '../harness/store-error.js';

const SECRET = 'hunter2-s3cr3t';

function configError(run: () => unknown): ConfigError {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'etcd-guard-leaks-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('credentials in endpoint URLs', () => {
  it.each([`https://root:${SECRET}@10.0.0.1:2379`, `https://${SECRET}@10.0.0.1:2379`, `http://user:${SECRET}@etcd:2379/`])(
    'refuses %s at config load without echoing it',
    (endpoint) => {
      const error = configError(() =>
        parseGuardConfig({ store: { kind: 'file', dir }, targets: [{ name: 'prod', endpoints: [endpoint] }] }, 'guard.yaml'),
      );
      expect(error.message).toContain('targets.0.endpoints.0: credentials in an endpoint URL are not allowed');
      expect(error.message).not.toContain(SECRET);
    },
  );

  it('redacts the user info of every URL in a text', () => {
    expect(redactUrlUserinfo(`a https://u:${SECRET}@h:1/x and http://${SECRET}@h:2`)).toBe(
      'a https://REDACTED@h:1/x and http://REDACTED@h:2',
    );
    expect(redactUrlUserinfo('https://h:1/p@q')).toBe('https://h:1/p@q');
  });
});

describe('errors describe untrusted file content, never quote it', () => {
  const passwd = `root:x:0:0:${SECRET}:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n`;

  it.each([
    ['a config file that is a link to a non-YAML secret', `${SECRET}: [unclosed`],
    ['a config file that parses as one string (e.g. /etc/passwd)', passwd],
    ['a config file that is a JSON scalar', JSON.stringify(SECRET)],
  ])('%s', (_name, text) => {
    const secretFile = path.join(dir, 'secret');
    writeFileSync(secretFile, text);
    const configFile = path.join(dir, 'guard.yaml');
    symlinkSync(secretFile, configFile);
    const error = configError(() => loadGuardConfigFile(configFile));
    expect(error.message).toContain(configFile);
    expect(error.message).not.toContain(SECRET);
  });

  it('says where a YAML error is', () => {
    expect(configError(() => parseGuardConfigText('a: [1,\n', 'guard.yaml')).message).toMatch(
      /not valid YAML or JSON \(\w+ at line \d+, column \d+\)/,
    );
  });

  it.each([
    ['not JSON (a link to /etc/passwd)', passwd],
    ['JSON with a wrong enum value', JSON.stringify({ ...makeEvaluation({ target: 'prod' }), verdict: SECRET })],
    ['JSON with unknown keys', JSON.stringify({ ...makeEvaluation({ target: 'prod' }), [SECRET]: 1, checks: SECRET })],
  ])('a stored evaluation that is %s', async (_name, text) => {
    const store = new FileStore(dir);
    writeFileSync(path.join(dir, 'prod.json'), text);
    const error = await captureStoreError(store.read('prod'));
    expect(error.kind).toBe('corrupt');
    expect(error.message).toContain(path.join(dir, 'prod.json'));
    expect(error.message).not.toContain(SECRET);
    expect(() => parseEvaluationJson(text, 'x')).toThrow(/x is not a valid etcd-guard evaluation/);
  });
});

describe('config bounds', () => {
  it('refuses maxAgeSeconds above an hour, naming the field and the limit', () => {
    const config = (maxAgeSeconds: number) => () =>
      parseGuardConfig(
        { store: { kind: 'file', dir }, maxAgeSeconds, targets: [{ name: 'p', endpoints: ['https://h:1'] }] },
        'g.yaml',
      );
    expect(config(3600)().maxAgeSeconds).toBe(3600);
    expect(configError(config(2_592_000)).message).toMatch(/maxAgeSeconds: .*3600.* \(got 2592000\)/);
  });
});
