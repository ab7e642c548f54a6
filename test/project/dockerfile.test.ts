// The Dockerfile: one base image, production dependencies only, non-root, the bundled CLI,
// the measured memory flags, and no secret in the image or the build context.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { containerOf, objs, ROOT, workloads } from '../harness/manifests.js';

describe('Dockerfile', () => {
  const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const instructions = dockerfile
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  const stages = instructions.reduce<string[][]>((list, line) => {
    if (/^FROM\s/i.test(line)) list.push([line]);
    else list[list.length - 1]?.push(line);
    return list;
  }, []);
  const finalStage = stages[stages.length - 1] ?? [];

  it('builds every stage from node:22-bookworm-slim (a supported LTS)', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) expect(stage[0]).toMatch(/^FROM node:22-bookworm-slim(\s+AS\s+\S+)?$/i);
  });

  it('ships production dependencies only, runs as 10001 and starts the CLI', () => {
    const copiedModules = finalStage.find((line) => /^COPY --from=(\S+) \/app\/node_modules/.test(line));
    const sourceStage = /--from=(\S+)/.exec(copiedModules ?? '')?.[1];
    const depsStage = stages.find((stage) => new RegExp(`AS ${sourceStage ?? '-'}$`, 'i').test(stage[0] ?? ''));
    expect(depsStage?.some((line) => /npm ci .*--omit=dev/.test(line))).toBe(true);
    expect(finalStage.filter((line) => /^USER /.test(line)).at(-1)).toMatch(/^USER 10001(:10001)?$/);
    expect(finalStage.filter((line) => /^ENTRYPOINT /.test(line)).at(-1)).toMatch(
      /^ENTRYPOINT \["node", (.*, )?"bin\/etcd-guard\.mjs"\]$/,
    );
  });

  // Issue 31: tsx and esbuild shipped in the production dependencies (and so in the image). They
  // run and build the TypeScript in a checkout, where `npm ci` installs dev dependencies too.
  it('ships neither tsx nor esbuild: both are dev dependencies and `npm ls --omit=dev` has neither', async () => {
    const packageJson = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    for (const name of ['tsx', 'esbuild']) {
      expect(packageJson.dependencies[name]).toBeUndefined();
      expect(packageJson.devDependencies[name]).toBeDefined();
    }
    const listed = await new Promise<string>((resolve, reject) =>
      execFile('npm', ['ls', '--omit=dev', '--all', '--json'], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 }, (error, stdout) =>
        // npm ls exits 1 on problems of other packages (e.g. an extraneous one); the tree is still printed.
        stdout === '' ? reject(error ?? new Error('npm ls printed nothing')) : resolve(stdout),
      ),
    );
    const names = new Set<string>();
    const walk = (node: { dependencies?: Record<string, unknown> }) => {
      for (const [name, child] of Object.entries(node.dependencies ?? {})) {
        names.add(name);
        walk(child as { dependencies?: Record<string, unknown> });
      }
    };
    walk(JSON.parse(listed) as { dependencies?: Record<string, unknown> });
    expect(names.size).toBeGreaterThan(10);
    expect([...names].filter((name) => name === 'tsx' || name === 'esbuild' || name.startsWith('@esbuild/'))).toEqual([]);
  });

  it('type-checks and bundles in the build stage and ships dist/ without sources, so the image runs the bundle', () => {
    const copiedDist = finalStage.find((line) => /^COPY --from=(\S+) \/app\/dist /.test(line));
    const buildStageName = /--from=(\S+)/.exec(copiedDist ?? '')?.[1];
    const buildStage = stages.find((stage) => new RegExp(`AS ${buildStageName ?? '-'}$`, 'i').test(stage[0] ?? ''));
    expect(buildStage?.find((line) => /tsc -p tsconfig\.build\.json/.test(line))).toBeDefined();
    expect(buildStage?.find((line) => /node scripts\/build\.mjs/.test(line))).toBeDefined();
    expect(finalStage.some((line) => line.startsWith('COPY') && line.includes('/app/bin'))).toBe(true);
    // No sources in the image: bin/etcd-guard.mjs then always takes the bundle.
    for (const directory of ['functions', 'webhook'])
      expect(finalStage.filter((line) => line.startsWith('COPY') && line.includes(`/app/${directory}`))).toEqual([]);
  });

  it('copies into the build stage every file the build script imports', () => {
    const buildStage = stages.find((stage) => stage.some((line) => /node scripts\/build\.mjs/.test(line))) ?? [];
    const copied = buildStage
      .filter((line) => /^COPY /.test(line) && !line.includes('--from='))
      .flatMap((line) =>
        line
          .replace(/^COPY\s+/, '')
          .split(/\s+/)
          .slice(0, -1),
      );
    const covered = (file: string) =>
      copied.some((source) => file === source || file.startsWith(`${source.replace(/\/$/, '')}/`));
    const needed = new Set<string>();
    const visit = (file: string) => {
      if (needed.has(file)) return;
      needed.add(file);
      const source = readFileSync(path.join(ROOT, file), 'utf8');
      for (const [, relative] of source.matchAll(/from '(\.\.?\/[^']+)'/g))
        visit(path.posix.join(path.posix.dirname(file), relative ?? ''));
    };
    visit('scripts/build.mjs');
    expect(needed.size).toBeGreaterThanOrEqual(3);
    expect([...needed].filter((file) => !covered(file))).toEqual([]);
  });

  it('starts node with the memory flags the benchmark measured (small young generation)', () => {
    const entrypoint = finalStage.filter((line) => /^ENTRYPOINT /.test(line)).at(-1) ?? '';
    const words = JSON.parse(entrypoint.replace(/^ENTRYPOINT\s+/, '')) as string[];
    const flags = words.slice(1, -1);
    const semiSpace = flags.map((flag) => /^--max-semi-space-size=(\d+)$/.exec(flag)?.[1]).find(Boolean);
    expect(semiSpace, `ENTRYPOINT flags ${JSON.stringify(flags)}`).toBeDefined();
    expect(Number(semiSpace)).toBeGreaterThanOrEqual(1);
    expect(Number(semiSpace)).toBeLessThanOrEqual(8);
    // The Deployment passes only args, so the image's ENTRYPOINT (and its flags) stays in force;
    // NODE_OPTIONS there must not override the flag either.
    const container = containerOf(workloads[0]?.podSpec ?? {});
    expect(container.command).toBeUndefined();
    const nodeOptions = objs(container.env).find((variable) => variable.name === 'NODE_OPTIONS');
    expect(String(nodeOptions?.value ?? '')).not.toMatch(/max-semi-space-size/);
  });

  it('puts no secret into the image and keeps keys out of the build context', () => {
    expect(instructions.filter((line) => /^(ARG|ENV)\s.*(TOKEN|PASSWORD|SECRET|KEY)/i.test(line))).toEqual([]);
    const ignored = readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((line) => line.trim());
    for (const pattern of ['.git', 'node_modules', '*.key', '*.pem', '.env']) expect(ignored).toContain(pattern);
  });
});
