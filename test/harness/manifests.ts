// What the manifests tests share: the kustomize manifests read the way Kubernetes reads them
// (YAML 1.1), the documents of the base picked out by kind, the two workloads, the embedded guard
// config parsed with the product's schema, and processes run from the repository root.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { COMMAND_OPTIONS } from '../../functions/entrypoints/cli.js';
import type { GuardConfig } from '../../functions/domain/config.js';
import { parseGuardConfigText } from '../../functions/entrypoints/config-file.js';
import { runProcess, type ProcessRun } from './process.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BASE_DIR = path.join(ROOT, 'manifests/base');
export const OVERLAY_DIR = path.join(ROOT, 'manifests/overlays/cert-manager');
export const OVERLAYS_DIR = path.join(ROOT, 'manifests/overlays');
export const COMPONENTS_DIR = path.join(ROOT, 'manifests/components');
export const CERT_SCRIPT = path.join(ROOT, 'scripts/make-webhook-cert.sh');
export const TSX = path.join(ROOT, 'node_modules/.bin/tsx');

// ---------------------------------------------------------------------------------------------
// Small helpers: YAML values are unknown until narrowed.

export type Obj = Record<string, unknown>;

export function isObj(value: unknown): value is Obj {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Reads a nested field; undefined when any step is missing. */
export function at(value: unknown, ...keys: (string | number)[]): unknown {
  let current = value;
  for (const key of keys) {
    if (typeof key === 'number') {
      if (!Array.isArray(current)) return undefined;
      current = current[key];
    } else {
      if (!isObj(current)) return undefined;
      current = current[key];
    }
  }
  return current;
}

export function objs(value: unknown): Obj[] {
  return Array.isArray(value) ? value.filter(isObj) : [];
}

export function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

export function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

export interface Manifest {
  file: string;
  doc: Obj;
}

/** Kubernetes reads YAML 1.1 (0440 is octal), so parse the way it does. */
export function readDocuments(file: string): Obj[] {
  const documents = parseAllDocuments(readFileSync(file, 'utf8'), { version: '1.1' });
  const list = Array.isArray(documents) ? documents : [documents];
  return list.flatMap((document) => {
    if (document.errors.length > 0) {
      throw new Error(`${file}: ${document.errors.map((error) => error.message).join('; ')}`);
    }
    const value: unknown = document.toJS();
    return value === null || value === undefined ? [] : [value as Obj];
  });
}

export interface Kustomization {
  dir: string;
  resources: string[];
  patches: string[];
  components: string[];
  /** Files a configMapGenerator or secretGenerator reads (`key=path` entries give their path). */
  generatorFiles: string[];
}

export function readKustomization(dir: string): Kustomization {
  const [doc] = readDocuments(path.join(dir, 'kustomization.yaml'));
  return {
    dir,
    resources: strings(at(doc, 'resources')),
    patches: objs(at(doc, 'patches')).flatMap((patch) => (typeof patch.path === 'string' ? [patch.path] : [])),
    components: strings(at(doc, 'components')),
    generatorFiles: [...objs(at(doc, 'configMapGenerator')), ...objs(at(doc, 'secretGenerator'))].flatMap((generator) =>
      strings(generator.files).map((file) => file.split('=').at(-1) ?? file),
    ),
  };
}

function isDirectory(file: string): boolean {
  return existsSync(file) && statSync(file).isDirectory();
}

/** The resource documents a kustomization contributes itself (bases are loaded separately). */
export function ownManifests(kustomization: Kustomization): Manifest[] {
  return kustomization.resources
    .map((resource) => path.join(kustomization.dir, resource))
    .filter((file) => !isDirectory(file))
    .flatMap((file) => readDocuments(file).map((doc) => ({ file, doc })));
}

export const base = readKustomization(BASE_DIR);
export const overlay = readKustomization(OVERLAY_DIR);
export const baseManifests = ownManifests(base);

export function ofKind(kind: string, manifests: Manifest[] = baseManifests): Obj[] {
  return manifests.filter((manifest) => manifest.doc.kind === kind).map((manifest) => manifest.doc);
}

export function only(kind: string, manifests: Manifest[] = baseManifests): Obj {
  const found = ofKind(kind, manifests);
  expect(found, `exactly one ${kind}`).toHaveLength(1);
  return found[0] as Obj;
}

export function name(doc: Obj): string {
  return text(at(doc, 'metadata', 'name')) ?? '';
}

const namespace = only('Namespace');
export const guardNamespace = name(namespace);
export const deployment = only('Deployment');
export const cronJob = only('CronJob');
export const service = only('Service');
export const webhookConfiguration = only('ValidatingWebhookConfiguration');
export const configMap = ofKind('ConfigMap').find((doc) => name(doc) === 'etcd-guard-config') ?? {};

export const workloads: Array<{ what: string; podSpec: Obj; podLabels: Obj }> = [
  {
    what: 'webhook Deployment',
    podSpec: (at(deployment, 'spec', 'template', 'spec') ?? {}) as Obj,
    podLabels: (at(deployment, 'spec', 'template', 'metadata', 'labels') ?? {}) as Obj,
  },
  {
    what: 'evaluate CronJob',
    podSpec: (at(cronJob, 'spec', 'jobTemplate', 'spec', 'template', 'spec') ?? {}) as Obj,
    podLabels: (at(cronJob, 'spec', 'jobTemplate', 'spec', 'template', 'metadata', 'labels') ?? {}) as Obj,
  },
];

export function labelsMatch(selector: unknown, labels: Obj): boolean {
  const wanted = at(selector, 'matchLabels');
  if (!isObj(wanted) || Object.keys(wanted).length === 0) return false;
  return Object.entries(wanted).every(([key, value]) => labels[key] === value);
}

// ---------------------------------------------------------------------------------------------
// Processes

/** Runs a command in the repo root, SIGKILLed if it overruns (30 s unless told). */
export function run(
  command: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<ProcessRun> {
  return runProcess(command, args, { cwd: ROOT, ...options });
}

const tempDirs: string[] = [];
/** A fresh directory, removed by removeTempDirs (each file that makes some calls it in afterAll). */
export function makeTempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'etcd-guard-manifests-'));
  tempDirs.push(dir);
  return dir;
}
export function removeTempDirs(): void {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

export function commandExists(command: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => dir !== '' && existsSync(path.join(dir, command)));
}

// Parsed lazily so a config the schema rejects fails the tests that need it, with the schema's message.
let parsedConfig: GuardConfig | undefined;
/** The guard config embedded in the base's etcd-guard-config ConfigMap. */
export function guardConfig(): GuardConfig {
  parsedConfig ??= parseGuardConfigText(String(at(configMap, 'data', 'config.yaml') ?? ''), 'etcd-guard-config/config.yaml');
  return parsedConfig;
}

export function containerOf(podSpec: Obj): Obj {
  const containers = objs(podSpec.containers);
  expect(containers).toHaveLength(1);
  return containers[0] as Obj;
}

/** The CLI's own flag table (functions/entrypoints/cli.ts) as `--flag` → takes a value; undefined: no such command. */
function cliFlags(command: string): Map<string, boolean> | undefined {
  if (command !== 'evaluate' && command !== 'webhook') return undefined;
  const options: Record<string, { type: 'string' | 'boolean' }> = COMMAND_OPTIONS[command];
  return new Map(Object.entries(options).map(([option, { type }]) => [`--${option}`, type === 'string']));
}

/** Parses container args like the CLI would: a command, then flags (`--flag value` or `--flag=value`). */
export function parseCliArgs(args: string[]): { command: string; flags: Map<string, string | true> } {
  const [command, ...rest] = args;
  const known = cliFlags(command ?? '');
  if (known === undefined) throw new Error(`unknown command ${JSON.stringify(command)}`);
  const flags = new Map<string, string | true>();
  for (let index = 0; index < rest.length; index += 1) {
    const argument = rest[index] ?? '';
    const [flag = '', inlineValue] = argument.split(/=(.*)/s, 2);
    const takesValue = known.get(flag);
    if (takesValue === undefined) throw new Error(`${command}: unknown flag ${JSON.stringify(argument)}`);
    if (flags.has(flag)) throw new Error(`${command}: ${flag} given twice`);
    if (!takesValue) {
      flags.set(flag, true);
      continue;
    }
    const value = inlineValue ?? rest[(index += 1)];
    if (value === undefined || value.startsWith('--')) throw new Error(`${command}: ${flag} needs a value`);
    flags.set(flag, value);
  }
  return { command: command ?? '', flags };
}
