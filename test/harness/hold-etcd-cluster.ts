// A child for test/harness/etcd-cluster.test.ts: starts a one-member cluster with the harness,
// prints its member pids and temp dir as one JSON line, and waits to be signalled.
import { startEtcdCluster } from './etcd-cluster.js';

const cluster = await startEtcdCluster({ size: 1, name: 'teardown' });
process.stdout.write(`${JSON.stringify({ pids: cluster.members.map((member) => member.pid), dir: cluster.dir })}\n`);
setInterval(() => undefined, 60_000);
