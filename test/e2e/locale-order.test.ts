// Orders that exist for determinism do not depend on the process's locale: the control-plane
// inventory (workload Nodes, Cluster API Machines) and the discovered target list come out in
// code-unit order in a process under LC_ALL=C and under LC_ALL=cs_CZ.UTF-8, where ICU's
// collation puts "ch" after "h" (so localeCompare would order them differently).
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '../..');
const url = (file: string) => JSON.stringify(pathToFileURL(path.join(ROOT, file)).href);

/** Node names where Czech collation and code units disagree ("ch" is one letter after "h"). */
const NAMES = ['cp-i', 'cp-h', 'cp-ch', 'cp-c'];
const CODE_UNIT_ORDER = ['cp-c', 'cp-ch', 'cp-h', 'cp-i'];

const SCRIPT = `
const { startFakeKubeApiServer } = await import(${url('test/harness/fake-kube-apiserver.ts')});
const { listControlPlaneNodes } = await import(${url('functions/adapters/kube-nodes.ts')});
const { listControlPlaneMachines } = await import(${url('functions/adapters/capi-machines.ts')});
const { createCustomObjectsApi } = await import(${url('functions/adapters/kube-discovery.ts')});
const { Deadline } = await import(${url('functions/domain/deadline.ts')});
const { mergeTargets, staticTarget } = await import(${url('functions/domain/targets.ts')});
const names = ${JSON.stringify(NAMES)};
const fake = await startFakeKubeApiServer();
try {
  fake.setNodes(names.map((name) => ({ name, labels: { 'node-role.kubernetes.io/control-plane': '' } })));
  for (const name of names) {
    fake.putObject('machines', {
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Machine',
      metadata: {
        name: 'm-' + name,
        namespace: 'fleet',
        labels: { 'cluster.x-k8s.io/cluster-name': 'prod', 'cluster.x-k8s.io/control-plane': '' },
      },
      status: { nodeRef: { name } },
    });
  }
  const nodes = await listControlPlaneNodes({ kubeconfigFile: fake.kubeconfigFile, nodeLabel: 'node-role.kubernetes.io/control-plane' }, 5000);
  const machines = await listControlPlaneMachines(
    createCustomObjectsApi(fake.kubeconfigFile),
    { namespace: 'fleet', clusterName: 'prod' },
    Deadline.after(5000),
  );
  const discovered = names.map((name) => ({
    ...staticTarget({ name: 'capi-fleet-' + name, endpoints: [], timeout: 1000, match: {} }),
    source: 'capi',
  }));
  const targets = mergeTargets([], discovered).targets;
  process.stdout.write(JSON.stringify({
    collator: ['h', 'ch'].sort((a, b) => a.localeCompare(b)),
    nodes: nodes.map((node) => node.name),
    machines: machines.map((machine) => machine.name),
    targets: targets.map((target) => target.name),
  }));
} finally {
  await fake.close();
}
`;

interface Orders {
  collator: string[];
  nodes: string[];
  machines: string[];
  targets: string[];
}

async function ordersUnder(locale: string): Promise<Orders> {
  const env: NodeJS.ProcessEnv = { ...process.env, LC_ALL: locale, LANG: locale };
  delete env.LC_MESSAGES;
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', SCRIPT], {
    cwd: ROOT,
    env,
    timeout: 60_000,
  });
  return JSON.parse(stdout) as Orders;
}

describe('name orders kept for determinism', () => {
  it('are the same code-unit order under LC_ALL=C and LC_ALL=cs_CZ.UTF-8', async () => {
    const [c, czech] = await Promise.all([ordersUnder('C'), ordersUnder('cs_CZ.UTF-8')]);
    // The premise: the Czech process's collator does order these names differently.
    expect(c.collator).toEqual(['ch', 'h']);
    expect(czech.collator).toEqual(['h', 'ch']);
    for (const orders of [c, czech]) {
      expect(orders.nodes).toEqual(CODE_UNIT_ORDER);
      expect(orders.machines).toEqual(CODE_UNIT_ORDER);
      expect(orders.targets).toEqual(CODE_UNIT_ORDER.map((name) => `capi-fleet-${name}`));
    }
  }, 90_000);
});
