// The JSON logger of every deployable (webhook, scheduled and HTTP functions, CLI). Redaction is
// configured here once so no caller can forget it: bearer tokens, TLS keys and passwords must
// never reach a log line.
import { pino, type Logger, type DestinationStream } from 'pino';

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
    timestamp: pino.stdTimeFunctions.isoTime,
    base: undefined,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  const logger = options.destination ? pino(settings, options.destination) : pino(settings);
  if (env.LOG_LEVEL !== undefined && logLevelFromEnv(env) !== env.LOG_LEVEL.trim().toLowerCase()) {
    logger.warn({ logLevel: env.LOG_LEVEL }, 'unknown LOG_LEVEL, using info');
  }
  return logger;
}
