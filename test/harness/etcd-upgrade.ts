// What the suites that move a real etcd between minor versions share (test/e2e/etcd-upgrade-in-place*.test.ts,
// etcd-downgrade.test.ts): the binaries of a version, the scheduled evaluation polled until it
// says what a step expects, and the member swap etcd's upgrade guide describes (start a stopped
// member on the next binary with its data dir, then wait until its evaluation reports it).
import { execFile } from 'node:child_process';
import path from 'node:path';
import { expect } from 'vitest';
import { statusExtras } from '../../functions/adapters/etcd-status-extras.js';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import type { EtcdWebhook } from './etcd-webhook.js';
import { rawStatus } from './raw-status.js';
import { waitFor } from './wait.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

export interface EtcdBinaries {
  etcd: string;
  etcdctl: string;
}

/** The dir the env names, else the one the script prints (it fetches or builds when needed). */
export function etcdBinariesFrom(envName: string, script: string[]): Promise<EtcdBinaries> {
  const named = process.env[envName];
  const dir =
    named !== undefined && named !== ''
      ? Promise.resolve(named)
      : new Promise<string>((resolve, reject) =>
          execFile('bash', script, { cwd: ROOT, timeout: 20 * 60_000 }, (error, stdout, stderr) =>
            error
              ? reject(new Error(`${script.join(' ')} failed: ${String(stderr).trim() || error.message}`))
              : resolve(String(stdout).trim()),
          ),
        );
  return dir.then((bin) => ({ etcd: path.join(bin, 'etcd'), etcdctl: path.join(bin, 'etcdctl') }));
}

/**
 * Polls the scheduled run until its evaluation satisfies `done`; returns that evaluation. A
 * loaded machine can make a member's Status slower than the latency check allows (a warning), so
 * a step that expects Healthy waits for an evaluation without one.
 */
export async function evaluationWhen(
  e2e: EtcdWebhook,
  what: string,
  done: (evaluation: Evaluation) => boolean,
): Promise<Evaluation> {
  let last: Evaluation | undefined;
  try {
    await waitFor(what, 30_000, async () => {
      last = await e2e.scheduledEvaluation();
      return done(last);
    });
  } catch (error) {
    throw new Error(`${(error as Error).message}; last: ${last?.verdict ?? 'none'}: ${last?.reasons.join('; ') ?? ''}`);
  }
  if (last === undefined) throw new Error(`no evaluation while waiting for ${what}`);
  return last;
}

export const versionsOf = (evaluation: Evaluation) =>
  Object.fromEntries(evaluation.members.map((member) => [member.name, member.version]));

export interface MemberSwap {
  /** The evaluation once the members up to this one report the new version. */
  evaluation: Evaluation;
  /** The members on the new version (those before it and this one), in index order. */
  upgraded: string[];
  /** The members still on the old version. */
  below: string[];
}

/**
 * Starts stopped member `index` of `names` on `etcd` with its data dir, as the members before it
 * were; returns the first evaluation in which every upgraded member reports `toVersion` (Healthy
 * once none is below) and checks that the others still report `fromVersion`.
 */
export async function startOnNextVersion(
  e2e: EtcdWebhook,
  {
    index,
    names,
    etcd,
    fromVersion,
    toVersion,
  }: { index: number; names: string[]; etcd: string; fromVersion: string; toVersion: string },
): Promise<MemberSwap> {
  await e2e.cluster.start(index, { etcd });
  await e2e.cluster.waitHealthy();
  const upgraded = names.slice(0, index + 1);
  const below = names.slice(index + 1);
  const evaluation = await evaluationWhen(e2e, `${names[index]} to report ${toVersion}`, (each) => {
    const versions = versionsOf(each);
    const settled = below.length > 0 ? each.verdict !== 'Unhealthy' : each.verdict === 'Healthy';
    return settled && upgraded.every((name) => versions[name] === toVersion);
  });
  const versions = versionsOf(evaluation);
  for (const name of below) expect(versions[name]).toBe(fromVersion);
  return { evaluation, upgraded, below };
}

/** Waits until every member reports the storage version of `version`'s minor and a quota (the 3.6 Status fields). */
export async function waitForStorageVersion(e2e: EtcdWebhook, version: string): Promise<void> {
  const [major, minor] = version.split('.');
  for (const endpoint of e2e.cluster.endpoints) {
    await waitFor(`${endpoint} to report storage version ${major}.${minor}.0`, 30_000, async () => {
      const extras = statusExtras(await rawStatus(endpoint, e2e.cluster.clientTls));
      expect(extras.dbSizeQuotaBytes, endpoint).toBeGreaterThan(0);
      return extras.storageVersion === `${major}.${minor}.0`;
    });
  }
}

/**
 * Stores `real` as a fresh evaluation whose members all run `version`, and waits until the
 * webhook's cache holds it: the same cluster once its members were upgraded, without upgrading them.
 */
export async function cacheMembersOn(e2e: EtcdWebhook, real: Evaluation, version: string): Promise<Evaluation> {
  const upgraded: Evaluation = {
    ...real,
    evaluatedAt: new Date().toISOString(),
    members: real.members.map((member) => ({ ...member, version })),
  };
  await e2e.store.write(upgraded);
  await e2e.webhook.waitCached(upgraded);
  return upgraded;
}
