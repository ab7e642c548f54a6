// Shared bench helpers: percentiles, peak RSS from /proc, child processes running TypeScript
// through tsx (so a server's RSS is its own), and the result table every section adds rows to.
import type autocannon from 'autocannon';
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));
export const REPO_DIR = path.resolve(BENCH_DIR, '..');

/** Nearest-rank percentile of unsorted samples; NaN for no samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

export function median(samples: readonly number[]): number {
  return percentile(samples, 50);
}

/**
 * Peak resident set (VmHWM) of a live process in MiB, from /proc. The kernel keeps the high-water
 * mark itself, so one read before the process ends sees the peak without sampling.
 */
export function peakRssMiB(pid: number | 'self'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /^VmHWM:\s+(\d+)\s+kB/m.exec(status);
  if (!match?.[1]) throw new Error(`no VmHWM in /proc/${pid}/status`);
  return Number(match[1]) / 1024;
}

/**
 * CPU time (user + system, all threads) a live process has used, in ms, from /proc/<pid>/stat.
 * Per request it is far steadier than requests/s on a shared machine: another process's load
 * lowers a server's rate but not what each of its requests costs.
 */
export function cpuTimeMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  const ticks = Number(fields[11]) + Number(fields[12]);
  if (!Number.isFinite(ticks)) throw new Error(`no CPU times in /proc/${pid}/stat`);
  // USER_HZ is 100 on every Linux this runs on.
  return ticks * 10;
}

/** `node --import tsx FILE ARGS…` with an IPC channel; stdout/stderr as given (ignore by default). */
export function spawnTsx(
  file: string,
  args: string[],
  options: { stdio?: StdioOptions; env?: NodeJS.ProcessEnv; nodeArgs?: string[] } = {},
): ChildProcess {
  return spawn(process.execPath, [...(options.nodeArgs ?? []), '--import', 'tsx', path.join(BENCH_DIR, file), ...args], {
    cwd: REPO_DIR,
    stdio: options.stdio ?? ['ignore', 'ignore', 'inherit', 'ipc'],
    env: options.env ?? process.env,
  });
}

/** A bench child that ended before it answered; `signal` says it was killed (e.g. SIGSEGV). */
export class ChildEndedEarly extends Error {
  constructor(
    what: string,
    readonly code: number | null,
    readonly signal: NodeJS.Signals | null,
  ) {
    super(`${what}: exited (code ${String(code)}, signal ${String(signal)}) before answering`);
  }
}

/**
 * `run`, once more when its child was killed by a signal (a SIGSEGV in Node's TLS code was found
 * and worked around in the probe on 2026-12-01; a crash is still worth a note, not a lost
 * section): the value, and what happened to the first child or null. Any other failure, or a
 * second crash, is thrown.
 */
export async function onceMoreIfKilled<T>(
  run: () => Promise<T>,
  log: (line: string) => void,
): Promise<{ value: T; crashed: string | null }> {
  try {
    return { value: await run(), crashed: null };
  } catch (error) {
    if (!(error instanceof ChildEndedEarly) || error.signal === null) throw error;
    log(`${error.message}; running it once more`);
    return { value: await run(), crashed: error.signal };
  }
}

/** The first IPC message of `child`, or an error when it exits or `timeoutMs` passes first. */
export function firstMessage<T>(child: ChildProcess, timeoutMs: number, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`${what}: no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    const onMessage = (message: unknown) => {
      cleanup();
      resolve(message as T);
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      cleanup();
      reject(new ChildEndedEarly(what, code, signal));
    };
    const cleanup = () => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

/** SIGKILL and wait for the 'exit' event (a zombie still passes kill -0, so never poll for death). */
export function killAndWait(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGKILL');
  return exited;
}

/** How a ratio is judged: ours/baseline at most `max`, or at least `min`; or an absolute bound. */
export type Target =
  | { kind: 'ratio-max'; max: number }
  | { kind: 'ratio-min'; min: number }
  | { kind: 'value-max'; max: number; unit: string }
  | { kind: 'info' };

export interface ResultRow {
  section: string;
  figure: string;
  ours: number;
  /** null when the figure has no baseline (e.g. RSS against a fixed bound). */
  baseline: number | null;
  unit: string;
  target: Target;
  note?: string;
}

export function ratioOf(row: ResultRow): number | null {
  if (row.baseline === null || !(row.baseline > 0)) return null;
  return row.ours / row.baseline;
}

/** true/false for a judged row, null for an informational one. */
export function targetMet(row: ResultRow): boolean | null {
  const ratio = ratioOf(row);
  switch (row.target.kind) {
    case 'ratio-max':
      return ratio !== null && ratio <= row.target.max;
    case 'ratio-min':
      return ratio !== null && ratio >= row.target.min;
    case 'value-max':
      return row.ours <= row.target.max;
    case 'info':
      return null;
  }
}

function formatNumber(value: number, unit: string): string {
  if (!Number.isFinite(value)) return 'n/a';
  const digits = Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : 2;
  return `${value.toFixed(digits)}${unit === '' ? '' : ` ${unit}`}`;
}

function describeTarget(row: ResultRow): string {
  switch (row.target.kind) {
    case 'ratio-max':
      return `ratio ≤ ${row.target.max}`;
    case 'ratio-min':
      return `ratio ≥ ${row.target.min}`;
    case 'value-max':
      return `≤ ${row.target.max} ${row.target.unit}`;
    case 'info':
      return '—';
  }
}

export function tableCells(row: ResultRow): string[] {
  const ratio = ratioOf(row);
  const met = targetMet(row);
  return [
    row.figure,
    formatNumber(row.ours, row.unit),
    row.baseline === null ? '—' : formatNumber(row.baseline, row.unit),
    ratio === null ? '—' : `${ratio.toFixed(2)}×`,
    describeTarget(row),
    met === null ? '—' : met ? 'met' : 'MISSED',
  ];
}

export const TABLE_HEADER = ['figure', 'ours', 'baseline', 'ratio', 'target', 'met?'];

/** A Markdown table (also readable on a terminal). */
export function markdownTable(rows: readonly ResultRow[]): string {
  const lines = [`| ${TABLE_HEADER.join(' | ')} |`, `|${TABLE_HEADER.map(() => '---').join('|')}|`];
  for (const row of rows) lines.push(`| ${tableCells(row).join(' | ')} |`);
  return lines.join('\n');
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A time-bounded wait on a condition (no fixed sleeps as synchronisation). */
export async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${what}: not true within ${timeoutMs} ms`);
}

/**
 * A guard config for a webhook that serves one file-store target from its cache only (no inline
 * refresh), so a bench measures admission and not etcd. The address is never dialled.
 */
export function benchGuardConfig(
  storeDir: string,
  target: string,
  options: { maxAgeSeconds?: number; events?: boolean; configMapNamespace?: string } = {},
): string {
  return JSON.stringify({
    store:
      options.configMapNamespace === undefined
        ? { kind: 'file', dir: storeDir }
        : { kind: 'configmap', namespace: options.configMapNamespace },
    maxAgeSeconds: options.maxAgeSeconds ?? 600,
    inlineRefresh: false,
    ...(options.events !== undefined && { events: options.events }),
    targets: [{ name: target, endpoints: ['https://127.0.0.1:2379'], timeout: '2s' }],
  });
}

/** `etcd-guard webhook` over HTTPS on `listen` with the given config and certificate: argv after node and its flags. */
export function webhookArgs(bin: string, configFile: string, listen: string, certFile: string, keyFile: string): string[] {
  return [bin, 'webhook', '--config', configFile, '--listen', listen, '--tls-cert', certFile, '--tls-key', keyFile];
}

/** autocannon's options for POSTing `body` to `url`'s /validate as the apiserver does (its timeout in the query). */
export function validateLoad(url: string, body: string, connections: number, seconds: number): autocannon.Options {
  return {
    url: `${url}/validate?timeout=10s`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    connections,
    duration: seconds,
  };
}

/**
 * The webhook of the checkout or image layout at `root` (its bin/ and dist/) on 127.0.0.1:`port`,
 * as production runs it (NODE_ENV=production), with `nodeArgs` before the script; stderr shown.
 */
export function spawnWebhook(
  root: string,
  options: {
    nodeArgs: string[];
    configFile: string;
    port: number;
    certFile: string;
    keyFile: string;
    cwd: string;
    env?: NodeJS.ProcessEnv;
  },
): ChildProcess {
  const { nodeArgs, configFile, port, certFile, keyFile, cwd, env = {} } = options;
  const bin = path.join(root, 'bin/etcd-guard.mjs');
  return spawn(process.execPath, [...nodeArgs, ...webhookArgs(bin, configFile, `127.0.0.1:${port}`, certFile, keyFile)], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, NODE_ENV: 'production', ...env },
    cwd,
  });
}

/** GET /readyz until it answers 200 (the cache holds the target's evaluation), within `timeoutMs`. */
export async function waitReady(url: string, child: ChildProcess, timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let exited = false;
  child.once('exit', () => (exited = true));
  let last = 'no answer yet';
  while (performance.now() < deadline) {
    if (exited) throw new Error(`webhook at ${url} exited before it was ready`);
    const status = await new Promise<number>((resolve) => {
      const request = https.get(`${url}/readyz`, { rejectUnauthorized: false, agent: false, timeout: 1_000 }, (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      });
      request.on('timeout', () => request.destroy(new Error('timeout')));
      request.on('error', (error) => {
        last = error.message;
        resolve(0);
      });
    });
    if (status === 200) return;
    if (status !== 0) last = `status ${status}`;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`webhook at ${url} not ready within ${timeoutMs} ms (${last})`);
}
