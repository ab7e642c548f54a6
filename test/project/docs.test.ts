// Every shell command in README.md and docs/*.md works as written. Each fenced `sh` block is
// classified by the `<!-- doc-test: CLASS -->` line above it, and this file does what the class says:
//   run           runs verbatim in the repository (bash -c), must exit 0
//   substituted   runs after replacing the example endpoint, files and `etcd-guard`/`docker run IMAGE`
//                 with a real loopback etcd cluster, its TLS files and the bin (the table below)
//   covered FILE  too slow or recursive to run here (the demo, the suite itself): the npm scripts it
//                 calls exist and FILE, which runs the same thing, exists
//   cluster       needs a real Kubernetes cluster: bash parses it, every `kubectl VERB` is a verb
//                 kubectl knows, every `kubectl kustomize DIR` builds here, every scripts/*.sh exists
//                 and answers --help
// A block without a class fails, naming the file and line.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEtcdCluster, type EtcdTestCluster } from '../harness/etcd-cluster.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const DOCS = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).map((file) => `docs/${file}`)].filter((file) =>
  file.endsWith('.md'),
);

interface Block {
  file: string;
  line: number;
  kind: string;
  argument: string;
  code: string;
}

function shellBlocks(file: string): Block[] {
  const lines = readFileSync(path.join(ROOT, file), 'utf8').split('\n');
  const blocks: Block[] = [];
  for (let index = 0; index < lines.length; index += 1) {
    if (!/^\s*```(sh|bash|shell)\s*$/.test(lines[index] ?? '')) continue;
    const end = lines.findIndex((line, at) => at > index && /^\s*```\s*$/.test(line));
    const marker = /<!-- doc-test: (\S+)\s*(\S*) -->/.exec(lines[index - 1] ?? '');
    const code = lines
      .slice(index + 1, end)
      .map((line) => line.replace(/^ {3}/, ''))
      .join('\n');
    blocks.push({ file, line: index + 1, kind: marker?.[1] ?? 'unclassified', argument: marker?.[2] ?? '', code });
    index = end;
  }
  return blocks;
}

const blocks = DOCS.flatMap(shellBlocks);
const ofKind = (kind: string) =>
  blocks.filter((block) => block.kind === kind).map((block) => [`${block.file}:${block.line}`, block] as const);

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function bash(script: string, env: NodeJS.ProcessEnv = {}, timeoutMs = 120_000): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      'bash',
      ['-c', script],
      { cwd: ROOT, timeout: timeoutMs, killSignal: 'SIGKILL', env: { ...process.env, ...env }, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const raw = (error as { code?: unknown } | null)?.code;
        resolve({ code: error === null ? 0 : typeof raw === 'number' ? raw : 1, stdout, stderr });
      },
    );
    // A command that reads stdin when given no input (serverless invoke local) must not wait on it.
    child.stdin?.end();
  });
}

/** Serverless and npm scratch files go to a temp dir of this file's own, removed afterwards. */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'etcd-guard-docs-'));
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
  // `serverless invoke local` with examples/local.yaml writes its evaluation beside the config.
  rmSync(path.join(ROOT, 'examples/.etcd-guard'), { recursive: true, force: true });
});
const RUN_ENV = { TMPDIR: scratch, SLS_TELEMETRY_DISABLED: '1', SLS_NOTIFICATIONS_MODE: 'off', SLS_DEPRECATION_DISABLE: '*' };

describe('shell blocks in README.md and docs/', () => {
  it('are all classified and parse as bash', async () => {
    expect(blocks.length).toBeGreaterThan(5);
    // The repository carries its own reference; nothing points at a contract file outside it.
    for (const file of DOCS) expect(readFileSync(path.join(ROOT, file), 'utf8'), file).not.toMatch(/SPEC\.md/);
    expect(blocks.filter((block) => block.kind === 'unclassified').map((block) => `${block.file}:${block.line}`)).toEqual([]);
    const known = ['run', 'substituted', 'covered', 'cluster'];
    expect(
      blocks.filter((block) => !known.includes(block.kind)).map((block) => `${block.file}:${block.line} ${block.kind}`),
    ).toEqual([]);
    for (const block of blocks) {
      const parsed = await bash(`set -n\n${block.code}`);
      expect(parsed.stderr, `${block.file}:${block.line}`).toBe('');
    }
  });

  it.each(ofKind('run'))(
    '%s runs as written',
    async (_where, block) => {
      const result = await bash(block.code, RUN_ENV);
      expect(result.code, `${block.code}\n${result.stderr.slice(-2000)}`).toBe(0);
    },
    180_000,
  );

  it.each(ofKind('covered'))('%s is covered by the file it names, and its npm scripts exist', (_where, block) => {
    expect(existsSync(path.join(ROOT, block.argument)), block.argument).toBe(true);
    const scripts = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> })
      .scripts;
    for (const [, script] of block.code.matchAll(/npm (?:run )?(\w[\w:-]*)/g)) {
      if (script === 'ci' || script === 'install') continue;
      expect(scripts[script ?? ''], `npm script ${script}`).toBeDefined();
    }
  });

  it.each(ofKind('cluster'))('%s names kubectl verbs, kustomize dirs and scripts that exist', async (_where, block) => {
    const verbs = new Set(
      [...block.code.matchAll(/\bkubectl((?:\s+(?:-n|--namespace)\s+\S+)*)\s+([a-z][a-z-]*)/g)].map((match) => match[2] ?? ''),
    );
    for (const verb of verbs) {
      const help = await bash(`kubectl ${verb} --help`);
      expect(help.code, `kubectl ${verb} --help: ${help.stderr}`).toBe(0);
    }
    for (const [, dir] of block.code.matchAll(/kubectl kustomize (\S+)/g)) {
      const built = await bash(`kubectl kustomize ${dir ?? ''}`);
      expect(built.code, `kubectl kustomize ${dir}: ${built.stderr}`).toBe(0);
      expect(built.stdout).toMatch(/^kind: /m);
    }
    for (const [, script] of block.code.matchAll(/(?:^|\s)(scripts\/[\w.-]+\.sh)\b/g)) {
      const help = await bash(`bash ${script ?? ''} --help`);
      expect(help.code, `${script} --help: ${help.stderr}`).toBe(0);
    }
  });

  describe('substituted blocks, against a real loopback etcd', () => {
    let cluster: EtcdTestCluster;
    beforeAll(async () => {
      cluster = await startEtcdCluster({ name: 'docs' });
    });
    afterAll(async () => {
      await cluster?.destroy();
    });

    /** What the examples stand for, and what it becomes here. */
    function substitute(code: string): string {
      const bin = `node ${path.join(ROOT, 'bin/etcd-guard.mjs')}`;
      return code
        .replace(/docker run (?:--rm |-v \S+ )*ghcr\.io\/etcd-guard\/etcd-guard:\S+/g, bin)
        .replace(/^etcd-guard /gm, `${bin} `)
        .replaceAll('https://10.0.0.1:2379', cluster.endpoints[0] ?? '')
        .replaceAll('https://10.0.0.2:2379', cluster.endpoints[1] ?? '')
        .replace(/(?:\/certs\/)?ca\.crt/g, cluster.tls.caFile)
        .replace(/(?:\/certs\/)?client\.crt/g, cluster.tls.certFile)
        .replace(/(?:\/certs\/)?client\.key/g, cluster.tls.keyFile);
    }

    it.each(ofKind('substituted'))('%s evaluates the cluster and passes', async (_where, block) => {
      const script = substitute(block.code);
      expect(script).not.toMatch(/10\.0\.0\.\d|ghcr\.io/);
      const result = await bash(script);
      expect(result.code, `${script}\n${result.stdout}\n${result.stderr}`).toBe(0);
      // Passed: Healthy, or Degraded when a member answers slowly on a loaded machine (exit 0 either way).
      expect(result.stdout).toMatch(/: (Healthy|Degraded) \(passed\)/);
    });
  });
});
