import { globSync, readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

// `npm run test:unit`: the suites that need no etcd, no API stand-in, no server and no child
// process. A file is one when it imports none of the harness parts that open sockets or start
// processes; test/harness/no-io.ts then makes any socket or process in it fail, so the selection
// cannot drift. Everything else runs in `npm test` (vitest.config.ts).
const IO = [
  /harness\/(etcd-cluster|etcd-webhook|webhook|certs|hold-etcd-cluster|fake-kube|fake-portforward|https-client|process|peer-proxy|capi-workload|free-port|sockets|manifests)/,
  /node:(child_process|net|http|https|tls|dgram)/,
  /from 'express'|bin\/etcd-guard|webhook\/(server\/)?(main|app)\.js|from '\.\/(main|app)\.js'|startWebhook|\.listen\(/,
  /from 'esbuild'|bindAsync|EtcdProbeSession/,
];

const unitFiles = globSync('{functions,webhook,scripts,test}/**/*.test.ts').filter(
  (file) => !IO.some((pattern) => pattern.test(readFileSync(file, 'utf8'))),
);

export default defineConfig({
  test: {
    include: unitFiles,
    setupFiles: ['test/harness/no-io.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    reporters: ['default'],
  },
});
