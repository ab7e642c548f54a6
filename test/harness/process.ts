// Runs a child process to its end and hands back what it printed, how it exited and how long it
// took. Every run has a deadline: a process that overruns is SIGKILLed and the run rejects.
import { spawn } from 'node:child_process';

export interface ProcessRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** From spawn to the end, measured from outside the process. */
  wallMs: number;
  /**
   * Node's own report of an uncaught exception or unhandled rejection that ended the process
   * (its stderr from the first such line), or null: a test asserts it is null, so a crash of a
   * child fails the suite as one in the test process would.
   */
  uncaught: string | null;
}

/** Node ≥ 18 ends a crash report with "Node.js v<version>"; older lines name the mechanism. */
const CRASH_MARKERS = /triggerUncaughtException|UnhandledPromiseRejection|ERR_UNHANDLED_REJECTION|^Node\.js v\d+/m;

export function uncaughtReport(stderr: string): string | null {
  const match = CRASH_MARKERS.exec(stderr);
  return match === null ? null : stderr.slice(Math.max(0, match.index - 2_000), match.index + 500);
}

export interface RunProcessOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
  /**
   * Start the child as the leader of its own process group and SIGKILL the whole group on
   * overrun, for tools (serverless) that leave grandchildren behind.
   */
  processGroup?: boolean;
  /**
   * 'close' (default) waits until stdout and stderr are drained as well; 'exit' settles when
   * the process itself exits, for tools whose grandchildren may hold the pipes open.
   */
  settleOn?: 'close' | 'exit';
  /** Called with the child's pid once it is spawned (e.g. to sample its memory from /proc). */
  onSpawn?: (pid: number) => void;
}

export const DEFAULT_PROCESS_TIMEOUT_MS = 30_000;

export function runProcess(command: string, args: string[], options: RunProcessOptions = {}): Promise<ProcessRun> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_PROCESS_TIMEOUT_MS;
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      detached: options.processGroup ?? false,
      // A tool that reads stdin when given no input (serverless invoke local) must never wait on it.
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    if (child.pid !== undefined) options.onSpawn?.(child.pid);
    let stdout = '';
    let stderr = '';
    // setEncoding keeps a multi-byte character split across two chunks whole.
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const guard = setTimeout(() => {
      if (options.processGroup && child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      else child.kill('SIGKILL');
      reject(
        new Error(`${command} ${args.join(' ')} did not finish within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`),
      );
    }, timeoutMs);
    child.once('error', (error) => {
      clearTimeout(guard);
      reject(error);
    });
    child.once(options.settleOn ?? 'close', (code: number | null) => {
      clearTimeout(guard);
      resolve({ code, stdout, stderr, wallMs: performance.now() - started, uncaught: uncaughtReport(stderr) });
    });
  });
}
