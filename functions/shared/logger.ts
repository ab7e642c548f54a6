// The JSON logger of every deployable (webhook, scheduled and HTTP functions, CLI). Redaction is
// configured here once so no caller can forget it: bearer tokens, TLS keys and passwords must
// never reach a log line.
import { destination as pinoDestination, pino, type Logger, type DestinationStream } from 'pino';

export type { Logger } from 'pino';

const LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

/** Paths pino censors wherever they occur in a logged object (one and two levels deep). */
export const REDACTED_PATHS = [
  'authorization',
  'token',
  'key',
  'password',
  'secret',
  '*.authorization',
  '*.Authorization',
  '*.token',
  '*.key',
  '*.keyFile',
  '*.password',
  '*.secret',
  'headers.authorization',
  'req.headers.authorization',
  'request.headers.authorization',
  '*.headers.authorization',
  '*.headers.cookie',
];

export interface LoggerOptions {
  /** Environment to read LOG_LEVEL from. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Where lines go; stdout when absent. Tests pass a collecting stream. */
  destination?: DestinationStream;
  name?: string;
  /**
   * Write stdout without blocking and in batches (ignored with `destination`): lines collect until
   * BUFFERED_MIN_BYTES are waiting or BUFFERED_FLUSH_MS have passed, then go out in one write on
   * libuv's thread pool. For the webhook, whose line per decision otherwise cost a thread-pool
   * round trip per request (more CPU than the rest of the decision when it was measured;
   * BENCHMARKS.md), and earlier a blocking write(2) each. pino flushes what is
   * pending when the process exits; a process killed outright loses at most the last batch.
   */
  buffered?: boolean;
}

/** A buffered logger writes once this much is waiting (SonicBoom's limit for one write is 16 KiB)... */
export const BUFFERED_MIN_BYTES = 8 * 1024;
/** ...or once this long has passed, whichever comes first. */
export const BUFFERED_FLUSH_MS = 100;

/** The second isoTime last formatted, and its ISO text up to and including the ".". */
let formattedSecond = Number.NaN;
let secondPrefix = '';

/**
 * pino's stdTimeFunctions.isoTime, character for character (`,"time":"<Date#toISOString>"`), with
 * the date and time of day formatted once per second: toISOString showed in the webhook's CPU
 * profile at a line per admission request. functions/shared/logger.test.ts compares the two.
 */
export function isoTime(nowMs: number = Date.now()): string {
  const second = Math.floor(nowMs / 1000);
  if (second !== formattedSecond) {
    const iso = new Date(second * 1000).toISOString();
    secondPrefix = iso.slice(0, iso.length - 4);
    formattedSecond = second;
  }
  const ms = nowMs - second * 1000;
  return `,"time":"${secondPrefix}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z"`;
}

/** Resolves LOG_LEVEL; an unknown value falls back to info rather than crashing the process. */
export function logLevelFromEnv(env: Readonly<Record<string, string | undefined>>): string {
  const wanted = env.LOG_LEVEL?.trim().toLowerCase();
  return wanted !== undefined && LEVELS.has(wanted) ? wanted : 'info';
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const env = options.env ?? process.env;
  const level = logLevelFromEnv(env);
  const settings = {
    name: options.name ?? 'etcd-guard-webhook',
    level,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    timestamp: () => isoTime(),
    base: undefined,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  const destination =
    options.destination ??
    (options.buffered === true
      ? pinoDestination({ dest: 1, sync: false, minLength: BUFFERED_MIN_BYTES, periodicFlush: BUFFERED_FLUSH_MS })
      : undefined);
  const logger = destination ? pino(settings, destination) : pino(settings);
  if (env.LOG_LEVEL !== undefined && logLevelFromEnv(env) !== env.LOG_LEVEL.trim().toLowerCase()) {
    logger.warn({ logLevel: env.LOG_LEVEL }, 'unknown LOG_LEVEL, using info');
  }
  return logger;
}

/**
 * A child of `logger` that skips redaction, for a line whose fields are all fixed by the caller and
 * flat (strings, numbers, booleans; no nested object, no field named like a secret), so no
 * redacted path can match it. pino's redaction clones and walks every line for the wildcard
 * paths, which was the largest single cost of a cached allow when measured (BENCHMARKS.md). Use
 * it only where the fields are written out at the call site, never for error objects or anything
 * passed through.
 */
export function flatLineLogger(logger: Logger): Logger {
  return logger.child({}, { redact: { paths: [] } });
}
