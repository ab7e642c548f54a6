// `etcd-guard webhook` as its own process (bin/etcd-guard.mjs, as the image runs it), for tests
// that attack it from outside: its event loop and memory are its own, so what a storm costs it is
// measured (RSS from /proc/<pid>/status) without the attacker's work mixed in.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const BIN = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'etcd-guard.mjs');

export interface WebhookProcess {
  /** e.g. https://127.0.0.1:41234 (http:// with insecureHttp) */
  url: string;
  port: number;
  /** e.g. http://127.0.0.1:41235, with metricsPort; else null. */
  metricsUrl: string | null;
  pid: number;
  /** Resident memory now and its peak so far (VmRSS, VmHWM), in MiB. */
  memoryMiB(): { rss: number; peak: number };
  /** CPU time (user + system) the process has used so far, in ms. */
  cpuMs(): number;
  /** Everything the process printed so far (JSON log lines). */
  output(): string;
  /** SIGTERM, then SIGKILL if it has not exited within 10 s. */
  stop(): Promise<void>;
}

export interface StartWebhookProcessOptions {
  configFile: string;
  /** The serving key pair; absent with insecureHttp. */
  certFile?: string;
  keyFile?: string;
  /** Plain HTTP (--insecure-http) instead of HTTPS. */
  insecureHttp?: boolean;
  /** Also serve GET /metrics on a loopback port (--metrics-listen). */
  metricsPort?: boolean;
  env?: Record<string, string>;
  /** How long to wait for the listening line (tsx compiles the sources on a cold start). */
  startTimeoutMs?: number;
  /** Flags for node before the bin, as the image's ENTRYPOINT gives them. */
  nodeArgs?: readonly string[];
  /** Starts the command line through another (e.g. a memory cgroup's MemoryCgroup.wrap). */
  wrap?: (command: string, args: readonly string[]) => [string, string[]];
}

function statusMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
  if (!match?.[1]) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(match[1]) / 1024;
}

export async function startWebhookProcess(options: StartWebhookProcessOptions): Promise<WebhookProcess> {
  const wrap = options.wrap ?? ((command: string, args: readonly string[]): [string, string[]] => [command, [...args]]);
  const [command, args] = wrap(process.execPath, [
    ...(options.nodeArgs ?? []),
    BIN,
    'webhook',
    '--config',
    options.configFile,
    '--listen',
    '127.0.0.1:0',
    ...(options.insecureHttp === true
      ? ['--insecure-http']
      : ['--tls-cert', options.certFile ?? '', '--tls-key', options.keyFile ?? '']),
    ...(options.metricsPort === true ? ['--metrics-listen', '127.0.0.1:0'] : []),
  ]);
  const child: ChildProcess = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOG_LEVEL: 'info', ...options.env },
  });
  let output = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const timeoutMs = options.startTimeoutMs ?? 30_000;
  let url: string;
  try {
    url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listening line within ${timeoutMs} ms: ${output}`)), timeoutMs);
      const look = () => {
        // The whole listening line (it also names the metrics URL), not a chunk of it.
        const match = /"url":"(https?:\/\/127\.0\.0\.1:\d+)"[^\n]*\n/.exec(output);
        if (match?.[1]) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      };
      child.stdout?.on('data', look);
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`the webhook exited ${code} before listening: ${output}`));
      });
    });
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  const pid = child.pid;
  if (pid === undefined) throw new Error('the webhook process has no pid');
  const metricsUrl = /"metricsUrl":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(output)?.[1] ?? null;
  if (options.metricsPort === true && metricsUrl === null) throw new Error(`no metricsUrl in the listening line: ${output}`);
  return {
    url,
    port: Number(new URL(url).port),
    metricsUrl,
    pid,
    memoryMiB: () => ({ rss: statusMiB(pid, 'VmRSS'), peak: statusMiB(pid, 'VmHWM') }),
    cpuMs: () => {
      // Fields 14 and 15 of /proc/<pid>/stat, in clock ticks (100 per second on Linux); the
      // command name (field 2) may hold spaces, so count from its closing parenthesis.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return (Number(fields[11]) + Number(fields[12])) * 10;
    },
    output: () => output,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
    },
  };
}
