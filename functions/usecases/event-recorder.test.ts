// Issue 30, item 7: "Events share one global table". 4,200 denials on distinct objects of one
// namespace filled the recorder's 4,096 series, and the next Denied Event of another tenant was
// dropped. The webhook runs as its own process (`etcd-guard webhook`) writing Events to the API
// stand-in; the flood and the other tenant's denial are ordinary AdmissionReviews.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_MAX_SERIES } from './event-recorder.js';
import { startFakeKubeApiServer, type FakeKubeApiServer } from '../../test/harness/fake-kube-apiserver.js';
import { fixtureReview, type TestReview } from '../../test/harness/reviews.js';
import { startWebhookProcess, type WebhookProcess } from '../../test/harness/webhook-process.js';
import { waitFor } from '../../test/harness/wait.js';

const FLOOD_OBJECTS = 4_200;
const FLOOD_NAMESPACE = 'tenant-flood';
const OTHER_NAMESPACE = 'tenant-other';
const CONCURRENCY = 8;

let workDir: string;
let kube: FakeKubeApiServer;
let webhook: WebhookProcess;
const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

beforeAll(async () => {
  workDir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-event-sharing-'));
  kube = await startFakeKubeApiServer();
  const configFile = path.join(workDir, 'guard.yaml');
  // No evaluation is ever stored: every guarded change is denied ("no fresh etcd evaluation").
  await writeFile(
    configFile,
    [
      `store: { kind: file, dir: ${path.join(workDir, 'store')} }`,
      'maxAgeSeconds: 60',
      'inlineRefresh: false',
      'targets:',
      '  - name: prod',
      '    endpoints: [https://127.0.0.1:9]',
      '    match: {}',
      '',
    ].join('\n'),
  );
  webhook = await startWebhookProcess({ configFile, insecureHttp: true, env: { KUBECONFIG: kube.kubeconfigFile } });
}, 60_000);

afterAll(async () => {
  agent.destroy();
  await webhook?.stop();
  await kube?.close();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

/** POSTs a review; its `allowed`, after checking the uid came back. */
function validate(review: TestReview): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${webhook.url}/validate?timeout=10s`,
      { method: 'POST', agent, headers: { 'content-type': 'application/json' }, timeout: 10_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const answer = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { response: { uid: string; allowed: boolean } };
          if (answer.response.uid !== review.request.uid) reject(new Error(`uid ${answer.response.uid} is not the review's`));
          else resolve(answer.response.allowed);
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(JSON.stringify(review));
  });
}

const deniedEventsIn = (namespace: string) =>
  kube.events().filter((event) => event.regarding.namespace === namespace && event.reason === 'Denied');

describe(`issue 30 item 7: ${FLOOD_OBJECTS} denials on distinct objects of one namespace`, () => {
  it("leave another namespace's next Denied Event written", async () => {
    expect(FLOOD_OBJECTS).toBeGreaterThan(EVENT_MAX_SERIES);
    let next = 0;
    const flood = async () => {
      while (next < FLOOD_OBJECTS) {
        const index = next++;
        const review = fixtureReview('kcp-scale-up-3-to-5.json', { namespace: FLOOD_NAMESPACE, name: `cp-${index}` });
        expect(await validate(review)).toBe(false);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, flood));
    const victim = fixtureReview('kcp-scale-up-3-to-5.json', { namespace: OTHER_NAMESPACE, name: 'cp-victim' });
    expect(await validate(victim)).toBe(false);
    await waitFor(`a Denied Event in ${OTHER_NAMESPACE}`, 30_000, () => deniedEventsIn(OTHER_NAMESPACE).length > 0);
    console.log(
      `Event sharing: ${FLOOD_OBJECTS} flood denials left ${deniedEventsIn(FLOOD_NAMESPACE).length} Events in ` +
        `${FLOOD_NAMESPACE}; ${OTHER_NAMESPACE}'s denial written (${deniedEventsIn(OTHER_NAMESPACE).length} Event)`,
    );
    expect(deniedEventsIn(OTHER_NAMESPACE)[0]?.regarding.name).toBe('cp-victim');
  }, 120_000);
});
