// Lint rules that catch what the type checker does not: no `any`, no floating promises in the
// request paths, no unused code. Formatting is not linted.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Import direction: the three rings (pure core, adapters, thin entrypoints) and one home for what
// both deployables share. Flat config gives a file the options of the LAST block that matches it,
// so each block below lists every restriction that applies to its files.
const restrictions = {
  // functions/ (the serverless functions and the CLI's evaluation) never depends on the webhook.
  webhook: {
    imports: [
      {
        regex: '^(\\.\\./)+webhook/',
        message: 'functions/ must not import webhook/: move what both need to functions/shared/.',
      },
    ],
    dynamic: [
      {
        selector: 'ImportExpression[source.value=/^(\\.\\.\\/)+webhook\\//]',
        message: 'functions/ must not import webhook/ (only the CLI, which starts it, may load it lazily).',
      },
    ],
  },
  // Only the adapters talk to etcd and Kubernetes; everything else gets their results or errors.
  vendorClients: {
    imports: [
      {
        regex: '^(etcd3|@kubernetes/client-node)(/|$)',
        message: 'only functions/adapters/ imports etcd3 and @kubernetes/client-node: add or use an adapter.',
      },
    ],
    dynamic: [
      {
        selector: 'ImportExpression[source.value=/^(etcd3|@kubernetes\\/client-node)(\\/|$)/]',
        message: 'only functions/adapters/ imports etcd3 and @kubernetes/client-node: add or use an adapter.',
      },
    ],
  },
  // Deadlines have one home; a helper re-exported from elsewhere would hide a second timer.
  deadlineHome: {
    imports: [
      {
        regex: '^(?!(\\.{1,2}/)+(functions/)?(domain/)?deadline\\.js$)',
        importNames: ['Deadline', 'DeadlineExceededError', 'withDeadline', 'withTimeout', 'monotonicNowMs'],
        message: 'import deadline helpers from functions/domain/deadline.ts, their one home.',
      },
    ],
    dynamic: [],
  },
  // Entry points wire config to use cases; nothing beneath them may reach back up (the config
  // types and ConfigError live in functions/domain/config.ts for that reason).
  entrypoints: {
    imports: [
      {
        regex: '(^|/)entrypoints/',
        message:
          'only entry points import entry points: take the value as a parameter, or move the type to functions/domain or functions/ports.',
      },
    ],
    dynamic: [
      {
        selector: 'ImportExpression[source.value=/(^|\\/)entrypoints\\//]',
        message: 'only entry points import entry points (no dynamic import of them either).',
      },
    ],
  },
  // Adapters implement ports; a use case imported by an adapter closes a cycle between the rings.
  useCases: {
    imports: [
      {
        regex: '(^|/)usecases/',
        message:
          'adapters implement ports (functions/ports) and never import use cases: move the shared type or error to a port.',
      },
    ],
    dynamic: [
      {
        selector: 'ImportExpression[source.value=/(^|\\/)usecases\\//]',
        message: 'adapters never import use cases (no dynamic import of them either).',
      },
    ],
  },
  // Pure core and shared helpers: no HTTP server, no file system, no adapters (inputs come in as values).
  pure: {
    imports: [
      {
        regex: '^(express|node:fs|fs)(/|$)',
        message: 'core and shared code stays pure: no express or file system; an entrypoint or adapter passes values in.',
      },
      {
        regex: '(^|/)adapters/',
        message: 'core and shared code must not import adapters: take what they produce as a parameter.',
      },
      {
        regex: '(^|/)usecases/',
        message: 'core and shared code must not import use cases: they orchestrate the domain, not the other way round.',
      },
    ],
    dynamic: [
      {
        selector: 'ImportExpression[source.value=/^(express|node:fs|fs)(\\/|$)|(^|\\/)(adapters|usecases)\\//]',
        message: 'core and shared code stays pure: no express, file system, adapters or use cases.',
      },
    ],
  },
};

// Tests sit beside the module they test (module.ts -> module.test.ts); they may reach across the
// rings (harness, stand-ins, real clients), product code never reaches into them.
const TESTS = '**/*.test.ts';
restrictions.tests = {
  imports: [{ regex: '(^|/)test/|\\.test\\.js$', message: 'product code never imports tests or the test harness.' }],
  dynamic: [
    {
      selector: 'ImportExpression[source.value=/(^|\\/)test\\/|\\.test\\.js$/]',
      message: 'product code never imports tests or the test harness.',
    },
  ],
};

/** One config block restricting `files` (minus `ignores` and tests) by the named groups. */
function ring(files, groups, ignores = []) {
  const chosen = [...groups, 'tests'].map((name) => restrictions[name]);
  return {
    files,
    ignores: [...ignores, TESTS],
    rules: {
      'no-restricted-imports': ['error', { patterns: chosen.flatMap((group) => group.imports) }],
      'no-restricted-syntax': ['error', ...chosen.flatMap((group) => group.dynamic)],
    },
  };
}

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', '.serverless/**', '.esbuild/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'off',
    },
  },
  // Product code: no function over 80 lines, counted from its first line to its last, comments
  // and blank lines included (nested functions count within their parent too). Tests and bench
  // are not product code.
  {
    files: ['functions/**/*.ts', 'webhook/**/*.ts'],
    ignores: [TESTS],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: false, skipComments: false, IIFEs: true }] },
  },
  ring(['functions/**/*.ts'], ['webhook', 'vendorClients', 'deadlineHome']),
  // The CLI is the one binary of both deployables: it may load webhook/server/main.ts when asked to serve.
  ring(['functions/entrypoints/cli.ts'], ['vendorClients', 'deadlineHome']),
  // Start-up: `etcd-guard --help` and `--version` must not load etcd3, the Kubernetes client or
  // express. The CLI loads what a command needs with await import(); it may import their types.
  {
    files: ['functions/entrypoints/cli.ts'],
    ignores: [TESTS],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '(^|/)(adapters/|webhook/|usecases/|cli-targets\\.js$)',
              allowTypeImports: true,
              message: 'the CLI loads this lazily (await import) so that start-up stays light; see ARCHITECTURE.md.',
            },
          ],
        },
      ],
    },
  },
  ring(['functions/usecases/**/*.ts'], ['webhook', 'vendorClients', 'deadlineHome', 'entrypoints']),
  ring(['functions/adapters/**/*.ts'], ['webhook', 'deadlineHome', 'entrypoints', 'useCases']),
  ring(['webhook/**/*.ts'], ['vendorClients', 'deadlineHome']),
  // The webhook's server is an adapter; its main.ts is the webhook's entry point.
  ring(['webhook/server/**/*.ts'], ['vendorClients', 'deadlineHome', 'entrypoints'], ['webhook/server/main.ts']),
  // The controller kinds (functions/domain/kinds) are domain: both deployables import them, so they
  // name I/O (a reach strategy, what to list) and never do it.
  ring(
    ['functions/domain/**/*.ts', 'functions/domain/kinds/**/*.ts', 'functions/ports/**/*.ts', 'functions/shared/**/*.ts'],
    ['webhook', 'vendorClients', 'deadlineHome', 'pure', 'entrypoints'],
  ),
  ring(['webhook/domain/**/*.ts'], ['vendorClients', 'deadlineHome', 'pure', 'entrypoints']),
  {
    files: ['**/*.mjs', '**/*.js'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
);
