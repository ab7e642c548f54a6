// Reading the guard's configuration: a file or the environment, as YAML (a superset of JSON),
// then the one schema in config.ts. Apart from config.ts so that what needs no file (`evaluate
// --endpoints`, the webhook's checks) does not load the YAML parser, a part of every start.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { UsageError } from '../shared/errors.js';
import { ConfigError, parseGuardConfig, type GuardConfig } from '../domain/config.js';

/**
 * Where and what kind of YAML error, never the text around it: the file may not be what it
 * claims (a link to a secret), so its content is described, not quoted.
 */
function describeYamlError(error: unknown): string {
  const { code, linePos } = error as { code?: unknown; linePos?: Array<{ line: number; col: number }> };
  const where = linePos?.[0] ? ` at line ${linePos[0].line}, column ${linePos[0].col}` : '';
  return `${typeof code === 'string' ? code : 'syntax error'}${where}`;
}

/** Parses config text as YAML (a superset of JSON). */
export function parseGuardConfigText(text: string, source: string, baseDir?: string): GuardConfig {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    throw new ConfigError(source, [`not valid YAML or JSON (${describeYamlError(error)})`]);
  }
  return parseGuardConfig(raw, source, baseDir);
}

export function loadGuardConfigFile(file: string): GuardConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(file, [`cannot read the file: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`]);
  }
  return parseGuardConfigText(text, file, path.dirname(path.resolve(file)));
}

/**
 * Loads the config for a deployable that is configured through its environment (serverless
 * functions, CronJob): ETCD_GUARD_CONFIG names a file, ETCD_GUARD_CONFIG_JSON holds the document.
 */
export function loadGuardConfigFromEnv(env: Readonly<Record<string, string | undefined>>): GuardConfig {
  const inline = env.ETCD_GUARD_CONFIG_JSON;
  if (inline !== undefined && inline.trim() !== '') {
    return parseGuardConfigText(inline, 'ETCD_GUARD_CONFIG_JSON');
  }
  const file = env.ETCD_GUARD_CONFIG;
  if (file === undefined || file.trim() === '') {
    throw new ConfigError('environment', ['set ETCD_GUARD_CONFIG (a file) or ETCD_GUARD_CONFIG_JSON (the document)']);
  }
  return loadGuardConfigFile(file);
}

/** loadGuardConfigFile for a CLI command: a bad file is a usage error (exit 2), worded as the ConfigError. */
export function loadGuardConfigForCommand(file: string): GuardConfig {
  try {
    return loadGuardConfigFile(file);
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(error.message);
    throw error;
  }
}
