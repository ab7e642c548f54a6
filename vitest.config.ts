import { defineConfig } from 'vitest/config';

// Tests start real etcd clusters on loopback; two cores, so at most two files at once.
export default defineConfig({
  test: {
    include: ['{functions,webhook,scripts,test}/**/*.test.ts'],
    globalSetup: ['test/harness/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
