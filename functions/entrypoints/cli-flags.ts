// The ONE table of the CLI's commands and flags. The parser (util.parseArgs options), every
// `etcd-guard <command> --help`, the top-level usage, docs/cli.md and the manifests test (which
// checks the Deployment's and CronJob's args) are all derived from it, so none can drift.
// A new command is one more entry in COMMANDS plus its case in cli.ts's main().
import type { ParseArgsConfig } from 'node:util';

export interface FlagSpec {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  /** Placeholder for the value in help, e.g. URL[,URL...]; string flags only. */
  readonly value?: string;
  /** What applies when the flag is absent, as help shows it. */
  readonly defaultText: string;
  readonly description: string;
}

export interface CommandSpec {
  readonly summary: string;
  /** Synopsis lines after `etcd-guard `; a line starting with a space continues the one before. */
  readonly usage: readonly string[];
  readonly flags: Readonly<Record<string, FlagSpec>>;
  /** Whole command lines, each runnable as shown once the files and endpoints exist. */
  readonly examples: readonly string[];
  readonly notes: readonly string[];
}

const HELP_FLAG = {
  type: 'boolean',
  short: 'h',
  defaultText: 'off',
  description: 'print this help and exit 0',
} as const satisfies FlagSpec;

const EVALUATE = {
  summary: 'Evaluate one etcd cluster, or every target of a config file, and print the result.',
  usage: [
    'evaluate --endpoints URL[,URL...] [--cacert F --cert F --key F] [--timeout D] [--target NAME]',
    '         [--output table|wide|json] [--store none|file:DIR|configmap[:NAMESPACE]] [--quota-backend-bytes N]',
    'evaluate --config FILE [--store ...] [--output table|wide|json] [--every D]',
    '         [--shard INDEX/COUNT | --shard-count N] [--budget D]',
  ],
  flags: {
    endpoints: {
      type: 'string',
      value: 'URL[,URL...]',
      defaultText: 'none; required without --config',
      description: 'client URLs, http(s)://HOST:PORT; one is enough, the other members are found in its member list',
    },
    cacert: {
      type: 'string',
      value: 'FILE',
      defaultText: 'system roots',
      description: "CA bundle that signed the members' certificates",
    },
    cert: { type: 'string', value: 'FILE', defaultText: 'none', description: 'client certificate (with --key)' },
    key: { type: 'string', value: 'FILE', defaultText: 'none', description: 'client private key (with --cert); never printed' },
    timeout: {
      type: 'string',
      value: 'DURATION',
      defaultText: '2s',
      description: 'budget for talking to etcd, counted from the first etcd call (not from start-up); at least 100ms',
    },
    target: {
      type: 'string',
      value: 'NAME',
      defaultText: 'default',
      description: 'name of the target in the evaluation and the store',
    },
    output: {
      type: 'string',
      value: 'FORMAT',
      defaultText: 'table',
      description: 'table (fits 120 columns), wide (every member column, full reasons) or json (the Evaluation)',
    },
    store: {
      type: 'string',
      value: 'STORE',
      defaultText: "none; with --config the config's store",
      description: 'also write the evaluation: none, file:DIR or configmap[:NAMESPACE]',
    },
    'quota-backend-bytes': {
      type: 'string',
      value: 'N',
      defaultText: "2147483648, etcd's",
      description: "the members' --quota-backend-bytes, for the DB size check",
    },
    config: {
      type: 'string',
      value: 'FILE',
      defaultText: 'none',
      description: "evaluate every target of this guard config (YAML or JSON) and store each: the CronJob's form",
    },
    every: {
      type: 'string',
      value: 'DURATION',
      defaultText: 'once',
      description: 'with --config: repeat at this interval until SIGTERM/SIGINT',
    },
    shard: {
      type: 'string',
      value: 'INDEX/COUNT',
      defaultText: 'all targets',
      description: "with --config: only this shard's targets (rendezvous hashing of the name)",
    },
    'shard-count': {
      type: 'string',
      value: 'N',
      defaultText: 'no sharding',
      description: 'with --config: N shards, INDEX from JOB_COMPLETION_INDEX (an Indexed Job)',
    },
    budget: {
      type: 'string',
      value: 'DURATION',
      defaultText: "the config's runBudget, 45s",
      description: 'with --config: bound of the whole round; targets not finished are reported and exit 1',
    },
    help: HELP_FLAG,
  },
  examples: [
    'etcd-guard evaluate --endpoints https://127.0.0.1:2379 --cacert ca.pem --cert client.pem --key client-key.pem',
    'etcd-guard evaluate --endpoints https://10.0.0.1:2379,https://10.0.0.2:2379 --timeout 1s --output json',
    'etcd-guard evaluate --config guard.yaml --every 30s',
  ],
  notes: [
    'Exit codes: 0 passed (Healthy or Degraded), 1 not passed, 2 usage or configuration error.',
    'With --config: 0 every target was evaluated and stored (whatever the verdicts), 1 one was not, 2 config error.',
    'A hung member costs at most --timeout: evaluate returns within start-up + timeout + 250 ms.',
  ],
} as const satisfies CommandSpec;

const WEBHOOK = {
  summary: 'Serve the validating admission webhook and the /evaluations HTTP API.',
  usage: ['webhook --config FILE [--listen HOST:PORT] [--metrics-listen HOST:PORT] [--tls-cert F --tls-key F | --insecure-http]'],
  flags: {
    config: {
      type: 'string',
      value: 'FILE',
      defaultText: 'none; required',
      description: 'guard config (YAML or JSON), validated at start',
    },
    listen: { type: 'string', value: 'HOST:PORT', defaultText: '0.0.0.0:8443', description: 'address to serve on' },
    'metrics-listen': {
      type: 'string',
      value: 'HOST:PORT',
      defaultText: 'none; no metrics served',
      description: 'serve GET /metrics here (plain HTTP, nothing else on it)',
    },
    'tls-cert': {
      type: 'string',
      value: 'FILE',
      defaultText: 'none',
      description: 'serving certificate (with --tls-key); reloaded when it changes',
    },
    'tls-key': { type: 'string', value: 'FILE', defaultText: 'none', description: 'serving private key (with --tls-cert)' },
    'insecure-http': {
      type: 'boolean',
      defaultText: 'off',
      description: 'serve plain HTTP instead of HTTPS: local experiments only',
    },
    help: HELP_FLAG,
  },
  examples: [
    'etcd-guard webhook --config guard.yaml --tls-cert tls.crt --tls-key tls.key --metrics-listen 0.0.0.0:9090',
    'etcd-guard webhook --config guard.yaml --listen 127.0.0.1:8080 --insecure-http',
  ],
  notes: ['Exit codes: 0 stopped by SIGTERM/SIGINT, 2 usage or configuration error.'],
} as const satisfies CommandSpec;

const TARGETS = {
  summary: 'List every target of a config, static and discovered, with its source and the object it guards.',
  usage: ['targets --config FILE [--output table|json]'],
  flags: {
    config: {
      type: 'string',
      value: 'FILE',
      defaultText: 'none; required',
      description: 'guard config (YAML or JSON); its discovery section is listed against the management cluster',
    },
    output: {
      type: 'string',
      value: 'FORMAT',
      defaultText: 'table',
      description: 'table, or json: { targets, problems, failures }',
    },
    help: HELP_FLAG,
  },
  examples: ['etcd-guard targets --config guard.yaml', 'etcd-guard targets --config guard.yaml --output json'],
  notes: [
    'Discovered names: <source>-<namespace>-<name> (capi: the Cluster, druid: the Etcd) when unambiguous and at most 48 characters, else a readable prefix, "--" and 16 hex digits of SHA-256.',
    'Objects discovery skipped (external etcd, no Cluster, a name collision) are listed on stderr with the reason.',
    'Exit codes: 0 listed, 1 a discovery provider could not list (the rest is shown), 2 usage or configuration error.',
  ],
} as const satisfies CommandSpec;

export const COMMANDS = { evaluate: EVALUATE, webhook: WEBHOOK, targets: TARGETS } as const satisfies Record<string, CommandSpec>;
export type CommandName = keyof typeof COMMANDS;

type ParseArgsOptionsOf<Flags extends Readonly<Record<string, FlagSpec>>> = {
  [Name in keyof Flags]: { type: Flags[Name]['type']; short?: string };
};

/** A command's flags as util.parseArgs takes them. */
export function parseArgsOptions<Flags extends Readonly<Record<string, FlagSpec>>>(flags: Flags): ParseArgsOptionsOf<Flags> {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {};
  for (const [name, flag] of Object.entries(flags)) {
    options[name] = flag.short === undefined ? { type: flag.type } : { type: flag.type, short: flag.short };
  }
  return options as ParseArgsOptionsOf<Flags>;
}

/** Every command's parseArgs options, e.g. for checking manifests' args against the CLI. */
export const COMMAND_OPTIONS = {
  evaluate: parseArgsOptions(EVALUATE.flags),
  webhook: parseArgsOptions(WEBHOOK.flags),
  targets: parseArgsOptions(TARGETS.flags),
} satisfies Record<CommandName, NonNullable<ParseArgsConfig['options']>>;

function synopsisLine(line: string): string {
  return line.startsWith(' ') ? `  ${' '.repeat('etcd-guard '.length)}${line}` : `  etcd-guard ${line}`;
}

function flagLabel(name: string, flag: FlagSpec): string {
  const short = flag.short === undefined ? '' : `-${flag.short}, `;
  return `${short}--${name}${flag.value === undefined ? '' : ` ${flag.value}`}`;
}

/** `etcd-guard <command> --help`: synopsis, every flag with its default, examples, notes. */
export function renderCommandHelp(name: CommandName): string {
  const command: CommandSpec = COMMANDS[name];
  const labels = Object.entries(command.flags).map(([flagName, flag]) => [flagLabel(flagName, flag), flag] as const);
  const width = Math.max(...labels.map(([label]) => label.length));
  return [
    `etcd-guard ${name}: ${command.summary}`,
    '',
    'Usage:',
    ...command.usage.map(synopsisLine),
    '',
    'Flags:',
    ...labels.map(([label, flag]) => `  ${label.padEnd(width)}  ${flag.description} (default: ${flag.defaultText})`),
    '',
    'Examples:',
    ...command.examples.map((example) => `  ${example}`),
    '',
    ...command.notes,
    '',
  ].join('\n');
}

/** `etcd-guard --help`: every command's synopsis. */
export function renderUsage(): string {
  const lines = ['Usage:'];
  for (const command of Object.values(COMMANDS) as CommandSpec[]) {
    lines.push(...command.usage.map(synopsisLine), `      ${command.summary}`);
  }
  lines.push('  etcd-guard --version', '', 'Run `etcd-guard <command> --help` for every flag, its default and examples.', '');
  return lines.join('\n');
}
