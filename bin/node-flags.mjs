// The V8 memory flags etcd-guard starts node with, derived where it starts (bin/etcd-guard.mjs
// re-executes itself with them before loading anything else). Pure functions first, then the
// reads of /proc and /sys, so the derivation is tested as a table (test/project/node-flags.test.ts).
//
// Why: V8 sizes its heap from the memory it sees. On a 24 GiB host (or in a container whose
// cgroup limit node does not see) the old-generation limit is 4 GiB, and with that much room V8
// grows the old generation to several times the live heap before a full collection, so the
// webhook under load and a fleet run peak far above what they hold. An old-generation cap of
// 1 GiB or less brings V8's growing factor down, which is what holds those peaks within their
// targets (BENCHMARKS.md has the peaks measured with and without the cap).
import { createRequire } from 'node:module';

// Through require, not an ES module import: see bin/etcd-guard.mjs.
const require = createRequire(import.meta.url);
const { readFileSync } = require('node:fs');
const os = require('node:os');

const MIB = 1024 * 1024;

/** Old-generation cap when no memory limit applies (a host, or an unlimited cgroup). */
export const DEFAULT_OLD_SPACE_MIB = 1024;
/** Share of a container's memory limit given to V8's old generation; the rest is node itself
 * (~50 MiB of binary), the young generation, code, TLS and socket buffers. */
export const OLD_SPACE_SHARE_OF_LIMIT = 0.5;
export const MIN_OLD_SPACE_MIB = 64;
export const MAX_OLD_SPACE_MIB = 4096;
/** The webhook's young generation: V8 otherwise grows each semi-space to 16 MiB under load. */
export const WEBHOOK_SEMI_SPACE_MIB = 2;

/**
 * A cgroup memory limit in bytes from the text of cgroup v2 `memory.max` or v1
 * `memory.limit_in_bytes`; null when unlimited ("max", or v1's page-rounded LONG_MAX), unreadable,
 * malformed, or not below the host's memory (a limit above what exists limits nothing).
 * @param {string | undefined} text
 * @param {number} hostBytes
 * @returns {number | null}
 */
export function parseCgroupMemoryLimit(text, hostBytes) {
  const value = text?.trim();
  if (value === undefined || !/^\d{1,20}$/.test(value)) return null;
  const bytes = Number(value);
  if (!Number.isSafeInteger(bytes) || bytes <= 0 || bytes >= hostBytes) return null;
  return bytes;
}

/**
 * The smallest of the limits that apply (cgroup v2, cgroup v1, the downward API's
 * ETCD_GUARD_MEMORY_LIMIT), or null when none does.
 * @param {{ v2?: string, v1?: string, env?: string }} texts
 * @param {number} hostBytes
 * @returns {number | null}
 */
export function memoryLimitBytes(texts, hostBytes) {
  const limits = [texts.v2, texts.v1, texts.env]
    .map((text) => parseCgroupMemoryLimit(text, hostBytes))
    .filter((limit) => limit !== null);
  return limits.length === 0 ? null : Math.min(...limits);
}

/**
 * V8's old-generation cap in MiB: half the container's memory limit (within 64..4096 MiB), or
 * DEFAULT_OLD_SPACE_MIB when nothing limits memory.
 * @param {number | null} limitBytes
 * @returns {number}
 */
export function oldSpaceMiB(limitBytes) {
  if (limitBytes === null) return DEFAULT_OLD_SPACE_MIB;
  const share = Math.floor((limitBytes / MIB) * OLD_SPACE_SHARE_OF_LIMIT);
  return Math.min(MAX_OLD_SPACE_MIB, Math.max(MIN_OLD_SPACE_MIB, share));
}

const OLD_SPACE_FLAG = /(^|\s)--max[-_]old[-_]space[-_]size(-percentage)?[=\s]/;
const SEMI_SPACE_FLAG = /(^|\s)--max[-_]semi[-_]space[-_]size[=\s]/;

/** V8's heap limit is the old generation plus the young one (3 semi-spaces, up to 48 MiB). */
const YOUNG_GENERATION_SLACK_MIB = 64;

/**
 * The flags to add to node for `command`, given the limit and the flags node already has (its
 * execArgv and NODE_OPTIONS, which always win). The webhook, a long-lived server, always gets
 * both; other commands are one-shot processes that would pay a second node start-up (~60 ms of
 * CPU) for them, so they get the heap cap only under a memory limit (in a pod), where it matters
 * most. No cap either when V8's heap limit (`heapLimitMiB`) is already within it: node sizes the
 * heap from a cgroup limit it can read (half of it on 64-bit, but at least 256 MiB), so with limits
 * of 512Mi or more nothing needs re-executing; under the manifests' 384Mi it lowers 256 to 192.
 * `heapLimitMiB` may be a function, called only when a cap is in question: reading it loads
 * node:v8 (~4 ms of every one-shot start, which never needs it on a host without a limit).
 * @param {{ command: string | undefined, limitBytes: number | null, execArgv: readonly string[], nodeOptions: string | undefined, heapLimitMiB?: number | (() => number) }} input
 * @returns {string[]}
 */
export function nodeFlagsFor({ command, limitBytes, execArgv, nodeOptions, heapLimitMiB }) {
  const given = ` ${[...execArgv, nodeOptions ?? ''].join(' ')} `;
  const server = command === 'webhook';
  const flags = [];
  if (server && !SEMI_SPACE_FLAG.test(given)) flags.push(`--max-semi-space-size=${WEBHOOK_SEMI_SPACE_MIB}`);
  const cap = oldSpaceMiB(limitBytes);
  if (!(server || limitBytes !== null) || OLD_SPACE_FLAG.test(given)) return flags;
  const heapLimit = typeof heapLimitMiB === 'function' ? heapLimitMiB() : heapLimitMiB;
  const alreadyWithin = heapLimit !== undefined && heapLimit <= cap + YOUNG_GENERATION_SLACK_MIB;
  if (!alreadyWithin) flags.push(`--max-old-space-size=${cap}`);
  return flags;
}

/** @param {string} file */
function readOrUndefined(file) {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * This process's memory limit: its own cgroup's file (the path from /proc/self/cgroup; in a pod
 * the cgroup namespace makes that the root of /sys/fs/cgroup), then the root one.
 * @param {NodeJS.ProcessEnv} env
 * @returns {number | null}
 */
export function readMemoryLimitBytes(env) {
  const cgroups = readOrUndefined('/proc/self/cgroup') ?? '';
  const v2Path = /^0::(\/.*)$/m.exec(cgroups)?.[1] ?? '/';
  const v1Path = /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(\/.*)$/m.exec(cgroups)?.[1] ?? '/';
  const first = (...files) => files.map(readOrUndefined).find((text) => text !== undefined);
  return memoryLimitBytes(
    {
      v2: first(`/sys/fs/cgroup${v2Path.replace(/\/$/, '')}/memory.max`, '/sys/fs/cgroup/memory.max'),
      v1: first(
        `/sys/fs/cgroup/memory${v1Path.replace(/\/$/, '')}/memory.limit_in_bytes`,
        '/sys/fs/cgroup/memory/memory.limit_in_bytes',
      ),
      env: env.ETCD_GUARD_MEMORY_LIMIT,
    },
    os.totalmem(),
  );
}
