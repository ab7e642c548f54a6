// scripts/make-webhook-cert.sh: the serving cert it writes, its errors and its cluster path (run
// against a stand-in kubectl that records each call).
import { X509Certificate, createPublicKey } from 'node:crypto';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CERT_SCRIPT,
  guardNamespace,
  makeTempDir,
  name,
  removeTempDirs,
  run,
  service,
  webhookConfiguration,
} from '../test/harness/manifests.js';

afterAll(removeTempDirs);

describe('scripts/make-webhook-cert.sh', () => {
  it('--out writes a serving cert for the Service DNS names, signed by the CA it writes, and prints no key', async () => {
    const out = path.join(makeTempDir(), 'certs');
    const result = await run('bash', [CERT_SCRIPT, '--out', out]);
    expect(result.code, result.stderr).toBe(0);
    expect(`${result.stdout}${result.stderr}`).not.toMatch(/PRIVATE KEY/);
    const certText = await run('openssl', ['x509', '-noout', '-text', '-in', path.join(out, 'tls.crt')]);
    expect(certText.code).toBe(0);
    const serviceHost = `${name(service)}.${guardNamespace}.svc`;
    expect(certText.stdout).toContain(`DNS:${serviceHost}`);
    expect(certText.stdout).toContain(`DNS:${serviceHost}.cluster.local`);
    expect(certText.stdout).toMatch(/TLS Web Server Authentication/);
    const verify = await run('openssl', ['verify', '-CAfile', path.join(out, 'ca.crt'), path.join(out, 'tls.crt')]);
    expect(verify.code, verify.stderr).toBe(0);
    // The key belongs to the cert: a TLS context accepts the pair.
    const key = readFileSync(path.join(out, 'tls.key'));
    const cert = readFileSync(path.join(out, 'tls.crt'));
    expect(() => createSecureContext({ key, cert })).not.toThrow();
    expect(new X509Certificate(cert).publicKey.export({ format: 'jwk' })).toEqual(createPublicKey(key).export({ format: 'jwk' }));
  });

  it('names the cert after --namespace and --service', async () => {
    const out = path.join(makeTempDir(), 'certs');
    const result = await run('bash', [CERT_SCRIPT, '--out', out, '--namespace', 'guard-test', '--service', 'hook']);
    expect(result.code, result.stderr).toBe(0);
    const san = new X509Certificate(readFileSync(path.join(out, 'tls.crt'))).subjectAltName ?? '';
    expect(san).toContain('DNS:hook.guard-test.svc');
    expect(san).not.toContain('etcd-guard-webhook');
  });

  it.each([
    [['--bogus'], /unknown argument "--bogus"/],
    [['--days'], /--days needs a value/],
    [['--days', 'soon', '--out', 'x'], /invalid --days "soon"/],
    [['--namespace', 'Bad_NS', '--out', 'x'], /invalid --namespace "Bad_NS"/],
  ])('refuses %j with exit 2 and a message naming it', async (args, message) => {
    const result = await run('bash', [CERT_SCRIPT, ...args]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
  });

  it('--help describes what it does and exits 0', async () => {
    const result = await run('bash', [CERT_SCRIPT, '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/caBundle/);
    expect(result.stdout).toMatch(/--out DIR/);
  });

  it('against a cluster: applies the TLS Secret and patches the CA into every webhook of the configuration', async () => {
    // No cluster here: a stand-in kubectl (via the script's KUBECTL variable) records each call and
    // answers `get` with two webhook names, so the script's cluster path runs for real.
    const dir = makeTempDir();
    const log = path.join(dir, 'calls.jsonl');
    const fakeKubectl = path.join(dir, 'kubectl');
    writeFileSync(
      fakeKubectl,
      `#!/usr/bin/env node
const fs = require('node:fs');
const args = process.argv.slice(2);
const record = { args, stdin: args[0] === 'apply' ? fs.readFileSync(0, 'utf8') : undefined };
if (args[0] === 'create') {
  const file = (flag) => fs.readFileSync(args.find((a) => a.startsWith(flag + '=')).slice(flag.length + 1));
  record.cert = file('--cert').toString('utf8');
  process.stdout.write('kind: Secret\\ntype: kubernetes.io/tls\\ndata:\\n  tls.crt: ' + file('--cert').toString('base64') + '\\n  tls.key: ' + file('--key').toString('base64') + '\\n');
}
if (args[0] === 'get') process.stdout.write('etcd-guard.etcd-guard.io\\nsecond.etcd-guard.io\\n');
fs.appendFileSync(${JSON.stringify(log)}, JSON.stringify(record) + '\\n');
`,
    );
    chmodSync(fakeKubectl, 0o755);
    const result = await run('bash', [CERT_SCRIPT], { env: { ...process.env, KUBECTL: fakeKubectl } });
    expect(result.code, result.stderr).toBe(0);
    expect(`${result.stdout}${result.stderr}`).not.toMatch(/PRIVATE KEY/);
    const calls = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { args: string[]; stdin?: string; cert?: string });
    expect(calls.map((call) => call.args[0])).toEqual(['create', 'apply', 'get', 'patch']);
    const [create, apply, , patch] = calls;
    expect(create?.args.slice(0, 6)).toEqual([
      'create',
      'secret',
      'tls',
      'etcd-guard-webhook-tls',
      '--namespace',
      guardNamespace,
    ]);
    expect(create?.args).toEqual(expect.arrayContaining(['--dry-run=client', '-o', 'yaml']));
    expect(apply?.args).toEqual(['apply', '-f', '-']);
    expect(apply?.stdin).toMatch(/kind: Secret/);
    expect(patch?.args.slice(0, 4)).toEqual([
      'patch',
      'validatingwebhookconfiguration',
      name(webhookConfiguration),
      '--type=json',
    ]);
    const operations = JSON.parse(patch?.args[5] ?? '[]') as Array<{ op: string; path: string; value: string }>;
    expect(operations.map((operation) => [operation.op, operation.path])).toEqual([
      ['add', '/webhooks/0/clientConfig/caBundle'],
      ['add', '/webhooks/1/clientConfig/caBundle'],
    ]);
    // The caBundle is the CA that signed the cert stored in the Secret.
    const ca = new X509Certificate(Buffer.from(operations[0]?.value ?? '', 'base64'));
    const served = new X509Certificate(create?.cert ?? '');
    expect(served.verify(ca.publicKey)).toBe(true);
    expect(served.subjectAltName).toContain(`DNS:${name(service)}.${guardNamespace}.svc`);
    expect(operations[1]?.value).toBe(operations[0]?.value);
  });
});
