// The pins of scripts/versions.env, the kube binaries scripts/ensure-kube.sh builds, and the
// module dirs the real CRDs are read from (go mod download: the module cache, never the repo).
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const VERSIONS_FILE = path.join(ROOT, 'scripts', 'versions.env');

/** scripts/versions.env as a map: NAME=value lines, `#` comments and blank lines skipped. */
export function pinnedVersions(file = VERSIONS_FILE): Record<string, string> {
  const pins: Record<string, string> = {};
  for (const [index, raw] of readFileSync(file, 'utf8').split('\n').entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([A-Z][A-Z0-9_]*)=(\S+)$/.exec(line);
    if (!match?.[1] || !match[2]) throw new Error(`${file}:${index + 1}: want NAME=value, got ${JSON.stringify(raw)}`);
    pins[match[1]] = match[2];
  }
  return pins;
}

export function pinnedVersion(name: string): string {
  const version = pinnedVersions()[name];
  if (version === undefined) throw new Error(`${VERSIONS_FILE} pins no ${name}`);
  return version;
}

export interface KubeBinaries {
  kubeApiserver: string;
  kubectl: string;
}

/**
 * ETCD_GUARD_KUBE_BIN_DIR (scripts/test.sh sets it), else what scripts/ensure-kube.sh prints: a
 * version check when the cache holds them, a build otherwise. Never kubectl from the PATH.
 */
export function kubeBinaries(env: NodeJS.ProcessEnv = process.env): KubeBinaries {
  let dir = env.ETCD_GUARD_KUBE_BIN_DIR;
  if (dir === undefined || dir === '') {
    try {
      dir = execFileSync('bash', [path.join(ROOT, 'scripts', 'ensure-kube.sh')], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      }).trim();
    } catch (error) {
      const stderr = String((error as { stderr?: unknown }).stderr ?? '');
      throw new Error(`scripts/ensure-kube.sh failed: ${stderr.trim() || (error as Error).message}`);
    }
  }
  return { kubeApiserver: path.join(dir, 'kube-apiserver'), kubectl: path.join(dir, 'kubectl') };
}

/** The dir of MODULE@VERSION in the Go module cache, downloaded first when absent. */
export function goModuleDir(module: string, version: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('go', ['mod', 'download', '-json', `${module}@${version}`], { timeout: 120_000 }, (error, stdout, stderr) => {
      let answer: { Dir?: string; Error?: string } = {};
      try {
        answer = JSON.parse(String(stdout)) as typeof answer;
      } catch {
        // No JSON: go itself failed (not installed, bad flags); the error below says so.
      }
      if (error || answer.Dir === undefined) {
        reject(
          new Error(
            `go mod download ${module}@${version} failed: ${answer.Error ?? error?.message ?? ''} ${String(stderr)}`.trim(),
          ),
        );
      } else resolve(answer.Dir);
    });
  });
}
