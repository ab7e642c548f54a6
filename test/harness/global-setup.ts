// Prints which etcd the real-etcd suites run against, once per vitest run, so a CI log says it.
import { etcdBinaries, etcdVersion } from './etcd-cluster.js';

export default async function setup(): Promise<void> {
  const { etcd } = etcdBinaries();
  try {
    console.log(`etcd under test: ${await etcdVersion(etcd)} (${etcd})`);
  } catch (error) {
    // Suites without etcd still run; the ones that need it fail naming the binary.
    console.log(`etcd under test: none usable (${error instanceof Error ? error.message : String(error)})`);
  }
}
