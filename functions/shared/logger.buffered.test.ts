// The webhook's buffered logger (createLogger({ buffered: true })) batches its lines: a lone line
// still reaches stdout within BUFFERED_FLUSH_MS while the process keeps running, a burst goes out
// whole, and whatever is pending when the process exits is written before it ends.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { BUFFERED_FLUSH_MS } from './logger.js';

const LOGGER = pathToFileURL(path.join(path.dirname(fileURLToPath(import.meta.url)), './logger.ts')).href;

/** Runs `script` in a fresh node (tsx) and resolves with each stdout line and when it arrived. */
function run(script: string): Promise<{ lines: { at: number; entry: Record<string, unknown> }[]; code: number | null }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines: { at: number; entry: Record<string, unknown> }[] = [];
    let rest = '';
    child.stdout.on('data', (chunk: Buffer) => {
      const text = rest + chunk.toString('utf8');
      const parts = text.split('\n');
      rest = parts.pop() ?? '';
      for (const part of parts)
        lines.push({ at: performance.now() - started, entry: JSON.parse(part) as Record<string, unknown> });
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ lines, code });
    });
  });
}

describe('the buffered logger', () => {
  it('writes a lone line within the flush period while the process runs on', async () => {
    // The process logs, notes the time, then stays alive 3 s: the line must not wait for exit.
    const { lines, code } = await run(`
      const { createLogger } = await import(${JSON.stringify(LOGGER)});
      const logger = createLogger({ buffered: true, env: {} });
      logger.info({ at: performance.now() }, 'lone');
      setTimeout(() => logger.info('last'), 3000);`);
    expect(code).toBe(0);
    expect(lines.map((line) => line.entry.msg)).toEqual(['lone', 'last']);
    const [lone, last] = lines;
    // Well before the 3 s the process lives on (flush period plus generous slack for a loaded machine).
    expect((last?.at ?? 0) - (lone?.at ?? 0)).toBeGreaterThan(3000 - 1500);
    expect(BUFFERED_FLUSH_MS).toBeLessThanOrEqual(250);
  }, 40_000);

  it('writes every line of a burst, and what is pending at exit, in order', async () => {
    const { lines, code } = await run(`
      const { createLogger } = await import(${JSON.stringify(LOGGER)});
      const logger = createLogger({ buffered: true, env: {} });
      for (let index = 0; index < 5000; index++) logger.info({ index }, 'burst');
      logger.info('pending at exit');
      process.exit(3);`);
    expect(code).toBe(3);
    const burst = lines.filter((line) => line.entry.msg === 'burst').map((line) => line.entry.index);
    expect(burst).toEqual(Array.from({ length: 5000 }, (_unused, index) => index));
    expect(lines.at(-1)?.entry.msg).toBe('pending at exit');
  }, 40_000);
});
