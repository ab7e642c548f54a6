// createStore: the Kubernetes client (~80 MB resident) is loaded only when a ConfigMap store is
// first used, so a webhook or CLI on the file store never pays for it; bad namespaces still fail
// at once. Module loading is observed in a real child process through a resolve hook.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from './store-factory.js';
import { StoreError } from '../domain/store.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let dir: string;
let hookFile: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-store-factory-'));
  hookFile = path.join(dir, 'report-kube-loads.mjs');
  const hook = `export async function resolve(specifier, context, next) {
    if (specifier.startsWith('@kubernetes/client-node')) process.stderr.write('KUBE-CLIENT-LOADED\\n');
    return next(specifier, context);
  }`;
  await writeFile(
    hookFile,
    `import { register } from 'node:module';\nregister(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hook)}`)});\n`,
  );
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Runs `script` (ESM, may await) in a fresh node with tsx and the hook; stdout marks progress. */
function runWithHook(script: string): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', '--import', hookFile, '--input-type=module', '-e', script],
      { cwd: REPO, timeout: 30_000, env: { ...process.env, KUBECONFIG: path.join(dir, 'missing-kubeconfig') } },
      (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve({ stdout, stderr })),
    );
  });
}

describe('createStore loads the Kubernetes client only when needed', () => {
  const factory = JSON.stringify(path.join(REPO, 'functions/adapters/store-factory.ts'));
  const storeModule = JSON.stringify(path.join(REPO, 'functions/domain/store.ts'));

  it('a file store (and building a ConfigMap store) does not load @kubernetes/client-node', async () => {
    const { stderr, stdout } = await runWithHook(
      `const { createStore } = await import(${factory});
       const store = createStore({ kind: 'file', dir: ${JSON.stringify(dir)} });
       await store.read('prod');
       createStore({ kind: 'configmap', namespace: 'etcd-guard' });
       console.log('done');`,
    );
    expect(stdout).toContain('done');
    expect(stderr).not.toContain('KUBE-CLIENT-LOADED');
  });

  it('the first use of a ConfigMap store loads it and reports errors as StoreErrors', async () => {
    const { stderr, stdout } = await runWithHook(
      `const { createStore } = await import(${factory});
       const { StoreError } = await import(${storeModule});
       const store = createStore({ kind: 'configmap', namespace: 'etcd-guard' });
       console.log('describe=' + store.describe());
       await store.read('prod').then(
         () => console.log('read ok'),
         (error) => console.log('error=' + (error instanceof StoreError) + ':' + error.kind),
       );`,
    );
    expect(stdout).toContain('describe=configmap:etcd-guard');
    expect(stdout).toContain('error=true:invalid');
    expect(stderr).toContain('KUBE-CLIENT-LOADED');
  });
});

describe('createStore validates the ConfigMap namespace at once', () => {
  it.each(['Bad_Namespace', '', 'a'.repeat(64), '-leading-dash'])(
    'refuses %j with an invalid StoreError naming it',
    (namespace) => {
      let caught: unknown;
      try {
        createStore({ kind: 'configmap', namespace });
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(StoreError);
      expect((caught as StoreError).kind).toBe('invalid');
      expect((caught as StoreError).message).toContain(JSON.stringify(namespace));
    },
  );

  it('accepts a DNS-label namespace and names it in describe()', () => {
    expect(createStore({ kind: 'configmap', namespace: 'etcd-guard' }).describe()).toBe('configmap:etcd-guard');
  });
});
