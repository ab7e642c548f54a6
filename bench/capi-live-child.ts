// Child process for the live bench's Cluster API row: the stand-ins a Cluster API target is reached
// through (the management API server with the Cluster's Secrets and Machines, the workload API
// server and its pod port-forward relay) and the workload's etcd, so that their CPU (WebSocket
// framing, the Secret and Machine reads, the Node list) is not counted in the process that
// measures. Reports what the measuring process needs over IPC once ready; answers 'streams' with
// the port-forward streams opened so far and 'stop' by tearing everything down and exiting.
import { startCapiWorkload } from '../test/harness/capi-workload.js';
import { startFakeKubeApiServer } from '../test/harness/fake-kube-apiserver.js';

export interface CapiLiveSetup {
  managementKubeconfig: string;
  cluster: { namespace: string; clusterName: string };
  etcd: { endpoints: string[]; tls: { caFile: string; certFile: string; keyFile: string } };
}

const [namespace, clusterName] = process.argv.slice(2);
if (!namespace || !clusterName) {
  process.stderr.write('usage: capi-live-child.ts NAMESPACE CLUSTER_NAME\n');
  process.exit(2);
}
const management = await startFakeKubeApiServer();
const workload = await startCapiWorkload(management, { namespace, clusterName });
for (const node of workload.nodeNames) {
  management.putObject('machines', {
    apiVersion: 'cluster.x-k8s.io/v1beta1',
    kind: 'Machine',
    metadata: {
      name: `${node}-machine`,
      namespace,
      labels: { 'cluster.x-k8s.io/cluster-name': clusterName, 'cluster.x-k8s.io/control-plane': '' },
    },
    status: { nodeRef: { name: node } },
  });
}
let stopping = false;
process.on('message', (message) => {
  if (message === 'streams') process.send?.({ streams: workload.relay.streamsOpened() });
  if (message === 'stop' && !stopping) {
    stopping = true;
    void Promise.all([workload.destroy(), management.close()]).finally(() => process.exit(0));
  }
});
const setup: CapiLiveSetup = {
  managementKubeconfig: management.kubeconfigFile,
  cluster: workload.cluster,
  etcd: { endpoints: workload.etcd.endpoints, tls: workload.etcd.clientTls },
};
process.send?.(setup);
